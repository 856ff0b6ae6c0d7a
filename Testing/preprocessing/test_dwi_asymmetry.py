"""The ``dwi_asymmetry`` input channel: DWI minus its registered contralateral mirror, through prepare_input."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Study, Volume
from LambdaSegmentLib.io.foreground import brain_foreground
from LambdaSegmentLib.io.units import eadc_from_adc
from LambdaSegmentLib.preprocessing import normalization, prepare_input, symmetry
from LambdaSegmentLib.preprocessing.slice_stack import plan_slice_stack

PAPER = {"channels": ["eadc", "dwi"], "in_plane_spacing_mm": 2.0,
         "normalization": {"dwi": "brain_median_clip4", "eadc": "clip01"}, "pad_multiple": 16}
CONTRA = {**PAPER, "channels": ["eadc", "dwi", "dwi_asymmetry"]}


def head_study(direction=np.eye(3), *, lesion: bool = True, spacing_mm=(1.8, 1.8, 5.0), shape_kji=(16, 64, 64)):
    """An anisotropic thick-slice (5 mm) head whose anatomy is symmetric about the LPS x plane through its centre (which sits
    7 mm to the patient's left of the grid centre, so the midline must be found), with a
    one-sided bright infarct (left, low ADC) and a bilateral pair of bright blobs (normal ADC).

    Returns the study and bool maps (on the DWI grid) of the infarct, its mirror partner and
    the bilateral pair.
    """
    grid = Volume(np.zeros(shape_kji, np.float32), spacing_mm, (0.0, 0.0, 0.0), direction)
    kji = np.indices(shape_kji).reshape(3, -1).T
    lps = grid.index_to_lps(kji[:, ::-1]).reshape(*shape_kji, 3)
    centre = grid.index_to_lps((np.asarray(shape_kji[::-1]) - 1) / 2) + np.array([7.0, 0.0, 0.0])
    x, y, z = (lps[..., a] - centre[a] for a in range(3))
    brain = (x / 45) ** 2 + (y / 52) ** 2 + (z / 32) ** 2 <= 1
    blob = lambda cx, cy, cz, r: ((x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2) <= r**2  # noqa: E731
    infarct = blob(20.0, 8.0, 0.0, 8.0) & lesion
    partner = blob(-20.0, 8.0, 0.0, 8.0)
    bilateral = blob(28.0, -24.0, 6.0, 6.0) | blob(-28.0, -24.0, 6.0, 6.0)
    texture = 1.0 + 0.2 * np.cos(y / 7.0) + 0.1 * np.cos(z / 9.0) + 0.1 * np.cos(x / 5.0)  # even in x
    dwi = 100.0 * texture * (1.0 + 1.5 * infarct + 1.5 * bilateral) * brain
    adc = np.where(brain, np.where(infarct, 0.45, 0.8), 0.0)
    dwi_volume, adc_volume = grid.with_array(dwi.astype(np.float32)), grid.with_array(adc.astype(np.float32))
    study = Study(dwi_volume, adc_volume, eadc_from_adc(adc_volume, 1000.0), 1000.0, "1e-3 mm2/s", {"dwi": "<memory>", "adc": "<memory>"})
    return study, (infarct, partner & brain, bilateral)


def asymmetry_on_dwi_grid(study: Study, manifest=CONTRA) -> np.ndarray:
    prepared = prepare_input(study, manifest)
    return prepared.grid.from_stack(prepared.channels[prepared.channel_names.index("dwi_asymmetry")])


def test_a_left_right_symmetric_study_has_almost_no_asymmetry():
    study, _ = head_study(lesion=False)
    asymmetry = symmetry.dwi_asymmetry(study.dwi, brain_foreground(study.dwi))
    inside = brain_foreground(study.dwi)
    assert np.abs(asymmetry[inside]).mean() < 0.02
    assert np.percentile(np.abs(asymmetry[inside]), 99) < 0.15
    assert np.all(asymmetry[~inside] == 0)


def test_a_one_sided_infarct_is_positive_its_mirror_negative_and_a_bilateral_pair_near_zero():
    study, (infarct, partner, bilateral) = head_study()
    asymmetry = symmetry.dwi_asymmetry(study.dwi, brain_foreground(study.dwi))
    # 2.5x the surrounding tissue (+1.5 brain medians), smoothed over one 5 mm slice
    assert asymmetry[infarct].mean() > 0.7
    assert asymmetry[partner].mean() < -0.7
    assert abs(asymmetry[bilateral].mean()) < 0.1
    assert asymmetry.dtype == np.float32 and np.abs(asymmetry).max() <= symmetry.ASYMMETRY_CLIP


def test_a_stack_of_three_thick_slabs_still_gets_its_channel():
    """ITK's recursive Gaussians need 4 voxels per axis; a 3-slab stack (a thin study averaged
    into 6 mm slabs) is smoothed and registered in-plane only, and still compared with its mirror."""
    study, (infarct, partner, _bilateral) = head_study(spacing_mm=(1.8, 1.8, 8.0), shape_kji=(3, 64, 64))
    asymmetry = symmetry.dwi_asymmetry(study.dwi, brain_foreground(study.dwi))
    assert np.isfinite(asymmetry).all()
    assert asymmetry[infarct].mean() > 0.7 and asymmetry[partner].mean() < -0.7


def test_the_channel_is_the_same_whether_the_study_was_stored_lps_or_ras():
    study, (infarct, *_rest) = head_study()
    flipped = np.diag([-1.0, -1.0, 1.0])
    far_corner = study.dwi.index_to_lps(np.array([study.dwi.size_ijk[0] - 1, study.dwi.size_ijk[1] - 1, 0]))

    def as_ras(volume: Volume) -> Volume:
        return Volume(volume.array[:, ::-1, ::-1].copy(), volume.spacing_mm, far_corner, volume.direction @ flipped)

    ras_study = Study(as_ras(study.dwi), as_ras(study.adc), as_ras(study.eadc), 1000.0, "1e-3 mm2/s", study.sources)
    lps = prepare_input(study, CONTRA).channels
    ras = prepare_input(ras_study, CONTRA).channels
    np.testing.assert_array_equal(ras[:2], lps[:2])
    np.testing.assert_allclose(ras[2], lps[2], atol=0.05)  # the registration samples other voxels


@pytest.mark.parametrize("axis, degrees", [((0.0, 0.0, 1.0), 12.0), ((0.3, -0.5, 0.8), 15.0)], ids=["yawed", "oblique"])
def test_the_midline_is_found_from_the_image_on_an_oblique_grid(rotation, axis, degrees):
    """The same voxels with a rotated direction: the head is turned in LPS space, so the
    mirror across the LPS x plane is misaligned by twice the turn and the registration must
    undo it. The channel on the stack must stay the axial study's."""
    axial, (infarct, partner, _bilateral) = head_study()
    turned, _ = head_study()
    direction = rotation(axis, degrees)
    oblique = {name: Volume(getattr(turned, name).array, turned.dwi.spacing_mm, turned.dwi.origin_mm, direction)
               for name in ("dwi", "adc", "eadc")}
    oblique_study = Study(oblique["dwi"], oblique["adc"], oblique["eadc"], 1000.0, "1e-3 mm2/s", turned.sources)
    expected = asymmetry_on_dwi_grid(axial)
    found = asymmetry_on_dwi_grid(oblique_study)
    inside = brain_foreground(axial.dwi)
    assert np.abs(found - expected)[inside].mean() < 0.05
    assert found[infarct].mean() > 0.7 and found[partner].mean() < -0.7


