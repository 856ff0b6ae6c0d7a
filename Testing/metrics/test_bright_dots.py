"""``benchmarks/bright_dots.py``'s lesion-against-other measures (issue 13): each dot's DWI over
its registered mirror and a network's highest probability on it, and how well a measure tells
lesion dots from other dots, on a brain drawn by hand (no ISLES'22 data needed)."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.io import Study, Volume
from LambdaSegmentLib.io.units import eadc_from_adc


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/bright_dots.py")


def test_separability_is_the_share_of_pairs_in_which_the_lesion_dot_is_more_lesion_like(script) -> None:
    # pairs (lesion, other): (2, 1) yes, (2, 2) a tie, (3, 1) yes, (3, 2) yes
    assert script.separability([2.0, 3.0], [1.0, 2.0], higher_is_lesion=True) == pytest.approx(3.5 / 4)
    # for ADC the lower is the more lesion-like
    assert script.separability([2.0, 3.0], [1.0, 2.0], higher_is_lesion=False) == pytest.approx(0.5 / 4)


def symmetric_brain_with_dots() -> tuple[Study, np.ndarray, np.ndarray]:
    """A left-right symmetric ellipsoidal brain (2 mm voxels, LPS axes) holding one one-sided
    lesion dot and a bilateral pair of dots of no lesion, all 2 x 2 x 2 voxels at twice the DWI."""
    nk, nj, ni = 14, 48, 48
    k, j, i = np.mgrid[:nk, :nj, :ni]
    brain = ((k - 6.5) / 6.5) ** 2 + ((j - 23.5) / 21.0) ** 2 + ((i - 23.5) / 21.0) ** 2 <= 1.0
    rng = np.random.default_rng(0)
    dwi = np.where(brain, 1000.0 * (1.0 + 0.01 * rng.standard_normal(brain.shape)), 0.0).astype(np.float32)
    adc = np.where(brain, 0.8, 0.0).astype(np.float32)
    truth = np.zeros(brain.shape, dtype=bool)
    truth[6:8, 30:32, 14:16] = True  # one-sided: its mirror (i 32-33) is normal tissue
    dwi[truth] *= 2.0
    adc[truth] = 0.5
    for i0 in (14, 32):  # a pair, mirror images of each other
        dwi[6:8, 14:16, i0:i0 + 2] *= 2.0
    probability = np.where(truth, 0.9, 0.0).astype(np.float32)
    probability[6:8, 14:16, 14:16] = 0.2
    geometry = dict(spacing_mm=(2.0, 2.0, 2.0), origin_mm=(-47.0, -47.0, -13.0))
    dwi_volume, adc_volume = Volume(dwi, **geometry), Volume(adc, **geometry)
    study = Study(dwi_volume, adc_volume, eadc_from_adc(adc_volume, 1000.0), 1000.0, "1e-3 mm2/s", {"dwi": "<memory>"})
    return study, truth, probability


@pytest.mark.needs_atlas  # study_dots splits off the posterior fossa by the atlas in ../shared
def test_a_one_sided_lesion_dot_stands_out_from_its_mirror_and_a_bilateral_pair_does_not(script) -> None:
    study, truth, probability = symmetric_brain_with_dots()
    measured = script.study_dots(study, truth, mirror=True, probability=probability)
    (lesion,), others = measured["dots"]["lesion"], measured["dots"]["other"]
    assert len(others) == 2
    assert lesion["mirror"] > 1.2  # smoothed over a voxel (σ 1), as the check sees it, a 2x dot of 8 voxels reads ~1.26
    assert all(other["mirror"] < 1.1 for other in others)
    assert lesion["max_probability"] == pytest.approx(0.9)
    assert sorted(other["max_probability"] for other in others) == pytest.approx([0.0, 0.2])
    summary = script.summary([measured])
    assert summary["separability"]["mirror"] == 1.0
    assert summary["separability"]["max_probability"] == 1.0
    assert summary["lesion"]["n"] == 1 and summary["other"]["n"] == 2


@pytest.mark.needs_atlas  # study_dots splits off the posterior fossa by the atlas in ../shared
def test_without_the_options_a_dot_carries_only_its_contrasts(script) -> None:
    study, truth, _ = symmetric_brain_with_dots()
    measured = script.study_dots(study, truth)
    assert set(measured["dots"]["lesion"][0]) == {"dwi_ring", "adc_ring", "adc_brain", "posterior_fossa"}
    assert "mirror" not in script.summary([measured])["separability"]


@pytest.mark.needs_atlas  # study_dots splits off the posterior fossa by the atlas in ../shared
def test_the_dots_a_network_reaches_are_counted_per_threshold(script) -> None:
    study, truth, probability = symmetric_brain_with_dots()
    summary = script.summary([script.study_dots(study, truth, probability=probability)])
    # the lesion dot at 0.9, the pair's dots at 0.2 and 0.0
    assert summary["reached"] == {"0.5": [1, 0], "0.1": [1, 1], "0.01": [1, 1], "0.001": [1, 1]}
