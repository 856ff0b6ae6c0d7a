"""The synthetic stroke DWI generator: geometry, units, determinism, lesions, contrasts."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io.units import ADC_UNIT_TO_CANONICAL
from LambdaSegmentLib.synthesis import ADC_UNITS, check_ranges, generate
from LambdaSegmentLib.synthesis.template import ATLAS_ENV, MAJOR_TERRITORY, load_territories, load_tissue_template

# Small, quick studies: 2 mm in-plane, moderate FOV.
SMALL = {"in_plane_spacing_mm": 2.0, "fov_mm": (200.0, 200.0), "coverage_mm": (130.0, 130.0)}


def canonical_adc(study) -> np.ndarray:
    """ADC in 1e-3 mm^2/s whatever unit the study stores it in."""
    return study.adc.array * ADC_UNIT_TO_CANONICAL[study.adc_unit]


@pytest.fixture(scope="module")
def territorial():
    return generate(11, **SMALL, slice_thickness_mm=3.0, lesion_kind="territorial", lesion_volume_ml=(8.0, 30.0),
                    skull_stripped=True)


@pytest.fixture(scope="module")
def shower():
    return generate(12, **SMALL, slice_thickness_mm=2.0, lesion_kind="embolic", lesion_volume_ml=(2.0, 10.0))


@pytest.mark.needs_atlas
def test_same_seed_gives_the_same_study_and_another_seed_another():
    first, again = generate(3, **SMALL, slice_thickness_mm=6.0), generate(3, **SMALL, slice_thickness_mm=6.0)
    other = generate(4, **SMALL, slice_thickness_mm=6.0)
    for name in ("dwi", "adc", "eadc", "mask"):
        assert np.array_equal(getattr(first, name).array, getattr(again, name).array), name
    assert first.params == again.params
    assert first.dwi.array.shape != other.dwi.array.shape or not np.array_equal(first.dwi.array, other.dwi.array)


@pytest.mark.needs_atlas
def test_requested_spacing_axial_orientation_and_unit_hold():
    study = generate(5, in_plane_spacing_mm=1.5, slice_thickness_mm=4.0, slice_gap_mm=1.0, oblique_probability=0.0,
                     fov_mm=(180.0, 180.0), coverage_mm=(100.0, 100.0), adc_unit="1e-6 mm2/s")
    assert study.dwi.spacing_mm == pytest.approx((1.5, 1.5, 5.0))  # slice distance = thickness + gap
    assert study.params["slice_thickness_mm"] == pytest.approx(4.0)
    assert abs(study.dwi.direction[2, 2]) == pytest.approx(1.0)  # k runs superior-inferior: axial
    for name in ("adc", "eadc", "mask", "tissue", "territory"):
        volume = getattr(study, name)
        assert volume.spacing_mm == study.dwi.spacing_mm and volume.origin_mm == study.dwi.origin_mm
        assert np.array_equal(volume.direction, study.dwi.direction) and volume.array.shape == study.dwi.array.shape
    assert study.adc_unit == "1e-6 mm2/s"
    tissue = study.tissue.array >= 2
    assert 600 < np.median(study.adc.array[tissue]) < 1200  # normal GM/WM ~0.7-0.9e-3 mm^2/s, in 1e-6 units


@pytest.mark.needs_atlas
def test_oblique_stack_is_tilted_by_the_requested_angle():
    study = generate(6, **SMALL, slice_thickness_mm=5.0, oblique_probability=1.0, tilt_deg=20.0)
    slice_normal = study.dwi.direction[:, 2]
    angle = np.degrees(np.arccos(abs(slice_normal[2])))
    assert 15.0 < angle < 30.0
    assert study.params["oblique"] and study.params["tilt_deg"] == pytest.approx(20.0)


@pytest.mark.needs_atlas
@pytest.mark.parametrize("unit", ADC_UNITS)
def test_adc_is_stored_in_the_requested_unit_and_eadc_is_exp_minus_b_adc(unit):
    study = generate(7, **{**SMALL, "coverage_mm": (60.0, 60.0)}, slice_thickness_mm=7.0, adc_unit=unit)
    adc = canonical_adc(study)
    tissue = study.tissue.array >= 2
    assert 0.6 < np.median(adc[tissue]) < 1.2
    expected = np.exp(-study.b_value * adc[tissue] / 1000.0)
    assert np.allclose(study.eadc.array[tissue], expected, atol=1e-4)
    assert 800 <= study.b_value <= 1000


@pytest.mark.needs_atlas
def test_territorial_lesion_volume_is_within_the_requested_range(territorial):
    mask_ml = territorial.mask.array.sum() * territorial.mask.voxel_volume_mm3 / 1000
    assert territorial.params["lesion"]["volume_ml"] == pytest.approx(mask_ml)
    # drawn within 8-30 mL on the template; slab partial volume moves the mask a little
    assert 8.0 * 0.8 <= mask_ml <= 30.0 * 1.2


@pytest.mark.needs_atlas
def test_lacune_is_small_and_deep():
    study = generate(13, **SMALL, slice_thickness_mm=2.0, lesion_kind="lacunar", lesion_volume_ml=(0.3, 1.5))
    mask_ml = study.params["lesion"]["volume_ml"]
    assert 0.3 * 0.6 <= mask_ml <= 1.5 * 1.4
    assert study.params["lesion"]["territories"][0] in (3, 4, 5, 6, 21, 22, 23, 24, 25, 26)


@pytest.mark.needs_atlas
def test_lesions_lie_in_brain_tissue_of_their_territory(territorial):
    mask = territorial.mask.array > 0
    assert mask.any()
    assert np.all(territorial.tissue.array[mask] >= 1)  # never in background
    assert np.mean(territorial.tissue.array[mask] >= 2) > 0.9  # GM or WM, not CSF
    labels = territorial.territory.array[mask]
    (territory,) = territorial.params["lesion"]["territories"]
    assert np.mean(labels == territory) > 0.85  # boundary voxels may sample the neighbour


@pytest.mark.needs_atlas
def test_an_embolic_shower_has_many_components_in_one_hemisphere(shower):
    lesion = shower.params["lesion"]
    assert lesion["components"] >= 3
    territories = lesion["territories"]
    assert len({label % 2 for label in territories}) == 1  # odd labels left, even right
    labels = shower.territory.array[shower.mask.array > 0]
    assert np.mean(np.isin(labels, territories)) > 0.8


@pytest.mark.needs_atlas
def test_lesion_contrast_matches_the_stated_ranges(territorial):
    adc = canonical_adc(territorial)
    dwi = territorial.dwi.array
    mask = territorial.mask.array > 0
    normal = (territorial.tissue.array >= 2) & ~mask
    relative_adc = np.median(adc[mask]) / np.median(adc[normal])
    relative_dwi = np.median(dwi[mask]) / np.median(dwi[normal])
    # core 0.45-0.8 of normal; masks include rim and partial volume (expert masks do too)
    assert 0.4 < relative_adc < 0.9
    assert 1.2 < relative_dwi < 3.2
    core = mask & (adc < np.percentile(adc[mask], 25))
    assert 0.35 < np.median(adc[core]) < 0.7  # the core reaches the clinical infarct ADC


@pytest.mark.needs_atlas
def test_lesion_free_study_has_an_empty_mask():
    study = generate(8, **{**SMALL, "coverage_mm": (60.0, 60.0)}, slice_thickness_mm=6.0, lesion_kind="none")
    assert study.mask.array.sum() == 0 and study.params["lesion"]["kind"] == "none"


@pytest.mark.needs_atlas
def test_territories_are_registered_onto_the_template_brain():
    template = load_tissue_template()
    territories = load_territories()
    brain = (template.gm + template.wm) > 0.5
    arterial = (territories > 0) & (territories <= 30)
    assert np.mean(arterial[brain] | (territories[brain] > 30)) > 0.95  # almost all brain has a territory
    assert np.mean(brain[arterial]) > 0.8  # territories sit on the brain
    # left territories (odd labels) lie at negative RAS x
    x = np.nonzero(territories == 7)[0] * template.affine[0, 0] + template.affine[0, 3]
    assert np.mean(x) < -10 and MAJOR_TERRITORY[7] == "MCA"


def test_missing_atlas_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(ATLAS_ENV, str(tmp_path / "nowhere" / "ArterialAtlas.nii.gz"))
    with pytest.raises(BadInputError, match="arterial-territory atlas"):
        generate(0, **SMALL)


def test_unknown_option_is_refused():
    with pytest.raises(ValueError, match="unknown synthesis option"):
        generate(0, slice_thickness=5.0)


@pytest.mark.needs_atlas
def test_a_lower_label_fraction_widens_only_the_mask(territorial) -> None:
    """Issue 13's rule 107: the same draw, the label out to a lesion fraction of 0.3; no signal
    or other volume changes, the geometry stays, and the option is validated."""
    wide = generate(11, **SMALL, slice_thickness_mm=3.0, lesion_kind="territorial", lesion_volume_ml=(8.0, 30.0),
                    skull_stripped=True, label_fraction=0.3)
    for name in ("dwi", "adc", "eadc", "tissue", "territory"):
        np.testing.assert_array_equal(np.asarray(getattr(wide, name).array), np.asarray(getattr(territorial, name).array))
    plain, widened = np.asarray(territorial.mask.array) != 0, np.asarray(wide.mask.array) != 0
    assert (widened >= plain).all() and widened.sum() > plain.sum()
    assert wide.mask.spacing_mm == territorial.mask.spacing_mm and wide.mask.origin_mm == territorial.mask.origin_mm
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="label_fraction"):
            check_ranges({"label_fraction": bad})


@pytest.mark.needs_atlas
def test_small_lesion_labels_add_the_unlabelled_pieces_cores_and_nothing_else(shower) -> None:
    """Issue 13's rule 146: the same draw; every lesion piece the label left out whose largest share
    reaches the option gets its core labelled (share >= half that largest), labelled pieces and
    every image stay as they were, and the option is validated."""
    from scipy import ndimage

    from LambdaSegmentLib.synthesis.generator import LESION_PIECE_FRACTION, small_lesion_labels

    share = np.asarray(shower.lesion_fraction.array)
    assert share.shape == shower.mask.array.shape and shower.lesion_fraction.spacing_mm == shower.mask.spacing_mm
    plain = np.asarray(shower.mask.array) != 0
    pieces, count = ndimage.label(share >= LESION_PIECE_FRACTION, structure=np.ones((3, 3, 3), bool))
    peaks = np.asarray(ndimage.maximum(share, pieces, np.arange(1, count + 1))).reshape(-1)
    held = np.asarray(ndimage.maximum(plain, pieces, np.arange(1, count + 1))).reshape(-1) > 0
    left_out = np.flatnonzero(~held & (peaks >= 0.25)) + 1
    assert len(left_out) > 0, "the shower should hold small pieces the 0.5 label leaves out"
    labelled = generate(12, **SMALL, slice_thickness_mm=2.0, lesion_kind="embolic", lesion_volume_ml=(2.0, 10.0),
                        small_lesion_label_share=0.25)
    for name in ("dwi", "adc", "eadc", "tissue", "territory", "lesion_fraction"):
        np.testing.assert_array_equal(np.asarray(getattr(labelled, name).array), np.asarray(getattr(shower, name).array))
    wider = np.asarray(labelled.mask.array) != 0
    assert (wider >= plain).all()
    added = wider & ~plain
    for index in left_out:
        piece = pieces == index
        core = piece & (share >= 0.5 * peaks[index - 1])
        if (core & (np.asarray(shower.tissue.array) > 0)).any():
            assert added[core].any()
    assert not added[np.isin(pieces, np.flatnonzero(held) + 1)].any()  # a labelled piece gets nothing more
    assert (share[added] < 0.5).all() and (share[added] >= 0.5 * 0.25).all()
    np.testing.assert_array_equal(added, small_lesion_labels(share, np.asarray(shower.tissue.array) > 0, plain, 0.25))
    assert labelled.params["lesion"]["components"] > shower.params["lesion"]["components"]
    for bad in (0.0, 0.01, 0.5, 0.7, True, "0.3"):
        with pytest.raises(ValueError, match="small_lesion_label_share"):
            check_ranges({"small_lesion_label_share": bad})
    assert check_ranges({"small_lesion_label_share": 0.25})["small_lesion_label_share"] == 0.25


@pytest.mark.needs_atlas
@pytest.mark.parametrize("kind", ["territorial", "embolic"])
def test_the_surface_pull_moves_the_drawn_lesion_outwards_and_nothing_else(kind: str) -> None:
    """Issue 13's rule 116 (``lesion_surface_pull``): the same draws, the lesion shifted towards the
    brain's surface (on the template: the same volume for a territorial lesion, the same number of
    blobs for a shower); at 0 exactly as without the option."""
    from LambdaSegmentLib.synthesis.lesions import draw_lesion, shallowness

    template, territories = load_tissue_template(), load_territories()
    drawn = {pull: draw_lesion(np.random.default_rng(7), kind, 12.0, template.gm, template.wm, territories, surface_pull=pull)
             for pull in (0.0, 2.0)}
    plain, _ = draw_lesion(np.random.default_rng(7), kind, 12.0, template.gm, template.wm, territories)
    np.testing.assert_array_equal(plain.values, drawn[0.0][0].values)
    near = shallowness()
    mean_near = {}
    for pull, (field, plan) in drawn.items():
        box = tuple(slice(a, a + n) for a, n in zip(field.start, field.values.shape))
        inside = field.values >= 0.5
        mean_near[pull] = float(near[box][inside].mean())
    assert drawn[2.0][0].values.shape == drawn[0.0][0].values.shape  # the crop (the territory's box) is kept
    assert drawn[2.0][1].components == drawn[0.0][1].components
    if kind == "territorial":
        assert drawn[2.0][1].volume_ml == pytest.approx(drawn[0.0][1].volume_ml)
    assert mean_near[2.0] > mean_near[0.0] + 0.05


@pytest.mark.needs_atlas
@pytest.mark.parametrize("kind", ["territorial", "embolic"])
def test_the_surface_pull_changes_the_study_only_around_its_lesion(kind: str, territorial, shower) -> None:
    """The acquisition, the artefacts and the noise of the study are drawn as without the option
    (a shower's blobs, whose draws depend on where they land, come from a replay of the study's
    generator); only the lesion (and its label) moves. Validated."""
    from scipy import ndimage

    options = ({"seed": 11, "slice_thickness_mm": 3.0, "lesion_volume_ml": (8.0, 30.0), "skull_stripped": True}
               if kind == "territorial" else {"seed": 12, "slice_thickness_mm": 2.0, "lesion_volume_ml": (2.0, 10.0)})
    plain = territorial if kind == "territorial" else shower
    pulled = generate(**options, **SMALL, lesion_kind=kind, lesion_surface_pull=2.0)
    plain_mask, pulled_mask = np.asarray(plain.mask.array) != 0, np.asarray(pulled.mask.array) != 0
    assert not np.array_equal(plain_mask, pulled_mask)
    assert pulled.params["lesion"]["components"] == plain.params["lesion"]["components"]
    for name in ("tissue", "territory"):
        np.testing.assert_array_equal(np.asarray(getattr(pulled, name).array), np.asarray(getattr(plain, name).array))
    # away from both labels only the signal of blobs too small to be labelled (and the faint
    # tails of the rest) may differ; a different random draw would change nearly every voxel
    away = ~ndimage.binary_dilation(plain_mask | pulled_mask, iterations=4)
    assert np.mean(np.asarray(pulled.dwi.array)[away] == np.asarray(plain.dwi.array)[away]) > 0.99
    for bad in (-0.5, 11.0):
        with pytest.raises(ValueError, match="lesion_surface_pull"):
            check_ranges({"lesion_surface_pull": bad})