def test_mirroring_a_study_left_right_mirrors_the_channel_without_changing_its_sign():
    """What the training's left-right window flip does to the stack (``image.flip(-1)``) is what
    the channel of a mirrored study is: flipping every channel together is consistent."""
    study, _ = head_study()
    mirrored = Study(*(getattr(study, name).with_array(getattr(study, name).array[:, :, ::-1].copy()) for name in ("dwi", "adc", "eadc")),
                     1000.0, "1e-3 mm2/s", study.sources)
    manifest = {**CONTRA, "in_plane_spacing_mm": None}  # axial LPS, native grid: w is i
    channels = prepare_input(study, manifest).channels
    mirrored_channels = prepare_input(mirrored, manifest).channels
    np.testing.assert_array_equal(mirrored_channels[:2], channels[:2, :, :, ::-1])
    np.testing.assert_allclose(mirrored_channels[2], channels[2, :, :, ::-1], atol=0.05)


def test_the_paper_channels_are_unchanged_and_pay_no_registration(monkeypatch):
    study, _ = head_study()

    def no_registration(*args, **kwargs):
        raise AssertionError("the two-channel input must not register the mirror")

    monkeypatch.setattr(symmetry, "contralateral_dwi", no_registration)
    prepared = prepare_input(study, PAPER)
    grid = plan_slice_stack(study.dwi, in_plane_spacing_mm=2.0, pad_multiple=16)
    brain = brain_foreground(study.dwi)
    expected = np.stack([
        grid.to_stack(normalization.normalize("clip01", study.eadc.array, brain)),
        grid.to_stack(normalization.normalize("brain_median_clip4", study.dwi.array, brain)),
    ])
    assert prepared.channel_names == ("eadc", "dwi")
    np.testing.assert_array_equal(prepared.channels, expected)


def test_the_asymmetry_channel_is_on_the_dwi_grid_and_stacked_like_the_others():
    study, _ = head_study()
    prepared = prepare_input(study, CONTRA)
    brain = brain_foreground(study.dwi)
    assert prepared.channels.shape[0] == 3 and prepared.channels.dtype == np.float32
    expected = prepared.grid.to_stack(symmetry.dwi_asymmetry(study.dwi, brain))
    np.testing.assert_allclose(prepared.channels[2], expected, atol=1e-6)


@pytest.mark.parametrize(
    "block, message",
    [
        ({"channels": ["eadc", "dwi", "dwi_mirror"]}, "preprocessing channels must be a list of"),
        ({"channels": ["eadc", "dwi_asymmetry"], "normalization": {"dwi_asymmetry": "brain_median"}}, "give them no normalization"),
    ],
    ids=["unknown-channel", "normalised-derived-channel"],
)
def test_an_unknown_or_renormalised_channel_is_refused(block, message):
    study, _ = head_study()
    with pytest.raises(BadInputError, match=message):
        prepare_input(study, block)
