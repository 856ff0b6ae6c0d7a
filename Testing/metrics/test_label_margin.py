"""``benchmarks/label_margin.py``: the rings just inside and just outside a label, in-plane only
(issue 13: how wide the experts draw against the generator), on studies built by hand."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from LambdaSegmentLib.io import Volume


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/label_margin.py")


def test_the_ring_structure_stays_in_the_slice_plane(script) -> None:
    for slice_axis in range(3):
        structure = script.in_plane_ring_structure(slice_axis)
        assert structure.sum() == 9 and structure.sum(axis=2 - slice_axis).max() == 1


@pytest.mark.parametrize("spacing", [(1.0, 1.0, 5.0), (5.0, 1.0, 1.0)])
def test_inner_outer_and_core_rings_with_their_brightness(script, spacing: tuple[float, float, float]) -> None:
    shape = (9, 9, 9)  # (k, j, i); the slice axis is the one with the 5 mm spacing
    label = np.zeros(shape, dtype=bool)
    label[2:7, 2:7, 2:7] = True
    dwi = np.ones(shape, np.float32)
    dwi[label] = 3.0
    adc = np.full(shape, 0.8, np.float32)
    adc[label] = 0.4
    study = SimpleNamespace(dwi=Volume(dwi, spacing), adc=Volume(adc, spacing))
    rows = script.margin_rows(study, label, np.ones(shape, dtype=bool))
    # in-plane only: each of the 5 slices holds a 5 x 5 square, 16 on its edge and 9 inside it;
    # the ring outside is 24 voxels a slice, and no voxel above or below the label counts
    assert (rows["inner"]["voxels"], rows["core"]["voxels"], rows["outer"]["voxels"]) == (80, 45, 120)
    assert rows["inner"]["dwi"] == rows["core"]["dwi"] == 3.0 and rows["outer"]["dwi"] == 1.0
    assert rows["outer"]["adc"] == 1.0 and rows["core"]["adc"] == 0.5  # over the brain's median ADC, 0.8
