"""Fixtures of the training tests: tiny labelled folders written from synthetic studies."""

from __future__ import annotations

from pathlib import Path

import pytest
from lambdasegment_training_helpers import write_bids_case


@pytest.fixture(scope="session")
def labelled_folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(training folder, validation folder), one tiny labelled synthetic case each."""
    base = tmp_path_factory.mktemp("labelled")
    return write_bids_case(base / "train", "train01", seed=11), write_bids_case(base / "val", "val01", seed=12)
