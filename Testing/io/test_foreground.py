"""The statistics foreground of a DWI: Otsu's background/tissue split, kept when a large
bright infarct would take Otsu's bright class for itself."""

from __future__ import annotations

import numpy as np
import SimpleITK as sitk

from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.io.foreground import brain_foreground


def _head(lesion_fraction: float, lesion_brightness: float) -> tuple[Volume, np.ndarray, np.ndarray]:
    """A zero background around a 32×32-voxel block of tissue (DWI ≈ 100), of which the
    first ``lesion_fraction`` of the columns is an infarct at ``lesion_brightness`` × 100."""
    rng = np.random.default_rng(0)
    values = np.zeros((20, 64, 64), np.float32)
    tissue = np.zeros(values.shape, bool)
    tissue[:, 16:48, 16:48] = True
    lesion = np.zeros(values.shape, bool)
    lesion[:, 16:48, 16 : 16 + round(32 * lesion_fraction)] = True
    values[tissue] = rng.normal(100.0, 5.0, tissue.sum())
    values[lesion] = rng.normal(100.0 * lesion_brightness, 10.0, lesion.sum())
    return Volume(values, (2.0, 2.0, 5.0)), tissue, lesion


def test_an_ordinary_study_gets_plain_otsu() -> None:
    volume, tissue, _lesion = _head(0.1, 1.8)
    plain = sitk.GetArrayFromImage(sitk.OtsuThreshold(volume.to_sitk(), 0, 1, 256)).astype(bool)
    np.testing.assert_array_equal(brain_foreground(volume), plain)
    np.testing.assert_array_equal(plain, tissue)


def test_a_large_bright_infarct_does_not_become_the_foreground() -> None:
    """A 3× bright infarct over 44 % of the tissue wins plain Otsu's split; its median would
    then normalise the infarct to 1 × "brain" and hide it."""
    volume, tissue, lesion = _head(0.44, 3.0)
    plain = sitk.GetArrayFromImage(sitk.OtsuThreshold(volume.to_sitk(), 0, 1, 256)).astype(bool)
    np.testing.assert_array_equal(plain, lesion)  # the failure being guarded against
    foreground = brain_foreground(volume)
    np.testing.assert_array_equal(foreground, tissue)
    values = np.asarray(volume.array)
    assert np.median(values[lesion]) / np.median(values[foreground]) > 2.5


def test_the_noise_of_a_wide_background_does_not_become_the_foreground() -> None:
    """A head filling a small part of a wide, noisy field of view (issue 13's rule 123): the
    noise above the three-class lower threshold outnumbers the head, but it is speckle, so the
    large-infarct check does not fire and the foreground stays Otsu's, the head."""
    from LambdaSegmentLib.io.foreground import otsu_split

    rng = np.random.default_rng(0)
    values = np.abs(rng.normal(0.0, 12.0, (12, 192, 192))).astype(np.float32)  # magnitude noise
    tissue = np.zeros(values.shape, bool)
    tissue[:, 80:112, 80:112] = True
    values[tissue] = rng.normal(100.0, 5.0, tissue.sum())
    volume = Volume(values, (2.0, 2.0, 5.0))
    split = otsu_split(volume)
    assert np.count_nonzero(split.left_out_tissue) > 3 * np.count_nonzero(split.above_otsu)  # what fired the check before
    assert np.count_nonzero(split.contiguous_left_out_tissue) < 0.05 * np.count_nonzero(split.above_otsu)
    foreground = brain_foreground(volume)
    np.testing.assert_array_equal(foreground, split.above_otsu)
    assert np.count_nonzero(foreground & ~tissue) < 0.01 * tissue.sum()


def test_the_opening_keeps_a_thick_slice_acquisitions_single_slices() -> None:
    """The opening does not reach across a thick-slice axis: a band region one slice thick stays."""
    volume, tissue, lesion = _head(0.44, 3.0)
    single = volume.with_array(np.where(np.arange(20)[:, None, None] == 10, volume.array, 0.0).astype(np.float32))
    from LambdaSegmentLib.io.foreground import otsu_split

    split = otsu_split(single)
    assert np.array_equal(split.contiguous_left_out_tissue[10], split.left_out_tissue[10])
    assert split.left_out_tissue[10].any()


def test_a_study_computes_its_foreground_once_and_never_carries_it_to_another_dwi(monkeypatch) -> None:
    """load_study's units check computes the foreground; the Study keeps that one (the
    preprocessing, the brain mask and the ADC rule all read it), read-only, and a Study made
    from it with another DWI computes its own."""
    import dataclasses

    from LambdaSegmentLib.io import foreground as foreground_module
    from LambdaSegmentLib.io import load_study, study as study_module
    from LambdaSegmentLib.io.units import eadc_from_adc

    volume, tissue, lesion = _head(0.1, 1.8)
    adc = volume.with_array(np.where(tissue, np.where(lesion, 0.5, 0.8), 0.0).astype(np.float32))
    calls: list[int] = []

    def counted(dwi: Volume) -> np.ndarray:
        calls.append(1)
        return foreground_module.brain_foreground(dwi)

    monkeypatch.setattr(study_module, "brain_foreground", counted)
    study = load_study(dwi=volume, adc=adc, adc_unit="1e-3 mm2/s")
    assert len(calls) == 1
    np.testing.assert_array_equal(study.foreground, brain_foreground(volume))
    assert study.foreground is study.foreground and len(calls) == 1  # no second computation
    assert not study.foreground.flags.writeable

    darker = dataclasses.replace(study, dwi=volume.with_array(np.where(lesion, 0.0, volume.array).astype(np.float32)),
                                 eadc=eadc_from_adc(adc, 1000.0))
    np.testing.assert_array_equal(darker.foreground, brain_foreground(darker.dwi))
    assert len(calls) == 2 and darker.foreground.sum() < study.foreground.sum()
