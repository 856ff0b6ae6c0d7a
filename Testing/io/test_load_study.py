"""load_study: every input route, ADC units, grids and b-values."""

from __future__ import annotations

import numpy as np
import pytest
import SimpleITK as sitk

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume, load_study, write_volume
from LambdaSegmentLib.io.foreground import brain_foreground
from LambdaSegmentLib.io.study import MEMORY


@pytest.mark.parametrize(("unit", "scale"), [("mm2/s", 1e-3), ("1e-3 mm2/s", 1.0), ("1e-6 mm2/s", 1e3)])
def test_adc_unit_is_detected_and_converted_to_1e3_mm2_per_s(head_phantom, unit, scale):
    dwi, adc, _ = head_phantom()
    study = load_study(dwi=dwi, adc=adc.with_array(adc.array * scale))
    assert study.adc_unit_detected == unit
    np.testing.assert_allclose(study.adc.array, adc.array, rtol=1e-5)
    assert study.sources == {"dwi": MEMORY, "adc": MEMORY}


def test_adc_stored_as_integers_in_1e6_mm2_per_s_from_disk(tmp_path, head_phantom):
    dwi, adc, _ = head_phantom()
    dwi_path = write_volume(dwi, tmp_path / "dwi.nii.gz")
    adc_path = write_volume(adc.with_array(np.round(adc.array * 1000).astype(np.int16)), tmp_path / "adc.nrrd")
    study = load_study(dwi=dwi_path, adc=adc_path)
    assert study.adc_unit_detected == "1e-6 mm2/s"
    assert study.sources == {"dwi": str(dwi_path), "adc": str(adc_path)}
    np.testing.assert_allclose(study.adc.array, adc.array, atol=6e-4)


def test_eadc_is_exp_minus_b_adc_everywhere_background_included(head_phantom):
    dwi, adc, _ = head_phantom()
    study = load_study(dwi=dwi, adc=adc, b_value=800)
    np.testing.assert_allclose(study.eadc.array, np.minimum(np.exp(-800 * adc.array / 1000), 1), rtol=1e-5)
    assert np.all(study.eadc.array[adc.array == 0] == 1)  # exp(-b·0), as in the synthetic training data
    assert study.b_value == 800


def test_brain_foreground_ignores_background_noise_and_a_few_extreme_voxels(head_phantom):
    dwi, adc, _ = head_phantom()
    brain = adc.array > 0
    noisy = dwi.array + np.abs(np.random.default_rng(2).normal(0, 10, dwi.array.shape)) * ~brain  # not skull-stripped
    noisy[5, 20, 18] = 1e7  # one artefact voxel
    foreground = brain_foreground(dwi.with_array(noisy))
    assert (foreground & brain).sum() / (foreground | brain).sum() > 0.9


def test_adc_values_that_fit_no_unit_are_refused_with_the_measured_median(head_phantom):
    dwi, adc, _ = head_phantom()
    with pytest.raises(BadInputError, match=r"fit no known unit: the median over brain voxels is 80\b"):
        load_study(dwi=dwi, adc=adc.with_array(adc.array * 100))  # 10⁻⁵ mm²/s: no such convention


def test_a_stated_unit_that_contradicts_the_data_is_refused(head_phantom):
    dwi, adc, _ = head_phantom()
    with pytest.raises(BadInputError, match="stated as mm2/s gives a brain median of 800"):
        load_study(dwi=dwi, adc=adc, adc_unit="mm2/s")
    assert load_study(dwi=dwi, adc=adc, adc_unit="1e-3 mm2/s").adc_unit_detected == "1e-3 mm2/s"


def test_b0_and_b1000_give_the_closed_form_adc_and_eadc(head_phantom):
    dwi, adc, _ = head_phantom()
    rng = np.random.default_rng(1)
    brain = adc.array > 0
    s0 = np.where(brain, rng.uniform(500, 900, adc.array.shape), 0.0)
    b = 1000.0
    sb = s0 * np.exp(-b * adc.array / 1000)  # adc.array is in 10⁻³ mm²/s
    study = load_study(b0=dwi.with_array(s0), b1000=dwi.with_array(sb), b_value=b)
    expected_adc = np.zeros_like(s0)
    expected_adc[brain] = np.log(s0[brain] / sb[brain]) / b * 1000
    np.testing.assert_allclose(study.adc.array, expected_adc, atol=1e-5)
    np.testing.assert_allclose(study.eadc.array[brain], sb[brain] / s0[brain], rtol=1e-5)
    assert study.adc_unit_detected == "b0+b1000"
    assert np.all(study.adc.array[~brain] == 0) and np.all(study.eadc.array[~brain] == 1)


