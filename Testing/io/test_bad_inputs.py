"""Every kind of bad input gets a one-line BadInputError naming the file and the problem."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import SimpleITK as sitk

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume, load_study, read_volume, write_volume


def assert_names_file_and_problem(error: BadInputError, path: Path, problem: str) -> None:
    message = str(error)
    assert "\n" not in message
    assert str(path) in message
    assert problem in message


def write_nifti_with_nibabel(path: Path, array_ijk: np.ndarray, zooms=(1.0, 1.0, 1.0)) -> Path:
    nib.save(nib.Nifti1Image(array_ijk, np.diag([*zooms, 1.0])), path)
    return path


def test_missing_file(tmp_path):
    path = tmp_path / "dwi.nii.gz"
    with pytest.raises(BadInputError) as error:
        read_volume(path)
    assert_names_file_and_problem(error.value, path, "file not found")


@pytest.mark.parametrize("name", ["dwi.nii.gz", "dwi.nrrd", "report.txt"])
def test_non_image_file(tmp_path, name):
    path = tmp_path / name
    path.write_text("this is a text file, not an image\n")
    with pytest.raises(BadInputError) as error:
        read_volume(path)
    assert_names_file_and_problem(error.value, path, "not")


@pytest.mark.parametrize("suffix", [".nii.gz", ".nii", ".nrrd"])
def test_truncated_file_is_corrupted(tmp_path, head_phantom, suffix):
    """SimpleITK reads a truncated NIfTI without complaint; the check with nibabel catches it."""
    dwi, _, _ = head_phantom()
    whole = write_volume(dwi, tmp_path / f"whole{suffix}")
    path = tmp_path / f"truncated{suffix}"
    data = whole.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInputError) as error:
        read_volume(path)
    assert_names_file_and_problem(error.value, path, "")
    assert any(word in str(error.value) for word in ("corrupted", "cannot be read", "ended", "Expected"))


def test_2d_image(tmp_path):
    flat = write_nifti_with_nibabel(tmp_path / "flat.nii.gz", np.ones((16, 16), np.float32))
    one_slice = write_nifti_with_nibabel(tmp_path / "one_slice.nii.gz", np.ones((16, 16, 1), np.float32))
    for path in (flat, one_slice):
        with pytest.raises(BadInputError) as error:
            read_volume(path)
        assert_names_file_and_problem(error.value, path, "is a 2D image")


def test_4d_image_without_b_values(tmp_path):
    path = write_nifti_with_nibabel(tmp_path / "dwi4d.nii.gz", np.ones((8, 8, 4, 3), np.float32))
    with pytest.raises(BadInputError) as error:
        read_volume(path)
    assert_names_file_and_problem(error.value, path, "4D image with 3 volumes")
    with pytest.raises(BadInputError) as error:
        load_study(dwi=path, adc=path)
    assert_names_file_and_problem(error.value, path, "no b-values")


@pytest.mark.parametrize(("suffix", "bad_value"), [(".nii.gz", np.nan), (".nii", np.inf), (".nrrd", np.nan), (".mha", -np.inf)])
def test_nan_or_inf_voxels(tmp_path, suffix, bad_value):
    array = np.ones((4, 8, 8), np.float32)
    array[2, 3, 4] = bad_value
    path = tmp_path / f"adc{suffix}"
    sitk.WriteImage(sitk.GetImageFromArray(array), str(path))
    assert np.isfinite(sitk.GetArrayFromImage(sitk.ReadImage(str(path)))).all() == (suffix.startswith(".nii"))  # the trap
    with pytest.raises(BadInputError) as error:
        read_volume(path)
    assert_names_file_and_problem(error.value, path, "1 NaN/Inf voxels")


def test_nan_in_an_in_memory_volume(head_phantom):
    dwi, adc, _ = head_phantom()
    adc.array[0, 0, 0] = np.nan
    with pytest.raises(BadInputError, match="<memory> \\(adc\\): has 1 NaN/Inf voxels"):
        load_study(dwi=dwi, adc=adc)


@pytest.mark.parametrize("role", ["dwi", "adc"])
def test_all_zero_image(tmp_path, head_phantom, role):
    dwi, adc, _ = head_phantom()
    images = {"dwi": dwi, "adc": adc}
    images[role] = images[role].with_array(np.zeros_like(images[role].array))
    paths = {name: write_volume(volume, tmp_path / f"{name}.nrrd") for name, volume in images.items()}
    with pytest.raises(BadInputError) as error:
        load_study(**paths)
    assert_names_file_and_problem(error.value, paths[role], "is all zero")


def test_negative_adc(tmp_path, head_phantom):
    dwi, adc, _ = head_phantom()
    dwi_path = write_volume(dwi, tmp_path / "dwi.nii.gz")
    adc_path = write_volume(adc.with_array(-adc.array), tmp_path / "adc.nii.gz")
    with pytest.raises(BadInputError) as error:
        load_study(dwi=dwi_path, adc=adc_path, adc_unit="1e-3 mm2/s")
    assert_names_file_and_problem(error.value, adc_path, "negative ADC in")
    with pytest.raises(BadInputError) as error:  # auto-detection refuses it too
        load_study(dwi=dwi_path, adc=adc_path)
    assert_names_file_and_problem(error.value, adc_path, "")


def test_mismatched_grids(tmp_path, head_phantom):
    dwi, adc, _ = head_phantom()
    dwi_path = write_volume(dwi, tmp_path / "dwi.nii.gz")
    adc_path = write_volume(Volume(adc.array[:, :, :-1], adc.spacing_mm, adc.origin_mm), tmp_path / "adc.nii.gz")
    with pytest.raises(BadInputError) as error:
        load_study(dwi=dwi_path, adc=adc_path)
    assert_names_file_and_problem(error.value, adc_path, "not on the DWI grid")
    assert "size (35, 40, 10) vs (36, 40, 10)" in str(error.value)


def test_wrong_units(tmp_path, head_phantom):
    dwi, adc, _ = head_phantom()
    adc_path = write_volume(adc.with_array(adc.array * 30), tmp_path / "adc.nrrd")
    with pytest.raises(BadInputError) as error:
        load_study(dwi=dwi, adc=adc_path)
    assert_names_file_and_problem(error.value, adc_path, "fit no known unit: the median over brain voxels is 24")


def test_zero_spacing_in_a_nifti_header(tmp_path):
    """SimpleITK and nibabel both turn a 0 mm voxel size into 1 mm; the raw header is checked."""
    good = write_nifti_with_nibabel(tmp_path / "good.nii", np.ones((8, 8, 4), np.float32), zooms=(1, 1, 5))
    data = bytearray(good.read_bytes())
    struct.pack_into("<f", data, 76 + 3 * 4, 0.0)  # pixdim[3]
    path = tmp_path / "zero_spacing.nii"
    path.write_bytes(bytes(data))
    with pytest.raises(BadInputError) as error:
        read_volume(path)
    assert_names_file_and_problem(error.value, path, "absurd voxel spacing")


@pytest.mark.parametrize("suffix", [".nii.gz", ".nrrd"])
def test_absurdly_large_spacing(tmp_path, suffix):
    image = sitk.GetImageFromArray(np.ones((4, 8, 8), np.float32))
    image.SetSpacing((1.0, 1.0, 25.0))
    path = tmp_path / f"thick{suffix}"
    sitk.WriteImage(image, str(path))
    with pytest.raises(BadInputError) as error:
        read_volume(path)
    assert_names_file_and_problem(error.value, path, "absurd voxel spacing (1.0, 1.0, 25.0) mm")


def test_users_files_are_never_modified(tmp_path, head_phantom):
    dwi, adc, _ = head_phantom()
    paths = [write_volume(dwi, tmp_path / "dwi.nii.gz"), write_volume(adc, tmp_path / "adc.nrrd")]
    digests = [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    load_study(dwi=paths[0], adc=paths[1])
    with pytest.raises(BadInputError):
        load_study(dwi=paths[0], adc=paths[1], adc_unit="mm2/s")
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths] == digests
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adc.nrrd", "dwi.nii.gz"]
