"""``benchmarks/error_signal.py``: a fold network's voxel errors split by signal and by lesion
(issue 13's rule 137), on arrays built by hand (no ISLES'22 data needed)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/error_signal.py")


def scene() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two expert lesions on slice 2: a 3 x 3 one whose centre row is marked (a found lesion with
    a missed margin) and a 2 x 2 one never reached; one false voxel. DWI ratio 2 in the marked
    voxels, 1.4 in the rest of the lesions, 3 at the false voxel; ADC ratio 0.6 / 0.9 / 0.8."""
    shape = (5, 12, 12)
    truth = np.zeros(shape, bool)
    truth[2, 1:4, 1:4] = True
    truth[2, 8:10, 8:10] = True
    marked = np.zeros(shape, bool)
    marked[2, 2, 1:4] = True
    marked[2, 6, 6] = True
    dwi, adc = np.ones(shape), np.ones(shape)
    dwi[truth], adc[truth] = 1.4, 0.9
    dwi[marked], adc[marked] = 2.0, 0.6
    dwi[2, 6, 6], adc[2, 6, 6] = 3.0, 0.8
    probability = np.where(marked, 0.9, 0.0)
    probability[2, 8, 8] = 0.2
    return truth, marked, probability, dwi, adc


def test_voxels_are_split_into_found_missed_and_false_with_their_signal(script) -> None:
    truth, marked, _, dwi, adc = scene()
    split = script.voxel_split(truth, marked, dwi, adc)
    assert {name: group["voxels"] for name, group in split.items()} == {"found": 3, "missed": 10, "false": 1}
    assert split["found"]["dwi_ratio"] == [2.0, 2.0, 2.0] and split["missed"]["adc_ratio"] == [0.9, 0.9, 0.9]
    assert split["false"]["dwi_ratio"] == [3.0, 3.0, 3.0]
    assert script.voxel_split(truth, np.zeros_like(marked), dwi, adc)["false"] == {"voxels": 0, "dwi_ratio": None, "adc_ratio": None}


def test_missed_voxels_are_split_into_found_lesions_margins_and_unreached_lesions(script) -> None:
    truth, marked, probability, dwi, adc = scene()
    lesions, missed = script.lesion_reach(truth, marked, probability, dwi, adc)
    assert missed == {"in_reached": 6, "in_unreached": 4}
    assert [(row["voxels"], row["marked"], row["max_probability"]) for row in lesions] == [(9, 3, 0.9), (4, 0, 0.2)]
    assert lesions[0]["dwi_ratio"] == 1.4 and lesions[1]["adc_ratio"] == 0.9
