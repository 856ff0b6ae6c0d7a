"""``benchmarks/lesion_sides.py`` (issue 13): which side of a study's own registered midline each
lesion lies on, on a symmetric phantom (no ISLES'22 data needed)."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.preprocessing.symmetry import register_contralateral


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/lesion_sides.py")


@pytest.fixture(scope="module")
def phantom():
    """A left-right symmetric brain (2 mm voxels, i along LPS +x, the patient's left) with two dark
    ventricles for the registration to hold on, and three lesions: on the left (high i), on the
    right (low i) and astride the midline (i 23.5)."""
    kk, jj, ii = np.indices((16, 48, 48)).astype(float)
    brain = ((kk - 7.5) / 7) ** 2 + ((jj - 23.5) / 20) ** 2 + ((ii - 23.5) / 18) ** 2 < 1
    dwi = np.where(brain, 100.0, 0.0)
    for centre in (17.5, 29.5):
        dwi[((jj - 20) / 8) ** 2 + ((ii - centre) / 3) ** 2 + ((kk - 7.5) / 4) ** 2 < 1] = 30.0
    dwi[((jj - 34) / 4) ** 2 + ((ii - 23.5) / 10) ** 2 + ((kk - 7.5) / 5) ** 2 < 1] = 60.0  # asymmetric in j only
    truth = np.zeros(brain.shape, dtype=bool)
    truth[7:9, 30:32, 33:35] = True  # left
    truth[5:7, 12:14, 12:14] = True  # right
    truth[9:11, 10:12, 23:25] = True  # on the midline
    grid = Volume(dwi.astype(np.float32), (2.0, 2.0, 2.0))
    return grid, truth, register_contralateral(grid, brain)


def test_each_lesion_is_counted_on_its_side_of_the_registered_midline(script, phantom) -> None:
    grid, truth, registration = phantom
    counted = script.sides(truth, grid, registration)
    assert counted == {"left": {"components": 1, "voxels": 8}, "right": {"components": 1, "voxels": 8},
                       "midline": {"components": 1, "voxels": 8}}


def test_the_network_s_reach_is_counted_per_side(script, phantom) -> None:
    grid, truth, registration = phantom
    probability = np.zeros(truth.shape, dtype=np.float32)
    probability[7, 30, 33] = 0.9  # reaches the left lesion
    probability[5, 12, 12] = 0.4  # under the threshold on the right one
    counted = script.sides(truth, grid, registration, probability)
    assert [counted[side]["reached"] for side in script.SIDES] == [1, 0, 0]


def test_a_mirrored_study_swaps_the_sides(script, phantom) -> None:
    grid, truth, _ = phantom
    flipped = Volume(np.ascontiguousarray(grid.array[:, :, ::-1]), grid.spacing_mm)
    registration = register_contralateral(flipped, np.asarray(flipped.array) > 0)
    counted = script.sides(np.ascontiguousarray(truth[:, :, ::-1]), flipped, registration)
    assert [counted[side]["components"] for side in script.SIDES] == [1, 1, 1]
    assert script.side_of(flipped.index_to_lps(np.asarray([14.0, 31.0, 8.0])), registration) == "right"
