"""Fixtures of the CLI tests: a small untrained model package and phantom studies on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from lambdasegment_cli_helpers import StudyFiles, write_phantom

from LambdaSegmentLib.inference.untrained import save_untrained_package


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small untrained LambdaUNet package (receptive radius 4 slices)."""
    return save_untrained_package(tmp_path_factory.mktemp("model") / "untrained")


@pytest.fixture(scope="session")
def axial_study(tmp_path_factory: pytest.TempPathFactory) -> StudyFiles:
    return write_phantom(tmp_path_factory.mktemp("axial"), "axial", size_ijk=(40, 48, 12), spacing_mm=(3.5, 3.5, 6.0))


@pytest.fixture(scope="session")
def oblique_study(tmp_path_factory: pytest.TempPathFactory) -> StudyFiles:
    """Oblique (tilted about all three axes) and anisotropic in every direction."""
    return write_phantom(
        tmp_path_factory.mktemp("oblique"), "oblique",
        size_ijk=(44, 38, 13), spacing_mm=(3.1, 3.6, 6.5), tilt_deg=(12.0, -7.0, 20.0),
    )
