"""prepare_input: channels, normalisation, slice stack, and the exact way back to the DWI grid."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Study, Volume
from LambdaSegmentLib.io.foreground import brain_foreground
from LambdaSegmentLib.io.units import eadc_from_adc
from LambdaSegmentLib.preprocessing import prepare_input

MANIFEST = {
    "channels": ["eadc", "dwi"],
    "in_plane_spacing_mm": 2.0,
    "normalization": {"dwi": "brain_median", "eadc": "clip01"},
    "pad_multiple": 16,
}


def study_of(dwi: Volume, adc: Volume) -> Study:
    return Study(dwi, adc, eadc_from_adc(adc, 1000.0), 1000.0, "1e-3 mm2/s", {"dwi": "<memory>", "adc": "<memory>"})


def geometries(rotation):
    """Acquisitions to check: axial, oblique, sagittal and coronal (slices along i, j and k), LPS- and RAS-like storage."""
    return {
        "axial": dict(shape_kji=(10, 40, 36), spacing_mm=(0.9, 0.9, 6.0)),
        "axial_stored_ras": dict(shape_kji=(10, 40, 36), spacing_mm=(0.9, 0.9, 6.0), direction=np.diag([-1.0, -1.0, 1.0])),
        "oblique": dict(shape_kji=(10, 40, 36), spacing_mm=(1.1, 0.9, 5.0), direction=rotation((0.3, -0.5, 0.8), 23.0)),
        "sagittal_along_i": dict(shape_kji=(36, 40, 10), spacing_mm=(6.0, 0.9, 0.9), direction=np.array([[-1.0, 0, 0], [0, 1, 0], [0, 0, -1]])),
        "coronal_along_j": dict(shape_kji=(36, 10, 40), spacing_mm=(0.9, 6.0, 0.9), direction=np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]])),
    }


@pytest.mark.parametrize("name", ["axial", "axial_stored_ras", "oblique", "sagittal_along_i", "coronal_along_j"])
def test_every_model_voxel_maps_back_to_exactly_the_dwi_grid(head_phantom, rotation, name):
    dwi, adc, mask = head_phantom(**geometries(rotation)[name])
    prepared = prepare_input(study_of(dwi, adc), MANIFEST)
    c, t, h, w = prepared.channels.shape
    assert (c, prepared.channels.dtype) == (2, np.float32)
    assert h % 16 == 0 and w % 16 == 0
    assert t == dwi.size_ijk[prepared.slice_axis] == prepared.num_slices
    assert prepared.spacing_thw_mm == (max(dwi.spacing_mm), 2.0, 2.0)

    # A mask put through the model grid lands on exactly the DWI grid, and comes back unchanged
    # wherever the 2 mm grid can represent it (here: a constant map and a map with no lesion).
    for stack, expected in ((np.ones((t, h, w), np.float32), 1.0), (np.zeros((t, h, w), np.uint8), 0)):
        back = prepared.to_dwi_grid(stack, interpolation="nearest")
        assert back.array.shape == dwi.array.shape
        assert (back.spacing_mm, back.origin_mm) == (dwi.spacing_mm, dwi.origin_mm)
        np.testing.assert_array_equal(back.direction, dwi.direction)
        assert np.all(back.array == expected)

    # The identity map: each model voxel's own LPS position, sent back, is each DWI voxel's
    # position (linear interpolation reproduces a linear field exactly away from the border).
    model_grid = prepared.model_grid_volume(np.zeros((t, h, w), np.float32))
    tt, hh, ww = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
    positions = model_grid.index_to_lps(np.stack([ww, hh, tt], axis=-1))
    kk, jj, ii = np.meshgrid(*[np.arange(n) for n in dwi.array.shape], indexing="ij")
    expected = dwi.index_to_lps(np.stack([ii, jj, kk], axis=-1))
    interior = np.ones(dwi.array.shape, bool)
    for axis in range(3):
        if axis != prepared.slice_axis:
            index = np.indices(dwi.array.shape)[2 - axis]  # ITK axis a is NumPy axis 2 - a
            interior &= (index >= 2) & (index < dwi.size_ijk[axis] - 2)
    for coordinate in range(3):
        recovered = prepared.to_dwi_grid(positions[..., coordinate].astype(np.float32)).array
        np.testing.assert_allclose(recovered[interior], expected[..., coordinate][interior], atol=2e-3)


def test_without_in_plane_resampling_the_channels_come_back_exactly(head_phantom, rotation):
    dwi, adc, _ = head_phantom(**geometries(rotation)["sagittal_along_i"])
    prepared = prepare_input(study_of(dwi, adc), {**MANIFEST, "in_plane_spacing_mm": None})
    assert not prepared.grid.resampled
    brain = brain_foreground(dwi)
    expected_dwi = dwi.array / np.median(dwi.array[brain])
    np.testing.assert_allclose(prepared.to_dwi_grid(prepared.channels[1]).array, expected_dwi, rtol=1e-6)
    np.testing.assert_array_equal(prepared.to_dwi_grid(prepared.channels[0]).array, np.clip(study_of(dwi, adc).eadc.array, 0, 1))


def test_a_mask_goes_to_the_model_grid_with_the_channels_and_must_be_on_the_dwi_grid(head_phantom, rotation):
    dwi, adc, mask = head_phantom(**geometries(rotation)["oblique"])
    prepared = prepare_input(study_of(dwi, adc), MANIFEST)
    target = prepared.to_model_grid(mask)
    assert target.shape == prepared.channels.shape[1:]
    assert set(np.unique(target)) == {0.0, 1.0}
    # lesion volume is kept to within the 2 mm grid's partial voxels
    model_voxel_ml = np.prod(prepared.spacing_thw_mm) / 1000
    assert target.sum() * model_voxel_ml == pytest.approx(mask.array.sum() * dwi.voxel_volume_mm3 / 1000, rel=0.25)
    shifted = Volume(mask.array, mask.spacing_mm, np.asarray(mask.origin_mm) + 3.0, mask.direction)
    with pytest.raises(BadInputError, match="not on the DWI grid: origin shifted"):
        prepared.to_model_grid(shifted)


def test_slices_are_never_mixed_by_in_plane_resampling(head_phantom):
    dwi, adc, _ = head_phantom(shape_kji=(8, 40, 36), spacing_mm=(0.9, 0.9, 6.0))
    striped = dwi.with_array(np.broadcast_to(np.arange(8, dtype=np.float32)[:, None, None] * 100 + 50, dwi.array.shape).copy())
    prepared = prepare_input(study_of(striped, adc), {"channels": ["dwi"], "in_plane_spacing_mm": 2.0})
    (hb, ha), (wb, wa) = prepared.grid.padding_hw
    inside = prepared.channels[0][:, hb : prepared.channels.shape[2] - ha, wb : prepared.channels.shape[3] - wa]
    for t in range(8):  # axial, stored LPS: t runs along k
        np.testing.assert_allclose(inside[t], t * 100 + 50, rtol=1e-5)


def test_the_model_sees_the_same_anatomy_whether_the_file_was_stored_lps_or_ras(head_phantom):
    dwi, adc, _ = head_phantom()
    flipped = np.diag([-1.0, -1.0, 1.0])
    far_corner = dwi.index_to_lps(np.array([dwi.size_ijk[0] - 1, dwi.size_ijk[1] - 1, 0]))

    def as_ras_storage(volume: Volume) -> Volume:
        return Volume(volume.array[:, ::-1, ::-1], volume.spacing_mm, far_corner, volume.direction @ flipped)

    lps = prepare_input(study_of(dwi, adc), MANIFEST)
    ras = prepare_input(study_of(as_ras_storage(dwi), as_ras_storage(adc)), MANIFEST)
    np.testing.assert_allclose(ras.channels, lps.channels, atol=1e-6)


def test_axial_display_orientation_puts_anterior_up_and_patient_left_on_the_right(head_phantom):
    dwi, adc, _ = head_phantom()
    prepared = prepare_input(study_of(dwi, adc), {"channels": ["dwi"]})
    grid = prepared.model_grid_volume(prepared.channels[0])
    # i = w runs toward patient left (+L), j = h toward posterior (+P), k = t toward superior (+S)
    np.testing.assert_allclose(grid.direction, np.eye(3), atol=1e-12)


def test_normalisations_follow_the_manifest(head_phantom):
    dwi, adc, _ = head_phantom()
    study = study_of(dwi, adc)
    brain = brain_foreground(dwi)
    prepared = prepare_input(study, {"channels": ["dwi", "eadc", "adc"], "normalization": {"dwi": "brain_median", "eadc": "clip01"}})
    back = [prepared.to_dwi_grid(channel).array for channel in prepared.channels]
    assert np.median(back[0][brain]) == pytest.approx(1.0, abs=1e-6)
    assert back[1].min() >= 0 and back[1].max() <= 1
    np.testing.assert_array_equal(back[2], adc.array)  # no normalisation named: values as they are (10⁻³ mm²/s)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"channels": ["t2"]}, "channels must be"),
        ({"channels": []}, "channels must be"),
        ({"channels": ["dwi"], "normalization": {"dwi": "histogram_magic"}}, "unknown normalisation 'histogram_magic'"),
        ({"channels": ["dwi"], "in_plane_spacing_mm": 0}, "not a plausible voxel size"),
    ],
)
def test_a_bad_manifest_block_is_refused(head_phantom, block, message):
    dwi, adc, _ = head_phantom()
    with pytest.raises(BadInputError, match=message):
        prepare_input(study_of(dwi, adc), block)


def test_isles_case_prepares_to_a_padded_stack_and_maps_back(isles_case):
    from LambdaSegmentLib.io import load_study, read_volume

    prefix = isles_case / "sub-strokecase0001_ses-0001_"
    study = load_study(dwi=f"{prefix}dwi.nii.gz", adc=f"{prefix}adc.nii.gz")
    prepared = prepare_input(study, MANIFEST)
    assert prepared.plane == "axial" and prepared.slice_axis == 2
    assert prepared.channels.shape == (2, 73, 112, 112)
    mask = read_volume(f"{prefix}msk.nii.gz")
    target = prepared.to_model_grid(mask)  # the expert mask as a training target
    assert target.shape == prepared.channels.shape[1:]
    np.testing.assert_array_equal(prepared.to_dwi_grid(target.astype(np.uint8), interpolation="nearest").array, mask.array)


def test_downsampling_in_plane_averages_noise_instead_of_aliasing_it():
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 1.0, (4, 96, 96)).astype(np.float32)
    dwi = Volume(noise + 100.0, (0.5, 0.5, 5.0))
    study = Study(dwi, dwi, dwi, 1000.0, "1e-3 mm2/s", {})
    prepared = prepare_input(study, {"channels": ["dwi"], "in_plane_spacing_mm": 2.0, "pad_multiple": 1})
    assert prepared.channels.shape == (1, 4, 24, 24)
    # Plain linear sampling at a 4x coarser grid would keep σ ≈ 1 (each sample is ~1 voxel).
    assert prepared.channels[0].std() < 0.5
    assert prepared.channels[0].mean() == pytest.approx(100.0, abs=0.1)
