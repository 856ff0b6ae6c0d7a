"""Displaced, unequal partners of bilateral susceptibility pile-ups (issue 13: real rims are
bilateral but not mirror-exact): ``susceptibility_mirror_offset_mm`` and ``susceptibility_side_gain``."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from LambdaSegmentLib.synthesis import check_ranges, generate
from LambdaSegmentLib.synthesis.generator import _bilateral, _side_amplitudes, _surface_artefact_field, _with_mirror

# small and quick (~1 s a study): 2 mm in-plane, 4 mm slices; every pile-up bilateral, both blocks on
OPTIONS = {"in_plane_spacing_mm": 2.0, "fov_mm": (200.0, 200.0), "coverage_mm": (150.0, 150.0), "oblique_probability": 0.0,
           "slice_thickness_mm": 4.0, "skull_stripped": True, "lesion_kind": "lacunar", "susceptibility_probability": 1.0,
           "susceptibility_bilateral_probability": 1.0, "susceptibility_temporal_probability": 1.0, "susceptibility_gain": 8.0}
DISPLACED = {"susceptibility_mirror_offset_mm": (2.0, 5.0), "susceptibility_side_gain": (0.6, 0.9)}
VOLUMES = ("dwi", "adc", "eadc", "mask", "tissue", "territory")


@pytest.fixture(scope="module")
def plain():
    return generate(23, **OPTIONS)


@pytest.mark.needs_atlas
def test_the_options_at_their_defaults_leave_every_study_unchanged(plain):
    explicit = generate(23, **OPTIONS, susceptibility_mirror_offset_mm=(0.0, 0.0), susceptibility_side_gain=(1.0, 1.0))
    fixed = generate(23, **OPTIONS, susceptibility_mirror_offset_mm=0.0, susceptibility_side_gain=1.0)
    for study in (explicit, fixed):
        for name in VOLUMES:
            assert np.array_equal(getattr(study, name).array, getattr(plain, name).array), name
        assert study.params == plain.params
    assert "susceptibility_side_gain" not in plain.params and "susceptibility_mirror_offset_mm" not in plain.params


@pytest.mark.needs_atlas
def test_displaced_unequal_partners_are_deterministic_and_change_only_the_edge(plain):
    displaced, again = generate(23, **OPTIONS, **DISPLACED), generate(23, **OPTIONS, **DISPLACED)
    for name in VOLUMES:
        assert np.array_equal(getattr(displaced, name).array, getattr(again, name).array), name
    assert displaced.params == again.params
    # drawn from their own generators: the lesion, tissue, geometry and units are the plain study's
    for name in ("mask", "tissue", "territory"):
        assert np.array_equal(getattr(displaced, name).array, getattr(plain, name).array), name
    for name in ("size_ijk", "spacing_mm", "origin_mm", "direction"):
        assert np.array_equal(np.asarray(getattr(displaced.dwi, name)), np.asarray(getattr(plain.dwi, name))), name
    assert displaced.adc_unit == plain.adc_unit
    assert displaced.b_value == plain.b_value
    assert 0.6 <= displaced.params["susceptibility_side_gain"] <= 0.9
    offsets = displaced.params["susceptibility_mirror_offset_mm"]
    assert len(offsets["skull_base"]) == plain.params["susceptibility"] // 2
    assert len(offsets["temporal"]) == plain.params["susceptibility_temporal"] // 2
    assert all(2.0 - 1e-3 <= length <= 5.0 + 1e-3 for lengths in offsets.values() for length in lengths)
    # only the pile-ups change: at the brain's edge, nowhere deep
    changed = ~np.isclose(displaced.dwi.array, plain.dwi.array, rtol=1e-5)
    assert changed.any()
    brain = ndimage.binary_fill_holes(plain.dwi.array > 0)
    depth = ndimage.distance_transform_edt(brain, sampling=np.asarray(plain.dwi.spacing_mm)[::-1])
    assert np.all(depth[changed & brain] < 15.0)


def pile_up_pair(offset_mm: tuple[float, float], side_gain: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[float]]:
    """Two temporal pile-ups on the template's left side: their exact mirror images (2, 3), the
    centres with their partners (4, 3), the field (x, y, z, 2 mm grid) and the partners' offsets (mm)."""
    from LambdaSegmentLib.synthesis.template import load_tissue_template, skull_base_region

    size_x = load_tissue_template().gm.shape[0]
    temporal = np.argwhere(skull_base_region(("temporal",)))
    left = temporal[temporal[:, 0] < size_x // 2 - 5]
    picks = left[np.random.default_rng(3).integers(len(left), size=2)].astype(np.float32)
    rng = np.random.default_rng(2) if offset_mm[1] > 0 else None
    centres, amplitudes, lengths = _bilateral(picks, size_x, rng, offset_mm, side_gain)
    field = _surface_artefact_field(centres, np.full(len(centres), 4.0), 4.0, amplitudes)
    return _with_mirror(picks, size_x)[2:], centres, field.values, lengths


@pytest.mark.needs_atlas
def test_the_field_is_mirror_symmetric_only_without_offset_and_side_gain():
    mirror, centres, field, lengths = pile_up_pair((0.0, 0.0), None)
    assert lengths == [] and np.array_equal(centres[2:], mirror)
    # the template is symmetric about its middle x index, and so is its 2 mm grid
    assert np.allclose(field, field[::-1], atol=1e-6)
    half = field.shape[0] // 2
    assert field[half + 1:].max() == pytest.approx(field[:half].max(), rel=1e-6)

    mirror, centres, field, lengths = pile_up_pair((3.0, 5.0), 0.6)
    assert np.allclose(np.linalg.norm(centres[2:] - mirror, axis=1), lengths, atol=1e-3)
    assert all(3.0 - 1e-3 <= length <= 5.0 + 1e-3 for length in lengths)
    assert np.abs(field - field[::-1]).max() > 0.3
    # the partners (right side) peak near 0.6 of the originals: still bright, a few mm away
    assert 0.45 < field[half + 1:].max() / field[:half].max() < 0.75


@pytest.mark.needs_atlas
def test_partners_move_along_the_surface_laterally_or_inferiorly():
    from LambdaSegmentLib.synthesis.template import load_head_distance, load_tissue_template, skull_base_region

    template = load_tissue_template()
    size_x = template.gm.shape[0]
    temporal = np.argwhere(skull_base_region(("temporal",)))
    picks = temporal[np.random.default_rng(5).integers(len(temporal), size=200)].astype(np.float32)
    centres, amplitudes, lengths = _bilateral(picks, size_x, np.random.default_rng(1), (3.0, 3.0), None)
    assert amplitudes is None and np.allclose(lengths, 3.0, atol=1e-3)
    mirror = _with_mirror(picks, size_x)[200:]
    offset = centres[200:] - mirror  # template voxels of 1 mm, RAS-ordered axes (affine diagonal +1)
    assert np.all(np.diag(template.affine)[:3] > 0)
    lateral = offset[:, 0] * np.sign(mirror[:, 0] - (size_x - 1) / 2)
    inferior = -offset[:, 2]
    assert np.mean(lateral + inferior > 0) > 0.85 and np.mean(inferior) > 1.0
    # along the surface: the depth under it changes little (curvature only)
    distance = load_head_distance()
    depth_change = ndimage.map_coordinates(distance, centres[200:].T, order=1) - ndimage.map_coordinates(distance, mirror.T, order=1)
    assert np.percentile(np.abs(depth_change), 90) < 1.2


def test_side_amplitudes_keep_the_brighter_side_at_one():
    assert np.array_equal(_side_amplitudes(2, 0.6), np.asarray([1.0, 1.0, 0.6, 0.6], dtype=np.float32))
    assert np.allclose(_side_amplitudes(1, 1.25), [0.8, 1.0])


@pytest.mark.parametrize("name, value, match", [
    ("susceptibility_mirror_offset_mm", (-1.0, 2.0), "lengths >= 0 in mm"),
    ("susceptibility_mirror_offset_mm", (3.0, 2.0), "lengths >= 0 in mm"),
    ("susceptibility_mirror_offset_mm", (1.0, 2.0, 3.0), "a number or a \\(lo, hi\\) pair"),
    ("susceptibility_side_gain", (0.0, 0.8), "in \\(0, 1.5\\]"),
    ("susceptibility_side_gain", (0.8, 2.0), "in \\(0, 1.5\\]"),
    ("susceptibility_side_gain", "dim", "a number or a \\(lo, hi\\) pair"),
])
def test_bad_values_are_refused_naming_the_option(name, value, match):
    with pytest.raises(ValueError, match=f"{name} must be .*{match}"):
        check_ranges({name: value})
    with pytest.raises(ValueError, match=name):
        generate(0, **{name: value})


def test_good_values_pass():
    merged = check_ranges({"susceptibility_mirror_offset_mm": [2, 5], "susceptibility_side_gain": 1.5})
    assert merged["susceptibility_mirror_offset_mm"] == [2, 5]
