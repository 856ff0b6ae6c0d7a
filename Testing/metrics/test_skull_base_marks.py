"""``benchmarks/skull_base_marks.py``: what a model marks in the skull-base zone, on a study
built by hand (no ISLES'22 data needed)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from LambdaSegmentLib.io import Volume


@pytest.fixture(scope="module")
def marks(load_script):
    return load_script("benchmarks/skull_base_marks.py").skull_base_marks


@pytest.mark.parametrize("superior_is_plus_k", [True, False])
def test_marks_count_only_the_inferior_edge_band_outside_the_lesion(marks, superior_is_plus_k: bool) -> None:
    shape = (10, 20, 20)  # (k, j, i), 2 mm voxels
    brain = np.ones(shape, dtype=bool)
    depth = np.full(shape, 20.0)
    depth[:, :, :2] = 2.0  # an edge band two voxels wide along one side
    dwi, adc = np.ones(shape), np.full(shape, 0.8)
    probability = np.zeros(shape, dtype=np.float32)
    inferior = 0 if superior_is_plus_k else 9  # the lowest slice, whichever way k runs
    superior = 9 - inferior
    dwi[inferior, :10, :2] = 3.0  # a bright rim of 20 voxels in the lowest slice ...
    probability[inferior, :5, :2] = 0.9  # ... half of it marked
    probability[superior, :5, :2] = 0.9  # marked at the top of the head: not the skull base
    probability[inferior, 10:, 10:] = 0.9  # marked deep in the brain: not the edge band
    truth = np.zeros(shape, dtype=bool)
    truth[inferior, 18:, 0] = True  # a lesion at the edge: it and 2 voxels around it are left out
    probability[inferior, 17:, 0] = 0.9  # within two voxels of it
    direction = np.diag([1.0, 1.0, 1.0 if superior_is_plus_k else -1.0])  # LPS: +z is superior
    volume = lambda array: Volume(array.astype(np.float32), (2.0, 2.0, 2.0), direction=direction)  # noqa: E731
    prepared = SimpleNamespace(study=SimpleNamespace(dwi=volume(dwi), adc=volume(adc)), brain=brain, truth=truth,
                               probability=probability, depth_mm=depth)
    result = marks(prepared)
    voxel_ml = 8.0 / 1000
    assert result["bright_ml"] == pytest.approx(20 * voxel_ml)
    assert result["bright_marked_fraction"] == pytest.approx(0.5)
    assert result["marked_ml"] == pytest.approx(10 * voxel_ml)  # the lesion's neighbourhood, top and deep marks left out
    assert result["marked_dwi_median"] == pytest.approx(3.0, rel=1e-3)
    assert result["lesion_adc_median"] == pytest.approx(0.8)
