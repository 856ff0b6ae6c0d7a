"""``benchmarks/small_lesion_detection.py --blur`` (issue 13, rule 129): a study as acquired with a
blurrier in-plane point-spread function, on a phantom (no ISLES'22 data needed)."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.io import Volume, load_study


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/small_lesion_detection.py")


def phantom(spacing=(2.0, 2.0, 5.0)):
    """A 12 x 40 x 40 brain (nonzero inside a disc on every slice) of ADC 0.8 x 10⁻³ mm²/s, S0 100,
    with one bright, restricted 1-voxel dot (S0 130, ADC 0.5) on slice 6; thick slices along k."""
    kk, jj, ii = np.indices((12, 40, 40))
    brain = (jj - 20) ** 2 + (ii - 20) ** 2 < 15**2
    s0 = np.where(brain, 100.0, 0.0)
    adc = np.where(brain, 0.8, 0.0)
    s0[6, 20, 20], adc[6, 20, 20] = 130.0, 0.5
    dwi = s0 * np.exp(-adc)
    return load_study(dwi=Volume(dwi.astype(np.float32), spacing), adc=Volume(adc.astype(np.float32), spacing),
                      adc_unit="1e-3 mm2/s", b_value=1000.0)


def test_no_blur_is_the_study_itself(script) -> None:
    study = phantom()
    assert script.blurred(study, 0.0) is study


def test_the_blur_spreads_a_dot_in_plane_only_keeps_the_grid_and_the_brain_and_recomputes_the_adc(script) -> None:
    study = phantom()
    soft = script.blurred(study, 1.0)
    dwi, adc = np.asarray(soft.dwi.array), np.asarray(soft.adc.array)
    before = np.asarray(study.dwi.array)
    assert soft.dwi.spacing_mm == study.dwi.spacing_mm and soft.dwi.array.shape == study.dwi.array.shape
    assert np.array_equal(dwi > 0, before > 0)  # nothing written outside the brain, nothing of it lost
    assert dwi[6, 20, 20] < before[6, 20, 20] and dwi[6, 20, 21] > before[6, 20, 21]  # the dot spreads in-plane
    np.testing.assert_allclose(dwi[5], before[5], rtol=1e-5)  # never across slices
    np.testing.assert_allclose(dwi[6, 5:8, 18:23], before[6, 5:8, 18:23], rtol=1e-5)  # the edge keeps its level
    assert 0.5 < adc[6, 20, 20] < 0.8  # the ADC from the blurred signals: the dot's restriction diluted
