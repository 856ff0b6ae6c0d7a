"""The brain mask: brain coverage and non-brain inclusion on synthetic skull-on studies (whose
true brain the generator knows), skull-stripped inputs passing through as their nonzero
voxels, a zeroed background not mistaken for skull stripping, and slice-axis handling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume, load_study
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask, brain_volume_ml
from LambdaSegmentLib.synthesis import generate

pytestmark = pytest.mark.needs_atlas

#: Small skull-on studies (2 mm in plane): one axial with thick slices, one oblique and thick, one thinner.
SKULL_ON = [
    (3000, dict(in_plane_spacing_mm=2.0, slice_thickness_mm=6.0, oblique_probability=0.0)),
    (3001, dict(in_plane_spacing_mm=2.0, slice_thickness_mm=(5.0, 7.0), oblique_probability=1.0)),
    (3002, dict(in_plane_spacing_mm=2.0, slice_thickness_mm=3.0, oblique_probability=0.0)),
]


@pytest.mark.parametrize(("seed", "ranges"), SKULL_ON)
def test_the_mask_covers_the_brain_and_little_else_on_skull_on_studies(seed: int, ranges: dict) -> None:
    study = generate(seed, skull_stripped=False, **ranges)
    truth = np.asarray(study.tissue.array) > 0  # CSF, GM and WM
    mask = brain_mask(study.dwi)
    assert mask.shape == study.dwi.array.shape and mask.dtype == bool
    assert np.count_nonzero(mask & truth) >= 0.95 * np.count_nonzero(truth)
    assert np.count_nonzero(mask & ~truth) <= 0.05 * np.count_nonzero(~truth)
    # and the mask is mostly brain, not half a scalp
    assert np.count_nonzero(mask & ~truth) <= 0.12 * np.count_nonzero(mask)
    # the engine hands over the Study's own foreground (computed at load) instead of a second computation
    loaded = load_study(dwi=study.dwi, adc=study.adc, adc_unit=study.adc_unit, b_value=study.b_value)
    np.testing.assert_array_equal(brain_mask(loaded.dwi, foreground=loaded.foreground), mask)


def test_a_skull_stripped_study_passes_through_as_its_nonzero_brain() -> None:
    study = generate(3003, skull_stripped=True, in_plane_spacing_mm=2.0)
    nonzero = np.asarray(study.dwi.array) != 0
    assert nonzero.mean() < 0.75  # a real zero background
    np.testing.assert_array_equal(brain_mask(study.dwi), nonzero)


def test_a_skull_on_head_whose_air_was_zeroed_is_not_taken_as_skull_stripped() -> None:
    """Some scanners write 0 outside the head: the scalp is then nonzero but still not brain."""
    study = generate(3000, skull_stripped=False, **SKULL_ON[0][1])
    truth = np.asarray(study.tissue.array) > 0
    values = np.asarray(study.dwi.array)
    head = values > 0.1 * np.median(values[truth])
    zeroed = study.dwi.with_array(np.where(head, values, 0.0).astype(np.float32))
    assert (np.asarray(zeroed.array) == 0).mean() > 0.25
    mask = brain_mask(zeroed)
    assert not np.array_equal(mask, np.asarray(zeroed.array) != 0)
    assert np.count_nonzero(mask & ~truth) <= 0.12 * np.count_nonzero(mask)


def test_the_real_skull_stripped_isles_case_passes_through(isles_case) -> None:
    prefix = isles_case / "sub-strokecase0001_ses-0001_"
    study = load_study(dwi=f"{prefix}dwi.nii.gz", adc=f"{prefix}adc.nii.gz")
    np.testing.assert_array_equal(brain_mask(study.dwi), np.asarray(study.dwi.array) != 0)


def test_a_sagittal_stack_gets_the_same_mask_as_its_axial_twin() -> None:
    """Every operation is in-plane or per slice, whatever ITK axis the slices run along."""
    study = generate(3001, skull_stripped=False, **SKULL_ON[1][1])
    axial = study.dwi
    # the same voxels stored with the slices along i: array (k, j, i) -> (i', j, k') = transpose
    direction = axial.direction[:, [2, 1, 0]]
    spacing = tuple(np.asarray(axial.spacing_mm)[[2, 1, 0]])
    sagittal = Volume(np.ascontiguousarray(np.transpose(axial.array, (2, 1, 0))), spacing, axial.origin_mm, direction)
    np.testing.assert_array_equal(np.transpose(brain_mask(sagittal), (2, 1, 0)), brain_mask(axial))


def test_volume_in_ml_and_bad_requests() -> None:
    volume = Volume(np.ones((4, 10, 10), np.float32), (2.0, 2.0, 5.0))
    assert brain_volume_ml(np.ones((4, 10, 10), bool), volume) == pytest.approx(4 * 100 * 20 / 1000)
    with pytest.raises(BadInputError, match="unknown brain mask method"):
        brain_mask(volume, method="hd-bet")
    with pytest.raises(BadInputError, match="no positive voxel"):
        brain_mask(volume.with_array(np.zeros((4, 10, 10), np.float32)))
    np.testing.assert_array_equal(brain_mask(volume, method="nonzero"), np.ones((4, 10, 10), bool))


@pytest.mark.parametrize("case", ["sub-strokecase0001", "sub-strokecase0003"])
def test_real_skull_stripped_cases_averaged_into_6_mm_slabs_pass_through(isles_case, case: str) -> None:
    """A thick-slice skull-stripped study keeps its whole brain: its tapering end slabs once
    made the check fail on case 0003, and the morphology mask then cut 24 % of the brain and
    6 % of the infarct."""
    from LambdaSegmentLib.metrics.thick_slices import average_slabs

    prefix = isles_case.parent / case / f"{case}_ses-0001_"
    if not Path(f"{prefix}dwi.nii.gz").exists():
        pytest.skip(f"{case} is not in {isles_case.parent}")
    dwi = average_slabs(load_study(dwi=f"{prefix}dwi.nii.gz", adc=f"{prefix}adc.nii.gz").dwi, 3)
    assert dwi.spacing_mm[2] == pytest.approx(6.0)
    np.testing.assert_array_equal(brain_mask(dwi), np.asarray(dwi.array) != 0)


@pytest.mark.parametrize(("seed", "ranges"), [
    (3100, dict(in_plane_spacing_mm=2.0, fov_mm=512.0, slice_thickness_mm=6.0, slice_gap_mm=0.0, oblique_probability=0.0)),
    (3101, dict(in_plane_spacing_mm=2.0, slice_thickness_mm=(5.0, 7.0), oblique_probability=1.0)),
    (3102, dict(in_plane_spacing_mm=2.0, slice_thickness_mm=2.0, oblique_probability=0.0)),  # isotropic: the slice axis by tie
    (3103, dict(in_plane_spacing_mm=0.9, slice_thickness_mm=5.0, oblique_probability=0.0)),  # block-averaged first
])
def test_the_morphology_on_the_box_around_the_head_is_the_whole_grids(seed: int, ranges: dict, whole_grid_and_boxed) -> None:
    whole, boxed = whole_grid_and_boxed(generate(seed, skull_stripped=False, **ranges).dwi)
    assert whole.any()
    np.testing.assert_array_equal(boxed, whole)


def test_the_box_stops_at_the_field_of_view_where_the_head_touches_it(whole_grid_and_boxed) -> None:
    """A field of view cut through the head (the box cannot take its margin there): still the whole grid's mask."""
    dwi = generate(3104, skull_stripped=False, in_plane_spacing_mm=2.0, slice_thickness_mm=6.0, oblique_probability=0.0).dwi
    rows = np.flatnonzero(np.asarray(dwi.array).max(axis=(0, 2)) > 0)
    cut = Volume(np.ascontiguousarray(dwi.array[:, rows[0] + 12:, :]), dwi.spacing_mm, dwi.origin_mm, dwi.direction)
    whole, boxed = whole_grid_and_boxed(cut)
    assert whole[:, 0, :].any()  # the brain reaches the cut edge
    np.testing.assert_array_equal(boxed, whole)


@pytest.mark.parametrize("case", ["sub-strokecase0001", "sub-strokecase0003"])
def test_the_morphology_on_the_box_is_the_whole_grids_on_the_real_skull_stripped_cases(isles_case, case: str,
                                                                                       whole_grid_and_boxed) -> None:
    prefix = isles_case.parent / case / f"{case}_ses-0001_"
    if not Path(f"{prefix}dwi.nii.gz").exists():
        pytest.skip(f"{case} is not in {isles_case.parent}")
    whole, boxed = whole_grid_and_boxed(load_study(dwi=f"{prefix}dwi.nii.gz", adc=f"{prefix}adc.nii.gz").dwi)
    assert whole.any()
    np.testing.assert_array_equal(boxed, whole)