def test_b0_route_handles_zero_and_noisy_signals_without_nan_or_inf():
    s0 = np.zeros((4, 8, 16))
    s0[..., :8] = 800.0  # brain on the left half, air on the right
    sb = s0 * np.exp(-0.8)
    s0[0, 0, :4] = 0  # no signal at all → background
    sb[0, 1, :4] = 0  # b0 signal, no b1000 signal → the ADC ceiling
    sb[0, 2, :4] = 900  # noise: S_b > S_0 → ADC 0, eADC 1
    study = load_study(b0=Volume(s0, (2, 2, 5)), dwi=Volume(sb, (2, 2, 5)))
    assert np.all(np.isfinite(study.adc.array)) and np.all(np.isfinite(study.eadc.array))
    assert np.all(study.adc.array[0, 0, :4] == 0) and np.all(study.eadc.array[0, 0, :4] == 1)
    assert np.all(study.adc.array[0, 1, :4] == 5.0)
    np.testing.assert_allclose(study.eadc.array[0, 1, :4], np.exp(-5.0))
    assert np.all(study.adc.array[0, 2, :4] == 0) and np.all(study.eadc.array[0, 2, :4] == 1)
    np.testing.assert_allclose(study.eadc.array, np.exp(-study.adc.array), rtol=1e-6)  # eADC = exp(-b·ADC) throughout


def test_eadc_input_gives_back_the_adc(head_phantom):
    dwi, adc, _ = head_phantom()
    eadc = np.where(adc.array > 0, np.exp(-1000 * adc.array / 1000), 0.0)
    study = load_study(dwi=dwi, eadc=adc.with_array(eadc))
    assert study.adc_unit_detected == "eadc"
    np.testing.assert_allclose(study.adc.array, np.where(adc.array > 0, adc.array, 0), atol=1e-5)


def test_an_eadc_map_given_as_adc_is_refused(head_phantom):
    """An eADC's brain median (≈ 0.45) would pass as an ADC in 10⁻³ mm²/s; the missing CSF gives it away."""
    dwi, adc, _ = head_phantom()
    eadc = np.exp(-adc.array)
    for scale in (1.0, 1000.0):  # as stored, and rescaled to integers (would read as 10⁻⁶ mm²/s)
        with pytest.raises(BadInputError, match="look like an eADC, not an ADC"):
            load_study(dwi=dwi, adc=adc.with_array(eadc * scale))


def test_an_adc_map_given_as_eadc_is_refused(head_phantom):
    dwi, adc, _ = head_phantom()
    with pytest.raises(BadInputError, match="eADC above 1"):
        load_study(dwi=dwi, eadc=adc.with_array(adc.array * 2))


def write_4d(tmp_path, volumes: list[np.ndarray], spacing=(2.0, 2.0, 5.0)) -> str:
    image = sitk.JoinSeries([sitk.GetImageFromArray(v.astype(np.float32)) for v in volumes])
    image.SetSpacing((*spacing, 1.0))
    path = str(tmp_path / "multi_b.nii.gz")
    sitk.WriteImage(image, path)
    return path


