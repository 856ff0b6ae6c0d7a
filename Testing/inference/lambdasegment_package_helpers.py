"""Reading and rewriting a model package's manifest by hand, for the tests of attached networks."""

from __future__ import annotations

import json
from pathlib import Path


def manifest_of(directory: Path) -> dict:
    return json.loads((directory / "manifest.json").read_text(encoding="utf-8"))


def set_manifest(directory: Path, **entries: object) -> None:
    """Rewrite ``directory``'s manifest with ``entries`` set (its weights' record untouched)."""
    manifest = {**manifest_of(directory), **entries}
    (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
