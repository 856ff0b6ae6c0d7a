"""DICOM series folders: geometry from image positions (slice gap included), choosing a series."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume, load_study, read_volume

STUDY_UID = "1.2.826.0.1.3680043.8.498.1"


def write_dicom_series(
    volume: Volume,
    folder: Path,
    *,
    series_uid: str,
    description: str,
    slice_thickness_mm: float,
    b_value: float | None = None,
    first_instance: int = 1,
) -> None:
    """One file per slice, with the tags SimpleITK/GDCM need to rebuild the geometry."""
    folder.mkdir(parents=True, exist_ok=True)
    image = sitk.Cast(volume.to_sitk(), sitk.sitkInt16)
    direction = image.GetDirection()
    writer = sitk.ImageFileWriter()
    writer.KeepOriginalImageUIDOn()
    for k in range(image.GetDepth()):
        slice_image = image[:, :, k]
        position = image.TransformIndexToPhysicalPoint((0, 0, k))
        tags = {
            "0008|0060": "MR",
            "0008|0016": "1.2.840.10008.5.1.4.1.1.4",
            "0008|0018": f"{series_uid}.{first_instance + k}",
            "0020|000d": STUDY_UID,
            "0020|000e": series_uid,
            "0008|103e": description,
            "0020|0013": str(first_instance + k),
            "0020|0032": "\\".join(f"{p:.6f}" for p in position),
            "0020|0037": "\\".join(f"{d:.6f}" for d in (direction[0], direction[3], direction[6], direction[1], direction[4], direction[7])),
            "0018|0050": f"{slice_thickness_mm:g}",
            "0028|0030": f"{volume.spacing_mm[1]:g}\\{volume.spacing_mm[0]:g}",
        }
        if b_value is not None:
            tags["0018|9087"] = f"{b_value:g}"  # Diffusion b-value
        for tag, value in tags.items():
            slice_image.SetMetaData(tag, value)
        writer.SetFileName(str(folder / f"{series_uid.split('.')[-1]}_{first_instance + k:03d}.dcm"))
        writer.Execute(slice_image)


def test_dicom_series_with_slice_gap_reads_with_the_centre_distance_as_spacing(tmp_path, head_phantom, rotation):
    dwi, _, _ = head_phantom(spacing_mm=(0.9, 0.9, 6.0), direction=rotation((1.0, 0.2, 0.0), 15.0))
    dwi = dwi.with_array(np.round(dwi.array).astype(np.int16))
    write_dicom_series(dwi, tmp_path / "dicom", series_uid="1.2.3.4.5", description="DWI b1000 TRACE", slice_thickness_mm=5.0)
    back = read_volume(tmp_path / "dicom")
    np.testing.assert_allclose(back.spacing_mm, (0.9, 0.9, 6.0), atol=1e-5)  # 5 mm slices + 1 mm gap
    np.testing.assert_allclose(back.origin_mm, dwi.origin_mm, atol=1e-4)
    np.testing.assert_allclose(back.direction, dwi.direction, atol=1e-5)
    np.testing.assert_array_equal(back.array, dwi.array)


def test_folder_with_two_series_is_refused_listing_both_unless_one_is_chosen(tmp_path, head_phantom):
    dwi, adc, _ = head_phantom()
    folder = tmp_path / "dicom"
    write_dicom_series(dwi.with_array(np.round(dwi.array).astype(np.int16)), folder, series_uid="1.2.3.4.5", description="DWI b1000 TRACE", slice_thickness_mm=6)
    adc_1e6 = adc.with_array(np.round(adc.array * 1000).astype(np.int16))
    write_dicom_series(adc_1e6, folder, series_uid="1.2.3.4.6", description="ADC", slice_thickness_mm=6)

    with pytest.raises(BadInputError, match=r"2 DICOM series.*1\.2\.3\.4\.5 \(DWI b1000 TRACE\).*1\.2\.3\.4\.6 \(ADC\)") as error:
        read_volume(folder)
    assert str(folder) in str(error.value)

    by_description = read_volume(folder, series="adc")
    by_uid = read_volume(folder, series="1.2.3.4.6")
    np.testing.assert_array_equal(by_description.array, adc_1e6.array)
    np.testing.assert_array_equal(by_uid.array, adc_1e6.array)
    with pytest.raises(BadInputError, match="no DICOM series match 'FLAIR'"):
        read_volume(folder, series="FLAIR")


def test_series_holding_two_volumes_at_the_same_positions_is_refused(tmp_path, head_phantom):
    """b0 and b1000 in one series would otherwise be stacked as if they were slices."""
    dwi, _, _ = head_phantom()
    dwi = dwi.with_array(np.round(dwi.array).astype(np.int16))
    folder = tmp_path / "dicom"
    write_dicom_series(dwi, folder, series_uid="1.2.3.4.7", description="DWI", slice_thickness_mm=6)
    # the same positions again, as a second b-value, in the same series (other instance numbers)
    second = tmp_path / "second"
    write_dicom_series(dwi, second, series_uid="1.2.3.4.7", description="DWI", slice_thickness_mm=6)
    for path in second.iterdir():
        path.rename(folder / f"b0_{path.name}")
    with pytest.raises(BadInputError, match="slice positions"):
        read_volume(folder)


def test_series_with_b0_and_b1000_at_the_same_positions_is_split_by_b_value(tmp_path, head_phantom):
    """Siemens TRACEW series hold b0 and b1000 images in one series; the b-value tags tell them apart."""
    _, adc, _ = head_phantom()
    brain = adc.array > 0
    s0 = np.where(brain, 800.0, 0.0)
    s1000 = np.round(s0 * np.exp(-adc.array))
    folder = tmp_path / "tracew"
    common = dict(series_uid="1.2.3.4.9", description="ep2d_diff_TRACEW", slice_thickness_mm=5)
    write_dicom_series(adc.with_array(s0.astype(np.int16)), folder, b_value=0, **common)
    write_dicom_series(adc.with_array(s1000.astype(np.int16)), folder, b_value=1000, first_instance=11, **common)

    with pytest.raises(BadInputError, match=r"holds 2 b-values \(0, 1000\) at every slice position"):
        read_volume(folder)
    study = load_study(dwi=folder)
    assert study.b_value == 1000 and study.adc_unit_detected == "b0+b1000"
    np.testing.assert_array_equal(study.dwi.array, s1000)
    expected_adc = np.log(s0[brain] / s1000[brain]) / 1000 * 1000  # ln(S0/Sb)/b in mm²/s → 10⁻³ mm²/s
    np.testing.assert_allclose(study.adc.array[brain], expected_adc, atol=1e-5)
    np.testing.assert_allclose(study.dwi.origin_mm, adc.origin_mm, atol=1e-4)


def test_series_with_a_missing_slice_is_refused(tmp_path, head_phantom):
    """SimpleITK would read it with one average slice spacing: a wrong geometry."""
    dwi, _, _ = head_phantom()
    folder = tmp_path / "dicom"
    write_dicom_series(dwi.with_array(np.round(dwi.array).astype(np.int16)), folder, series_uid="1.2.3.4.8", description="DWI", slice_thickness_mm=6)
    sorted(folder.iterdir())[4].unlink()
    with pytest.raises(BadInputError, match=r"not evenly spaced \(gaps from 6 to 12 mm\)"):
        read_volume(folder)


def test_folder_without_dicom_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("not an image")
    with pytest.raises(BadInputError, match="without a DICOM series"):
        read_volume(tmp_path)


def test_a_series_choice_for_a_plain_file_is_refused_not_ignored(tmp_path, head_phantom):
    from LambdaSegmentLib.io import write_volume

    path = write_volume(head_phantom()[0], tmp_path / "dwi.nii.gz")
    with pytest.raises(BadInputError, match="applies to DICOM folders"):
        read_volume(path, series="ADC")
