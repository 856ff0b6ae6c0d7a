"""Shared test configuration: deterministic CPU torch and the optional real data in ../shared."""

from __future__ import annotations

from pathlib import Path

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
def isles_case() -> Path:
    """The real ISLES'22 case in ../shared (never copied into the project); skips when absent."""
    if not (ISLES_CASE / "sub-strokecase0001_ses-0001_dwi.nii.gz").exists():
        pytest.skip(f"real ISLES'22 case not present at {ISLES_CASE}")
    return ISLES_CASE
