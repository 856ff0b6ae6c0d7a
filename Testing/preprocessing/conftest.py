"""The preprocessing tests use the same synthetic head phantom as the I/O tests (one definition)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_io_phantoms", Path(__file__).parents[1] / "io" / "conftest.py")
_io_phantoms = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_io_phantoms)

head_phantom = _io_phantoms.head_phantom
rotation = _io_phantoms.rotation
