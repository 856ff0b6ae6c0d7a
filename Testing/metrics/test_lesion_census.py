"""``benchmarks/lesion_census.py`` (issue 13): the reference's lesions by size, those a mask finds,
and the lesion-wise F1 each size class allows, on masks drawn by hand (no ISLES'22 data needed)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/lesion_census.py")


def test_the_size_bins_are_named_by_their_voxels(script) -> None:
    assert script.size_bin_names() == ["1", "2", "3-5", "6-25", "26-80", ">=81"]


def test_the_ceiling_is_the_f1_of_finding_every_lesion_of_at_least_that_size_and_nothing_else(script) -> None:
    sizes = np.array([1, 1, 2, 4, 30])
    assert script.f1_ceiling(sizes, 1) == 1.0
    assert script.f1_ceiling(sizes, 3) == pytest.approx(2 / (2 + 3 / 2))  # two found, three missed
    assert script.f1_ceiling(sizes, 81) == 0.0


def test_the_census_counts_reference_lesions_by_size_and_those_the_mask_touches(script) -> None:
    truth = np.zeros((4, 20, 20), dtype=bool)
    truth[1, 2, 2] = True  # 1 voxel, missed
    truth[1, 5, 5:7] = True  # 2 voxels, found by one voxel
    truth[2, 10:13, 10:13] = True  # 9 voxels, found
    mask = np.zeros_like(truth)
    mask[1, 5, 6] = True
    mask[2, 11, 11:14] = True  # overlaps the 9-voxel lesion and sticks out of it
    mask[3, 18, 18] = True  # a false positive component
    probability = np.where(truth, 0.05, 0.0)
    probability[1, 5, 6] = 0.3
    probability[2, 11, 11] = 0.9
    counted = script.census(mask, truth, probability)
    assert counted["reference"] == {"1": 1, "2": 1, "3-5": 0, "6-25": 1, "26-80": 0, ">=81": 0}
    assert counted["found"] == {"1": 0, "2": 1, "3-5": 0, "6-25": 1, "26-80": 0, ">=81": 0}
    # the bare network: the 9-voxel lesion at 0.9, the 2-voxel one at 0.3, the single voxel at 0.05
    assert counted["network_at_0.5"] == {"1": 0, "2": 0, "3-5": 0, "6-25": 1, "26-80": 0, ">=81": 0}
    assert counted["network_at_0.1"] == {"1": 0, "2": 1, "3-5": 0, "6-25": 1, "26-80": 0, ">=81": 0}
    assert counted["false_positive_components"] == 1
    assert counted["lesion_f1"] == pytest.approx(round(2 / (2 + (1 + 1) / 2), 4))
    assert counted["f1_ceiling"][">=2"] == pytest.approx(round(2 / (2 + 1 / 2), 4))