def test_4d_multi_b_picks_b0_and_the_trace_of_the_highest_b_up_to_1000(tmp_path, head_phantom):
    _, adc, _ = head_phantom(spacing_mm=(2.0, 2.0, 5.0))
    brain = adc.array > 0
    s0 = np.where(brain, 700.0, 0.0)
    # three diffusion directions at b=1000 with different ADCs; trace = geometric mean
    directional_adc = [adc.array * f for f in (0.8, 1.0, 1.2)]
    b1000 = [s0 * np.exp(-adc_d) for adc_d in directional_adc]
    b500 = s0 * np.exp(-0.5 * adc.array)
    b2000 = s0 * np.exp(-2.0 * adc.array)
    path = write_4d(tmp_path, [s0, b500, *b1000, b2000])
    bval = tmp_path / "dwi.bval"
    bval.write_text("0 500 1000 1000 1000 2000\n")
    study = load_study(dwi=path, bvalues=bval)
    assert study.b_value == 1000
    expected_trace = s0 * np.exp(-adc.array)  # geometric mean of the three directions
    np.testing.assert_allclose(study.dwi.array, expected_trace, rtol=1e-4)
    np.testing.assert_allclose(study.adc.array[brain], adc.array[brain], atol=1e-4)
    assert study.adc_unit_detected == "b0+b1000"


def test_4d_without_usable_b_values_is_refused(tmp_path, head_phantom):
    dwi, _, _ = head_phantom(spacing_mm=(2.0, 2.0, 5.0))
    path = write_4d(tmp_path, [dwi.array, dwi.array * 0.5])
    with pytest.raises(BadInputError, match="4D image with 2 volumes but no b-values"):
        load_study(dwi=path)
    with pytest.raises(BadInputError, match="has 2 volumes but 3 b-values"):
        load_study(dwi=path, bvalues=[0, 1000, 2000])
    with pytest.raises(BadInputError, match="lack a b0"):
        load_study(dwi=path, bvalues=[1000, 2000])


def test_grids_within_tolerance_are_accepted_and_take_the_dwi_geometry_exactly(head_phantom):
    dwi, adc, _ = head_phantom()
    nudged = Volume(adc.array, np.asarray(adc.spacing_mm) * (1 + 1e-6), np.asarray(adc.origin_mm) + 1e-5, adc.direction)
    study = load_study(dwi=dwi, adc=nudged)
    assert study.adc.origin_mm == dwi.origin_mm and study.adc.spacing_mm == dwi.spacing_mm


def test_mismatched_grids_are_refused_saying_how_unless_resampling_is_asked_for(head_phantom):
    dwi, adc, _ = head_phantom()
    shifted = Volume(adc.array, adc.spacing_mm, np.asarray(adc.origin_mm) + (1.8, 0, 0), adc.direction)
    with pytest.raises(BadInputError, match=r"not on the DWI grid.*origin shifted by 1\.8 mm.*resample_to_dwi=True"):
        load_study(dwi=dwi, adc=shifted)
    study = load_study(dwi=dwi, adc=shifted, resample_to_dwi=True)
    assert study.adc.array.shape == dwi.array.shape and study.adc.origin_mm == dwi.origin_mm
    # a shift of exactly two voxels (0.9 mm each) along i: resampled values are the shifted ADC
    np.testing.assert_allclose(study.adc.array[:, :, 2:], adc.array[:, :, :-2], atol=1e-5)

    coarse = Volume(adc.array[:, ::2, ::2], (1.8, 1.8, 6.0), adc.origin_mm, adc.direction)
    with pytest.raises(BadInputError, match=r"size \(18, 20, 10\) vs \(36, 40, 10\); spacing \(1\.8, 1\.8, 6\) mm vs \(0\.9, 0\.9, 6\) mm"):
        load_study(dwi=dwi, adc=coarse)
    far_away = Volume(adc.array, adc.spacing_mm, np.asarray(adc.origin_mm) + 500, adc.direction)
    with pytest.raises(BadInputError, match="does not overlap"):
        load_study(dwi=dwi, adc=far_away, resample_to_dwi=True)


def test_ambiguous_or_incomplete_input_combinations_are_refused(head_phantom):
    dwi, adc, _ = head_phantom()
    with pytest.raises(BadInputError, match="ADC, eADC or b0 image is needed"):
        load_study(dwi=dwi)
    with pytest.raises(BadInputError, match="not several"):
        load_study(dwi=dwi, adc=adc, eadc=adc)
    with pytest.raises(BadInputError, match="given twice"):
        load_study(dwi=dwi, b1000=dwi, b0=dwi)
    with pytest.raises(BadInputError, match="DWI .* is required"):
        load_study(adc=adc)
