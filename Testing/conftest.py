"""Shared test configuration: deterministic CPU torch and the optional real data in ../shared."""

from __future__ import annotations

import importlib.util
import locale
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from LambdaSegmentLib.synthesis.lesymap import lesymap_path
from LambdaSegmentLib.synthesis.template import atlas_path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
ISLES_CASE = SHARED / "data" / "isles22" / "sub-strokecase0001"


def pytest_runtest_setup(item: pytest.Item) -> None:
    # The atlas lives in ../shared (CC BY-SA, never committed), like the real case: skip cleanly without it.
    if item.get_closest_marker("needs_atlas") and not atlas_path().exists():
        pytest.skip(f"arterial-territory atlas not present at {atlas_path()}")
    # the default ranges draw some lesion shapes from the LESYMAP masks, also in ../shared
    if item.get_closest_marker("needs_atlas") and not (lesymap_path() / "ch2.nii.gz").exists():
        pytest.skip(f"LESYMAP lesion masks not present at {lesymap_path()}")


@pytest.fixture(autouse=True)
def _deterministic_torch() -> None:
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True, warn_only=True)


@pytest.fixture
def c_locale() -> Iterator[None]:
    """The process's character type locale set to "C" for the test, as writing a DICOM file
    with SimpleITK leaves it (GDCM sets it; ``Testing/io/test_dicom_series.py`` does so): open()
    without an encoding then defaults to ASCII."""
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)


@pytest.fixture
def isles_case() -> Path:
    """The real ISLES'22 case in ../shared (never copied into the project); skips when absent."""
    if not (ISLES_CASE / "sub-strokecase0001_ses-0001_dwi.nii.gz").exists():
        pytest.skip(f"real ISLES'22 case not present at {ISLES_CASE}")
    return ISLES_CASE


@pytest.fixture(scope="session")
def whole_grid_and_boxed() -> Callable[[Any], tuple[np.ndarray, np.ndarray]]:
    """``f(dwi)``: the brain mask's morphology on the whole working grid and on the box around
    the head, from the same inputs, so that a test can assert the two are one mask."""
    from LambdaSegmentLib.io.foreground import brain_foreground
    from LambdaSegmentLib.preprocessing.slice_axis import find_slice_axis

    module = importlib.import_module("LambdaSegmentLib.preprocessing.brain_mask")  # the package exports the function of that name

    def whole_and_boxed(dwi: Any) -> tuple[np.ndarray, np.ndarray]:
        work = module._coarse_in_plane(dwi)  # as brain_mask() takes it
        tissue, head = module._bright_tissue(work, brain_foreground(work))
        return module._dwi_morphology(work, tissue, head, find_slice_axis(work)), module._dwi_morphology_in_box(work, tissue, head)

    return whole_and_boxed


@pytest.fixture(scope="session")
def load_script() -> Iterator[Callable[[str], ModuleType]]:
    """Load a repository script that is not a package module (``benchmarks/...``,
    ``scripts/...``, a path from the repository root) as a module. It is registered in
    ``sys.modules`` under its file's stem for the session (dataclasses look their module up
    there)."""
    added: list[str] = []

    def load(relative: str) -> ModuleType:
        path = REPO_ROOT / relative
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        added.append(spec.name)
        spec.loader.exec_module(module)
        return module

    yield load
    for name in added:
        sys.modules.pop(name, None)
