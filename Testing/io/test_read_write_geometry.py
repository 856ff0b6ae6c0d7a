"""Round trips through NIfTI, NRRD, MHA and .seg.nrrd keep geometry and voxels exactly."""

from __future__ import annotations

import nibabel as nib
import nrrd
import numpy as np
import pytest
import slicerio

from LambdaSegmentLib.io import Volume, read_volume, write_mask, write_volume
from LambdaSegmentLib.io.writing import SEGMENT_NAME

# NIfTI stores the affine in float32; NRRD and MHA keep doubles (as text).
GEOMETRY_TOLERANCE_MM = {".nii.gz": 1e-4, ".nii": 1e-4, ".nrrd": 1e-9, ".mha": 1e-9}


def assert_same_geometry(a: Volume, b: Volume, tolerance: float) -> None:
    assert a.array.shape == b.array.shape
    np.testing.assert_allclose(a.spacing_mm, b.spacing_mm, atol=tolerance)
    np.testing.assert_allclose(a.origin_mm, b.origin_mm, atol=tolerance)
    np.testing.assert_allclose(a.direction, b.direction, atol=tolerance)


def oblique_direction(rotation) -> np.ndarray:
    return rotation((0.3, -0.5, 0.8), 23.0)


@pytest.mark.parametrize("suffix", [".nii.gz", ".nii", ".nrrd", ".mha"])
@pytest.mark.parametrize(
    "case",
    ["oblique", "sagittal", "coronal", "anisotropic_with_gap"],
)
def test_volume_round_trip_is_exact_in_geometry_and_voxels(tmp_path, head_phantom, rotation, suffix, case):
    if case == "oblique":
        dwi, _, _ = head_phantom(direction=oblique_direction(rotation), spacing_mm=(1.1, 0.9, 5.0))
    elif case == "sagittal":  # slices along i: thick i, patient L→R order reversed, S→I rows
        direction = np.array([[-1.0, 0, 0], [0, 1, 0], [0, 0, -1]])  # columns: i→R, j→P, k→I
        dwi, _, _ = head_phantom(shape_kji=(36, 40, 10), spacing_mm=(6.0, 0.9, 0.9), direction=direction)
    elif case == "coronal":
        direction = np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]])  # i→L, j→A (thick), k→S
        dwi, _, _ = head_phantom(shape_kji=(36, 10, 40), spacing_mm=(0.9, 6.0, 0.9), direction=direction)
    else:  # 5 mm slices with a 1 mm gap: slice centres 6 mm apart
        dwi, _, _ = head_phantom(spacing_mm=(0.9, 0.9, 6.0))
    path = write_volume(dwi, tmp_path / f"dwi{suffix}")
    back = read_volume(path)
    assert_same_geometry(back, dwi, GEOMETRY_TOLERANCE_MM[suffix])
    np.testing.assert_array_equal(back.array, dwi.array)
    assert back.array.dtype == dwi.array.dtype


@pytest.mark.parametrize("suffix", [".nii.gz", ".nrrd", ".seg.nrrd"])
def test_mask_lands_exactly_on_the_input_grid(tmp_path, head_phantom, rotation, suffix):
    _, _, mask = head_phantom(direction=oblique_direction(rotation))
    path = write_mask(mask, tmp_path / f"mask{suffix}")
    back = read_volume(path)
    assert_same_geometry(back, mask, 1e-4 if suffix == ".nii.gz" else 1e-9)
    np.testing.assert_array_equal(back.array, mask.array)


def test_segmentation_file_has_infarct_segment_colour_and_snomed_terminology(tmp_path, head_phantom):
    _, _, mask = head_phantom()
    path = write_mask(mask, tmp_path / "lesion.seg.nrrd")
    segmentation = slicerio.read_segmentation(str(path))
    (segment,) = segmentation["segments"]
    assert segment["name"] == SEGMENT_NAME == "Infarct"
    assert len(segment["color"]) == 3
    assert segment["terminology"]["type"][:2] == ["SCT", "55641003"]  # SNOMED CT: Infarct
    assert segment["terminology"]["category"][:2] == ["SCT", "49755003"]  # Morphologically altered structure
    np.testing.assert_allclose(segmentation["ijkToLPS"], mask.ijk_to_lps_matrix(), atol=1e-9)


def test_nifti_stored_in_ras_and_nrrd_stored_in_lps_give_the_same_lps_geometry(tmp_path):
    """A NIfTI affine is RAS; SimpleITK (and so Volume) is LPS: x and y change sign."""
    array_xyz = np.arange(6 * 5 * 4, dtype=np.float32).reshape(6, 5, 4)  # nibabel order (i, j, k)
    ras_affine = np.array([[-0.9, 0, 0, 40.0], [0, 0.9, 0, -30.0], [0, 0, 6.0, 12.0], [0, 0, 0, 1]])
    nib.save(nib.Nifti1Image(array_xyz, ras_affine), tmp_path / "ras.nii.gz")
    lps_directions = np.diag([-1.0, -1.0, 1.0]) @ ras_affine[:3, :3]
    lps_origin = np.diag([-1.0, -1.0, 1.0]) @ ras_affine[:3, 3]
    nrrd.write(
        str(tmp_path / "lps.nrrd"),
        array_xyz,
        {"space": "left-posterior-superior", "space directions": lps_directions.T, "space origin": lps_origin},
        index_order="F",
    )
    # The same physical image described in RAS space in a NRRD file.
    nrrd.write(
        str(tmp_path / "ras.nrrd"),
        array_xyz,
        {"space": "right-anterior-superior", "space directions": ras_affine[:3, :3].T, "space origin": ras_affine[:3, 3]},
        index_order="F",
    )
    volumes = [read_volume(tmp_path / name) for name in ("ras.nii.gz", "lps.nrrd", "ras.nrrd")]
    corner = np.array([5.0, 4.0, 3.0])
    expected_lps = lps_directions @ corner + lps_origin
    for volume in volumes:
        np.testing.assert_allclose(volume.index_to_lps(corner), expected_lps, atol=1e-4)
        np.testing.assert_array_equal(volume.array, np.transpose(array_xyz, (2, 1, 0)))


def test_writes_are_atomic_and_never_overwrite_without_permission(tmp_path, head_phantom):
    dwi, _, mask = head_phantom()
    target = tmp_path / "mask.nii.gz"
    target.write_bytes(b"the user's precious file")
    with pytest.raises(ValueError, match="already exists"):
        write_mask(mask, target)
    assert target.read_bytes() == b"the user's precious file"
    write_mask(mask, target, overwrite=True)
    np.testing.assert_array_equal(read_volume(target).array, mask.array)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mask.nii.gz"]  # no temporary file left behind


def test_write_mask_refuses_probabilities_and_unknown_formats(tmp_path, head_phantom):
    dwi, _, mask = head_phantom()
    with pytest.raises(ValueError, match="binary"):
        write_mask(dwi, tmp_path / "p.nii.gz")
    with pytest.raises(ValueError, match="unsupported"):
        write_mask(mask, tmp_path / "mask.png")
    with pytest.raises(ValueError, match="does not exist"):
        write_volume(dwi, tmp_path / "missing-folder" / "dwi.nii.gz")
    assert list(tmp_path.iterdir()) == []
