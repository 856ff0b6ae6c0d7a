"""``benchmarks/contrast_response.py``: lesion voxels binned by their DWI and ADC contrast, with
the network's mean probability per bin (issue 13), on arrays built by hand."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/contrast_response.py")


def test_lesion_voxels_are_binned_by_dwi_and_adc_contrast_with_their_mean_probability(script) -> None:
    dwi = np.array([1.3, 1.3, 1.5, 2.7, 0.9, 1.3])
    adc = np.array([0.85, 0.85, 0.65, 0.5, 0.8, 1.2])
    probability = np.array([0.2, 0.8, 0.6, 1.0, 0.9, 0.0])
    lesion_ml = np.array([0.05, 0.05, 20.0, 20.0, 0.05, 0.0])  # the last voxel is no lesion
    bins = script.response_bins(dwi, adc, probability, lesion_ml)
    # the voxel at 0.9 x the brain's DWI is left out; the non-lesion voxel too
    assert bins == {"0-0.1 | 1.2-1.4 | 0.8-0.9": [2, pytest.approx(1.0), 1],
                    ">=10 | 1.4-1.6 | 0.6-0.7": [1, pytest.approx(0.6), 1], ">=10 | >=2.5 | 0-0.6": [1, pytest.approx(1.0), 1]}
    table = script.table(bins)
    assert list(table) == ["0-0.1 | 1.2-1.4 | 0.8-0.9", ">=10 | 1.4-1.6 | 0.6-0.7", ">=10 | >=2.5 | 0-0.6"]
    assert table["0-0.1 | 1.2-1.4 | 0.8-0.9"] == {"voxels": 2, "mean_probability": 0.5, "found_share": 0.5}


def test_counts_of_several_studies_add_up_bin_by_bin(script) -> None:
    one = {"0-0.1 | 1.2-1.4 | 0.8-0.9": [2, 1.0, 1]}
    two = {"0-0.1 | 1.2-1.4 | 0.8-0.9": [1, 0.5, 1], "1-10 | >=2.5 | >=1": [3, 0.3, 0]}
    total = script.merged(script.merged({}, one), two)
    assert total == {"0-0.1 | 1.2-1.4 | 0.8-0.9": [3, 1.5, 2], "1-10 | >=2.5 | >=1": [3, 0.3, 0]}
    assert script.table(total)["1-10 | >=2.5 | >=1"]["voxels"] == 3


def test_each_lesion_voxel_gets_its_whole_lesion_s_volume_in_ml(script) -> None:
    from types import SimpleNamespace

    from LambdaSegmentLib.io import Volume

    truth = np.zeros((4, 10, 10), dtype=bool)
    truth[1, 1:3, 1:3] = True  # 4 voxels of 2 x 2 x 5 mm = 0.08 mL
    truth[2:4, 5:10, 5:10] = True  # 50 voxels = 1.0 mL, of which one row lies outside the brain
    brain = np.ones_like(truth)
    brain[:, 9, :] = False
    prepared = SimpleNamespace(truth=truth, brain=brain, study=SimpleNamespace(dwi=Volume(np.zeros(truth.shape, np.float32), (2.0, 2.0, 5.0))))
    ml = script.lesion_ml(prepared)
    assert ml[1, 1, 1] == pytest.approx(0.08) and ml[3, 5, 5] == pytest.approx(1.0)
    assert ml[3, 9, 5] == 0.0 and ml[0, 0, 0] == 0.0  # outside the brain; no lesion
