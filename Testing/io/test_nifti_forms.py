"""NIfTI qform/sform disagreements and ITK's own messages: what SimpleITK does with each header
(checked by experiment, SimpleITK 2.5 / ITK 5.4), what the user is told, and that ITK prints
nothing on stderr itself."""

from __future__ import annotations

import warnings
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from LambdaSegmentLib.errors import InputWarning
from LambdaSegmentLib.io import load_study, read_volume
from LambdaSegmentLib.io.nifti_forms import corner_displacement_mm, read_affine_ras, rotation_between

SIZE_IJK = (20, 24, 8)
SPACING_MM = (2.0, 2.0, 6.0)


def qform_affine() -> np.ndarray:
    """An oblique-free RAS affine with anisotropic voxels, as a scanner converter writes it."""
    affine = np.diag([*SPACING_MM, 1.0])
    affine[:3, 3] = [-20.0, -24.0, -24.0]
    return affine


def mirrored(affine: np.ndarray) -> np.ndarray:
    """The same grid with its i axis reversed about the volume's centre (left and right swapped)."""
    flip = np.diag([-1.0, 1.0, 1.0, 1.0])
    flip[0, 3] = SIZE_IJK[0] - 1
    return affine @ flip


def rotated(affine: np.ndarray, degrees: float) -> np.ndarray:
    angle = np.radians(degrees)
    rotation = np.eye(4)
    rotation[:2, :2] = [[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]
    return rotation @ affine


def write_nifti(path: Path, qform: np.ndarray | None, sform: np.ndarray | None, *, sform_code: int = 1) -> Path:
    """A float32 brain-like blob with the given forms (a form that is None gets code 0)."""
    k, j, i = np.meshgrid(*[np.linspace(-1, 1, n) for n in SIZE_IJK[::-1]], indexing="ij")
    data = np.transpose((1.0 + (i**2 + j**2 + k**2 < 0.8)).astype(np.float32), (2, 1, 0))  # nibabel: [i, j, k]
    image = nib.Nifti1Image(data, None)
    image.header.set_zooms(SPACING_MM)
    image.set_qform(qform, code=1 if qform is not None else 0)
    image.set_sform(sform, code=sform_code if sform is not None else 0)
    nib.save(image, str(path))
    return path


def read_with_warnings(path: Path) -> tuple[np.ndarray, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        volume = read_volume(path)
    affine = np.diag([-1.0, -1.0, 1.0, 1.0]) @ volume.ijk_to_lps_matrix()
    return affine, [str(w.message) for w in caught if issubclass(w.category, InputWarning)]


def test_agreeing_forms_give_no_warning(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    path = write_nifti(tmp_path / "plain.nii.gz", qform_affine(), qform_affine())
    affine, messages = read_with_warnings(path)
    assert messages == []
    np.testing.assert_allclose(affine, qform_affine(), atol=1e-4)
    assert capfd.readouterr().err == ""


def test_mirrored_scanner_sform_is_used_and_named_with_its_distance(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    qform, sform = qform_affine(), mirrored(qform_affine())
    path = write_nifti(tmp_path / "mirrored.nii.gz", qform, sform, sform_code=1)
    affine, messages = read_with_warnings(path)
    np.testing.assert_allclose(affine, sform, atol=1e-4)  # SimpleITK takes a "scanner" sform
    expected_mm = corner_displacement_mm(qform, sform, SIZE_IJK)
    assert expected_mm == pytest.approx(2.0 * (SIZE_IJK[0] - 1), rel=1e-6)  # the first and last columns swap
    [message] = messages
    assert message.startswith(f"{path}: the NIfTI qform (code 1) and sform (code 1) disagree")
    assert f"up to {expected_mm:.3g} mm apart" in message
    assert "mirror image" in message and "read with the sform's geometry (code 1, scanner)" in message
    assert capfd.readouterr().err == ""


def test_rotated_aligned_sform_loses_to_the_qform(tmp_path: Path) -> None:
    qform, sform = qform_affine(), rotated(qform_affine(), 10.0)
    path = write_nifti(tmp_path / "rotated.nii.gz", qform, sform, sform_code=2)
    affine, [message] = read_with_warnings(path)
    np.testing.assert_allclose(affine, qform, atol=1e-4)  # an "aligned" sform that disagrees: SimpleITK takes the qform
    assert rotation_between(qform, sform) == pytest.approx(10.0, abs=1e-6)
    assert "orientations 10° apart" in message and "read with the qform's geometry (code 1, scanner)" in message


def test_sform_scales_unlike_pixdim_are_said_once_in_our_words(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    """ITK would print 'WARNING: In .../itkNiftiImageIO.cxx ... has unexpected scales in sform' (twice)."""
    sform = qform_affine() @ np.diag([1.25, 1.0, 1.0, 1.0])
    path = write_nifti(tmp_path / "scaled.nii.gz", qform_affine(), sform)
    affine, [message] = read_with_warnings(path)
    np.testing.assert_allclose(affine[:3, :3], qform_affine()[:3, :3], atol=1e-4)  # voxel size from pixdim
    assert message.startswith(f"{path}: the NIfTI qform (code 1) and sform (code 1) disagree")
    assert "same orientation" in message
    assert capfd.readouterr().err == ""


def test_sform_alone_read_with_pixdim_voxel_size_is_said(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    sform = qform_affine() @ np.diag([1.25, 1.0, 1.0, 1.0])
    path = write_nifti(tmp_path / "sform_only.nii.gz", None, sform)
    affine, [message] = read_with_warnings(path)
    assert message.startswith(f"{path}: SimpleITK read it up to")
    assert "pixdim (2 x 2 x 6 mm), the sform says 2.5 x 2 x 6 mm" in message
    assert corner_displacement_mm(affine, sform, SIZE_IJK) > 1.0
    assert "WARNING: In" not in capfd.readouterr().err


def test_study_keeps_its_input_warnings(tmp_path: Path) -> None:
    """Load_study issues the warning and keeps it in Study.warnings (for reports and batch summaries)."""
    qform, sform = qform_affine(), mirrored(qform_affine())
    dwi = write_nifti(tmp_path / "dwi.nii.gz", qform, sform)
    adc_path = tmp_path / "adc.nii.gz"
    image = nib.load(str(dwi))
    nib.save(nib.Nifti1Image(np.asanyarray(image.dataobj) * np.float32(0.8), None, header=image.header), str(adc_path))
    with pytest.warns(InputWarning) as record:
        study = load_study(dwi=dwi, adc=adc_path)
    assert len(study.warnings) == 2
    assert {message.split(":")[0] for message in study.warnings} == {str(dwi), str(adc_path)}
    assert {str(w.message) for w in record} == set(study.warnings)


def test_read_affine_matches_nibabel_on_an_ordinary_file(tmp_path: Path) -> None:
    import SimpleITK as sitk

    path = write_nifti(tmp_path / "plain.nii", rotated(qform_affine(), 25.0), rotated(qform_affine(), 25.0))
    np.testing.assert_allclose(read_affine_ras(sitk.ReadImage(str(path))), nib.load(str(path)).affine, atol=1e-4)


def test_a_header_without_orientation_is_said(tmp_path: Path) -> None:
    """Both codes 0 (Analyze-style): SimpleITK and nibabel orient it differently (here: front-back)."""
    path = write_nifti(tmp_path / "no_orientation.nii.gz", None, None)
    affine, [message] = read_with_warnings(path)
    assert message == (f"{path}: its NIfTI header sets no orientation (qform and sform codes are both 0): SimpleITK read "
                       "it as i → left, j → posterior, k → superior, other programs may flip left-right or front-back: "
                       "check the mask's side")
    assert np.sign(affine[1, 1]) == -np.sign(nib.load(str(path)).affine[1, 1])  # the two readers disagree on front/back
