"""The generator's realism features (issue 13): lesion signal, real shapes, edges, skull base, sharpness."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io.units import ADC_UNIT_TO_CANONICAL
from LambdaSegmentLib.synthesis import generate
from LambdaSegmentLib.synthesis.lesion_signal import apply_lesion_signal, lesion_signal
from LambdaSegmentLib.synthesis.lesymap import LESYMAP_ENV

SMALL = {"in_plane_spacing_mm": 2.0, "fov_mm": (200.0, 200.0), "coverage_mm": (150.0, 150.0), "oblique_probability": 0.0}
# every edge feature off: the old behaviour of a skull-stripped study
EDGES_OFF = {"dura_probability": 0.0, "vessel_probability": 0.0, "mask_rim_voxels": 0.0, "extra_axial_csf_mm": 0.0,
             "b0_b1000_shift_mm": 0.0, "susceptibility_probability": 0.0}


def canonical_adc(study) -> np.ndarray:
    return study.adc.array * ADC_UNIT_TO_CANONICAL[study.adc_unit]


def depth_mm(study) -> np.ndarray:
    """Distance (mm) of every voxel from the edge of the stored brain (DWI > 0)."""
    brain = ndimage.binary_fill_holes(study.dwi.array > 0)
    return ndimage.distance_transform_edt(brain, sampling=np.asarray(study.dwi.spacing_mm)[::-1])


def sphere(shape: tuple[int, int, int], radius: float) -> np.ndarray:
    grid = np.indices(shape, dtype=np.float32)
    centre = (np.asarray(shape, dtype=np.float32) - 1) / 2
    distance = np.sqrt(sum((grid[a] - centre[a]) ** 2 for a in range(3)))
    return np.clip(radius + 0.5 - distance, 0.0, 1.0)


# ---- lesion_signal: the one lesion model, on any grid (also for injection into real images)


def test_lesion_signal_grades_from_a_restricted_core_to_a_near_normal_bright_edge():
    fraction = sphere((31, 31, 31), 12.0)  # 2 mm voxels: a 24 mm radius (58 mL) infarct
    params = {"relative_adc": 0.55, "edge_relative_adc": 0.95, "grade_mm": 8.0, "core_dwi_ratio": 2.5,
              "edge_dwi_ratio": 1.6, "older_fraction": 0.0, "heterogeneity": 0.0}
    adc_factor, s0_factor = lesion_signal(np.random.default_rng(0), fraction, (2.0, 2.0, 2.0), **params)
    assert adc_factor.shape == s0_factor.shape == fraction.shape
    assert adc_factor.dtype == s0_factor.dtype == np.float32
    outside = fraction == 0
    assert np.all(adc_factor[outside] == 1.0) and np.all(s0_factor[outside] == 1.0)
    assert np.all(s0_factor >= 1.0)
    depth = ndimage.distance_transform_edt(fraction >= 0.5, sampling=2.0)
    core, edge = depth > 10.0, (depth > 0) & (depth <= 2.0) & (fraction >= 0.99)
    assert np.median(adc_factor[core]) == pytest.approx(0.55, abs=0.02)
    assert 0.85 < np.median(adc_factor[edge]) < 1.0  # relative ADC near normal at the edge
    dwi_ratio = s0_factor * np.exp(-1.0 * 0.8 * (adc_factor - 1.0))  # at the reference ADC, b = 1000
    assert np.median(dwi_ratio[core]) == pytest.approx(2.5, rel=0.05)
    assert 1.5 < np.median(dwi_ratio[edge]) < 2.0  # DWI stays bright where ADC is near normal
    assert np.median(s0_factor[edge]) > 1.4  # which takes a raised S0 (vasogenic / T2 component)


def test_lesion_signal_is_deterministic_and_keeps_a_core_in_small_lesions():
    fraction = np.zeros((20, 20, 20), np.float32)
    fraction[8:11, 8:11, 8:11] = 1.0  # a 3-voxel (6 mm) lesion
    first = lesion_signal(np.random.default_rng(4), fraction, 2.0)
    again = lesion_signal(np.random.default_rng(4), fraction, 2.0)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    options = {"relative_adc": 0.5, "heterogeneity": 0.0, "older_fraction": 0.0, "edge_relative_adc": 0.95}
    cored, _ = lesion_signal(np.random.default_rng(4), fraction, 2.0, **options, grade_reach=0.6)
    assert cored[9, 9, 9] < 0.6  # the grading width shrinks with the lesion: a lacune keeps its core
    faint, _ = lesion_signal(np.random.default_rng(4), fraction, 2.0, **options, grade_reach=2.0)
    assert faint[9, 9, 9] > cored[9, 9, 9] + 0.15  # or it never reaches it (a fainter embolic dot)
    with pytest.raises(ValueError, match="unknown lesion signal parameter"):
        lesion_signal(np.random.default_rng(0), fraction, 2.0, relative=0.5)


def test_injection_into_a_real_like_image_follows_the_signal_equation():
    rng = np.random.default_rng(2)
    adc = rng.uniform(0.7, 0.9, (24, 24, 24)).astype(np.float32)  # 1e-3 mm^2/s
    s0 = rng.uniform(900, 1100, adc.shape).astype(np.float32)
    dwi = s0 * np.exp(-adc)  # b = 1000
    fraction = sphere(adc.shape, 8.0)
    adc_factor, s0_factor = lesion_signal(rng, fraction, (2.0, 2.0, 2.0))
    new_dwi, new_adc = apply_lesion_signal(dwi, adc, 1000.0, adc_factor, s0_factor)
    outside = fraction == 0
    assert np.array_equal(new_dwi[outside], dwi[outside]) and np.array_equal(new_adc[outside], adc[outside])
    assert np.allclose(new_dwi, s0 * s0_factor * np.exp(-new_adc), rtol=1e-4)  # DWI = S0 exp(-b ADC)
    core = fraction >= 1.0
    assert np.median(new_adc[core] / adc[core]) < 0.95 and np.median(new_dwi[core] / dwi[core]) > 1.2


def test_older_parts_pseudo_normalise_adc_and_stay_bright():
    fraction = sphere((31, 31, 31), 12.0)
    base = {"relative_adc": 0.5, "edge_relative_adc": 0.95, "grade_mm": 4.0, "heterogeneity": 0.0, "core_dwi_ratio": 2.0,
            "edge_dwi_ratio": 1.5}
    fresh, _ = lesion_signal(np.random.default_rng(1), fraction, 2.0, **base, older_fraction=0.0)
    aged, s0 = lesion_signal(np.random.default_rng(1), fraction, 2.0, **base, older_fraction=0.6, t2_shine_through=0.5)
    inside = fraction >= 1.0
    assert np.median(aged[inside]) > np.median(fresh[inside]) + 0.1  # ADC rises towards normal
    changed = inside & (aged > fresh + 0.2)
    assert changed.any() and np.median(s0[changed]) > 1.5  # with T2 shine-through


# ---- generate(): the features where the bundled model errs


@pytest.mark.needs_atlas
def test_all_features_on_the_study_is_deterministic_and_the_mask_stays_in_brain():
    options = {**SMALL, "slice_thickness_mm": 4.0, "lesion_kind": "territorial", "skull_stripped": True,
               "lesymap_probability": 0.0, "dura_probability": 1.0, "vessel_probability": 1.0, "mask_rim_voxels": 2.0,
               "susceptibility_probability": 1.0}
    first, again = generate(21, **options), generate(21, **options)
    for name in ("dwi", "adc", "eadc", "mask", "tissue"):
        assert np.array_equal(getattr(first, name).array, getattr(again, name).array), name
    assert first.params == again.params
    mask = first.mask.array > 0
    assert mask.any()
    assert np.all(first.tissue.array[mask] >= 1) and np.all(first.dwi.array[mask] > 0)
    assert first.params["lesion"]["volume_ml"] == pytest.approx(mask.sum() * first.mask.voxel_volume_mm3 / 1000)


@pytest.mark.needs_atlas
def test_skull_stripped_rim_is_brighter_and_lower_in_adc_with_the_edge_features():
    options = {**SMALL, "slice_thickness_mm": 2.0, "skull_stripped": True, "lesion_kind": "none"}
    variants = {"plain": EDGES_OFF, "dura": {**EDGES_OFF, "dura_probability": 1.0, "dura_s0": 4.0},
                "rim": {**EDGES_OFF, "dura_probability": 1.0, "dura_s0": 4.0, "mask_rim_voxels": 1.0,
                        "b0_b1000_shift_mm": 1.0}}
    stats, kept = {}, {}
    for name, ranges in variants.items():
        study = generate(22, **options, **ranges)
        depth, dwi, adc = depth_mm(study), study.dwi.array, canonical_adc(study)
        brain = depth > 0
        dwi = dwi / np.median(dwi[brain])
        outer, interior = brain & (depth <= 2.0), brain & (depth > 10.0)  # the outermost voxel layer
        stats[name] = (np.percentile(dwi[outer], 95), np.median(dwi[interior]), np.mean(adc[outer] < 0.62))
        kept[name] = int(brain.sum())
    # dura / partial-volume pile-up: the outer layer's bright tail rises above the interior
    assert stats["dura"][0] > stats["plain"][0] + 0.2 and stats["dura"][0] > 1.4 * stats["dura"][1]
    assert stats["dura"][2] > stats["plain"][2]
    # a mask wider than the brain keeps a rim of partial-volume voxels with low, noisy ADC
    assert kept["rim"] > kept["dura"] and stats["rim"][2] > 0.03 > stats["plain"][2]


@pytest.mark.needs_atlas
def test_skull_base_susceptibility_is_bright_bilateral_and_at_the_edge():
    options = {**SMALL, "slice_thickness_mm": 2.0, "skull_stripped": True, "lesion_kind": "none", **EDGES_OFF}
    study = generate(23, **{**options, "susceptibility_probability": 1.0, "susceptibility_bilateral_probability": 1.0,
                            "susceptibility_gain": 8.0, "susceptibility_adc_shift": -0.3})
    depth = depth_mm(study)
    brain = depth > 0
    dwi = study.dwi.array / np.median(study.dwi.array[brain])
    bright = brain & (dwi > 3.0)
    assert bright.sum() * study.dwi.voxel_volume_mm3 / 1000 > 0.5  # several mL at > 3x the brain median
    assert dwi[brain].max() > 5.0  # real cases reach 6-8x
    assert np.median(depth[bright]) < 10.0  # near the brain's edge
    # on both sides of the brain's centre (LPS x)
    kji = np.argwhere(bright)
    x = study.dwi.index_to_lps(kji[:, ::-1].astype(float))[:, 0]
    centre = study.dwi.index_to_lps(np.argwhere(brain)[:, ::-1].astype(float).mean(axis=0))[0]
    assert np.mean(x > centre) > 0.15 and np.mean(x < centre) > 0.15
    assert np.median(canonical_adc(study)[bright]) < np.median(canonical_adc(study)[brain & (depth > 10)]) + 0.3


@pytest.mark.needs_atlas
def test_sharper_anatomy_has_more_in_plane_detail():
    options = {**SMALL, "slice_thickness_mm": 2.0, "skull_stripped": True, "lesion_kind": "none", **EDGES_OFF,
               "snr_b0": 200.0, "psf_sigma_voxels": 0.0}
    blurred = generate(24, **options, tissue_sharpening=1.0, sulcal_csf=0.0)
    sharp = generate(24, **options, tissue_sharpening=2.5, sulcal_csf=0.9)

    def gradient(study) -> float:
        adc = canonical_adc(study)
        depth = depth_mm(study)
        inner = (depth > 6.0) & (adc < 1.5)
        return float(np.mean(np.hypot(np.gradient(adc, axis=1), np.gradient(adc, axis=2))[inner]))

    assert gradient(sharp) > 1.1 * gradient(blurred)


@pytest.mark.needs_atlas
def test_temporal_pile_up_is_bilateral_lateral_and_wider_with_its_extent():
    options = {**SMALL, "slice_thickness_mm": 2.0, "skull_stripped": True, "lesion_kind": "none", **EDGES_OFF,
               "susceptibility_gain": 8.0}
    plain = generate(23, **options)  # no skull-base artefact at all (EDGES_OFF)

    def bright(study) -> tuple[np.ndarray, np.ndarray]:
        depth = depth_mm(study)
        brain = depth > 0
        return brain & (study.dwi.array / np.median(study.dwi.array[brain]) > 3.0), depth

    narrow = generate(23, **options, susceptibility_temporal_probability=1.0, susceptibility_extent_mm=2.0)
    wide = generate(23, **options, susceptibility_temporal_probability=1.0, susceptibility_extent_mm=8.0)
    assert np.array_equal(wide.dwi.array, generate(23, **options, susceptibility_temporal_probability=1.0,
                                                   susceptibility_extent_mm=8.0).dwi.array)
    for study in (narrow, wide):  # the lesion mask, tissue and geometry are those of the study without it
        assert np.array_equal(study.mask.array, plain.mask.array) and np.array_equal(study.tissue.array, plain.tissue.array)
        assert study.params["susceptibility_temporal"] in (2, 4)
    assert bright(plain)[0].sum() * plain.dwi.voxel_volume_mm3 / 1000 < 0.2
    mask, depth = bright(wide)
    volume_ml = mask.sum() * wide.dwi.voxel_volume_mm3 / 1000
    assert volume_ml > 0.5 and volume_ml > 2.0 * bright(narrow)[0].sum() * narrow.dwi.voxel_volume_mm3 / 1000
    assert np.median(depth[mask]) < 8.0  # at the brain's edge
    # lateral, on both sides of the brain's centre (LPS x), over the temporal lobes
    brain = depth > 0
    x = wide.dwi.index_to_lps(np.argwhere(mask)[:, ::-1].astype(float))[:, 0]
    centre = wide.dwi.index_to_lps(np.argwhere(brain)[:, ::-1].astype(float).mean(axis=0))[0]
    assert np.mean(x > centre + 25.0) > 0.25 and np.mean(x < centre - 25.0) > 0.25
    with pytest.raises(ValueError, match="susceptibility_extent_mm"):
        generate(23, susceptibility_extent_mm=(0.0, 4.0))
    with pytest.raises(ValueError, match="susceptibility_temporal_probability"):
        generate(23, susceptibility_temporal_probability=1.5)


@pytest.mark.needs_atlas
def test_adc_b0_noise_makes_only_the_adc_noisier_and_is_deterministic():
    options = {**SMALL, "slice_thickness_mm": 2.0, "skull_stripped": True, "lesion_kind": "lacunar", **EDGES_OFF}
    plain = generate(23, **options)
    noisy, again = generate(23, **options, adc_b0_noise=0.15), generate(23, **options, adc_b0_noise=0.15)
    assert np.array_equal(noisy.adc.array, again.adc.array) and noisy.params == again.params
    # every other draw of the study is unchanged: the same DWI, mask, geometry and units
    for name in ("dwi", "mask", "tissue"):
        assert np.array_equal(getattr(plain, name).array, getattr(noisy, name).array), name
    assert noisy.adc.spacing_mm == plain.adc.spacing_mm and noisy.adc_unit == plain.adc_unit
    assert noisy.params["adc_b0_noise"] == 0.15 and "adc_b0_noise" not in plain.params

    def residual(study) -> float:  # voxel-to-voxel ADC noise in deep white matter, 1e-3 mm^2/s
        adc = canonical_adc(study)
        deep = (depth_mm(study) > 20.0) & (study.tissue.array == 3)
        return float(np.std((adc - ndimage.median_filter(adc, size=(1, 3, 3)))[deep]))

    assert residual(noisy) > 1.5 * residual(plain)
    deep_wm = (depth_mm(plain) > 20.0) & (plain.tissue.array == 3)
    # noise, not a shift: the tissue's ADC median moves by under 0.03e-3 mm^2/s
    assert abs(np.median(canonical_adc(noisy)[deep_wm]) - np.median(canonical_adc(plain)[deep_wm])) < 0.03
    with pytest.raises(ValueError, match="adc_b0_noise"):
        generate(23, adc_b0_noise=(-0.1, 0.1))


@pytest.mark.needs_atlas
def test_csf_s0_sets_the_csf_brightness_on_b0_and_changes_nothing_else_drawn():
    """``csf_s0`` (CSF's S0 over white matter's): its default range draws exactly as the fixed
    range it replaced, and a value of its own brightens the CSF's S0 (DWI x exp(b x ADC)) alone."""
    options = {**SMALL, "slice_thickness_mm": 2.0, "skull_stripped": True, "lesion_kind": "lacunar", **EDGES_OFF}
    plain, bright = generate(23, **options), generate(23, **options, csf_s0=4.5)
    assert 1.8 <= plain.params["s0_csf"] <= 3.2 and bright.params["s0_csf"] == 4.5
    for name in ("mask", "tissue"):
        assert np.array_equal(getattr(plain, name).array, getattr(bright, name).array), name
    assert {k: v for k, v in plain.params.items() if k != "s0_csf"} == {k: v for k, v in bright.params.items() if k != "s0_csf"}

    def csf_over_wm_s0(study) -> float:
        adc = canonical_adc(study)
        s0 = np.asarray(study.dwi.array) * np.exp(study.b_value / 1000.0 * adc)
        deep = depth_mm(study) > 10.0
        return float(np.median(s0[deep & (adc > 2.5)]) / np.median(s0[deep & (study.tissue.array == 3)]))

    assert csf_over_wm_s0(bright) > 1.3 * csf_over_wm_s0(plain)
    with pytest.raises(ValueError, match="csf_s0"):
        generate(23, csf_s0=(0.1, 2.0))


@pytest.mark.needs_atlas
def test_csf_expansion_grows_the_csf_spaces_deep_in_the_brain_and_changes_nothing_else_drawn():
    """Atrophy (``csf_expansion``): more of the deep brain is CSF (ADC above 1.5e-3 mm^2/s), the
    stronger the expansion; the lesion, geometry and units are the same draws as without it."""
    options = {**SMALL, "slice_thickness_mm": 2.0, "skull_stripped": True, "lesion_kind": "lacunar"}
    plain = generate(23, **options)
    mild, strong = generate(23, **options, csf_expansion=1.0), generate(23, **options, csf_expansion=3.0)
    deep = (depth_mm(plain) > 6.0) & (plain.tissue.array > 0)

    def csf_share(study) -> float:
        return float(np.mean(canonical_adc(study)[deep] > 1.5))

    assert csf_share(plain) < csf_share(mild) < csf_share(strong)
    assert csf_share(strong) > 2.0 * csf_share(plain)
    for study in (mild, strong):
        assert study.adc.spacing_mm == plain.adc.spacing_mm and study.adc_unit == plain.adc_unit
        assert study.params["b_value"] == plain.params["b_value"]
        for key in ("kind", "territories", "signal"):  # drawn; its measured volume follows the tissue
            assert study.params["lesion"][key] == plain.params["lesion"][key], key
    assert strong.params["csf_expansion"] == 3.0 and "csf_expansion" not in plain.params
    with pytest.raises(ValueError, match="csf_expansion"):
        generate(23, csf_expansion=(-1.0, 1.0))


@pytest.mark.needs_atlas
def test_whole_territory_infarct_is_large_bright_and_made_skull_on():
    study = generate(25, **{**SMALL, "coverage_mm": (175.0, 175.0)}, slice_thickness_mm=5.0, skull_stripped=False,
                     lesion_kind="territorial", lesion_volume_ml=(100.0, 300.0), massive_infarct_probability=1.0)
    lesion = study.params["lesion"]
    assert lesion["massive"] and len(lesion["territories"]) >= 3
    assert 80.0 <= lesion["volume_ml"] <= 300.0 * 1.2
    assert lesion["volume_ml"] == pytest.approx(study.mask.array.sum() * study.mask.voxel_volume_mm3 / 1000)
    assert not study.params["skull_stripped"] and (study.dwi.array[study.tissue.array == 0] > 0).any()  # scalp signal
    mask = study.mask.array > 0
    normal = (study.tissue.array >= 2) & ~mask
    assert np.median(study.dwi.array[mask]) / np.median(study.dwi.array[normal]) > 1.8
    adc = canonical_adc(study)
    assert 0.5 < np.median(adc[mask]) < 1.0  # largely pseudo-normalised, in 1e-3 mm^2/s


@pytest.mark.needs_atlas
def test_lesymap_shapes_are_real_mirrored_and_exact_in_volume():
    sides = set()
    for seed in (26, 27, 28):
        study = generate(seed, **SMALL, slice_thickness_mm=3.0, skull_stripped=True, lesion_kind="lesymap",
                         lesion_volume_ml=(3.0, 30.0))
        lesion = study.params["lesion"]
        assert lesion["kind"] == "lesymap" and lesion["lesymap"]["subject"].startswith("Subject_")
        assert 3.0 * 0.7 <= lesion["template_volume_ml"] <= 30.0 * 1.01
        mask = study.mask.array > 0
        assert lesion["volume_ml"] == pytest.approx(mask.sum() * study.mask.voxel_volume_mm3 / 1000)
        if mask.any():
            assert np.all(study.tissue.array[mask] >= 1) and np.mean(study.tissue.array[mask] >= 2) > 0.8
        sides.add(lesion["lesymap"]["side"])
    assert sides <= {"left", "right"}


def test_missing_lesymap_is_a_clear_error(monkeypatch, tmp_path):
    from LambdaSegmentLib.synthesis.template import atlas_path

    if not atlas_path().exists():
        pytest.skip(f"arterial-territory atlas not present at {atlas_path()}")
    monkeypatch.setenv(LESYMAP_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(BadInputError, match="nowhere"):
        generate(0, **SMALL, lesion_kind="lesymap")


def test_probabilities_are_checked():
    with pytest.raises(ValueError, match="lesymap_probability"):
        generate(0, lesymap_probability=1.5)


def test_skull_base_sites_are_checked():
    from LambdaSegmentLib.synthesis.template import skull_base_region

    with pytest.raises(ValueError, match="skull-base site"):
        skull_base_region(("temporal", "nasal"))


@pytest.mark.needs_atlas
def test_faint_lesions_are_dimmer_keep_a_restricted_core_and_are_off_by_default():
    options = dict(**SMALL, slice_thickness_mm=2.0, skull_stripped=True, lesion_kind="embolic", lesion_volume_ml=(3.0, 6.0))
    plain = generate(29, **options)
    assert plain.params["lesion"]["faint"] is False
    # the default draws nothing more: the same study as with the option named at 0
    zero = generate(29, **options, faint_lesion_probability=0.0)
    assert np.array_equal(plain.dwi.array, zero.dwi.array) and np.array_equal(plain.mask.array, zero.mask.array)
    faint = generate(29, **options, faint_lesion_probability=1.0)
    again = generate(29, **options, faint_lesion_probability=1.0)
    assert faint.params["lesion"]["faint"] is True
    assert np.array_equal(faint.dwi.array, again.dwi.array) and np.array_equal(faint.adc.array, again.adc.array)
    signal = faint.params["lesion"]["signal"]
    assert 1.25 <= signal["core_dwi_ratio"] <= 1.7 and 1.1 <= signal["edge_dwi_ratio"] <= signal["core_dwi_ratio"]
    assert 0.55 <= signal["relative_adc"] <= 0.85 and 0.3 <= signal["grade_reach"] <= 0.8

    def contrast(study):  # lesion DWI / normal parenchyma DWI, and the same for ADC
        mask = study.mask.array > 0
        normal = (study.tissue.array >= 2) & ~mask
        adc = canonical_adc(study)
        return (np.median(study.dwi.array[mask]) / np.median(study.dwi.array[normal]),
                np.median(adc[mask]) / np.median(adc[normal]))

    assert faint.mask.array.sum() > 0
    (faint_dwi, faint_adc), (plain_dwi, plain_adc) = contrast(faint), contrast(plain)
    assert faint_dwi < plain_dwi and faint_dwi < 1.7
    assert faint_adc < 0.95  # restricted: ADC below the parenchyma's


def test_faint_ranges_are_checked():
    with pytest.raises(ValueError, match="faint_lesion_probability"):
        generate(1, faint_lesion_probability=1.5)
    with pytest.raises(ValueError, match="faint_core_dwi_ratio"):
        generate(1, faint_core_dwi_ratio=(0.5, 1.2))


@pytest.mark.needs_atlas
def test_skull_on_dura_false_leaves_only_the_shell_out_of_skull_on_studies():
    """``skull_on_dura=False``: a skull-on study loses the bright dura shell outside its brain and
    nothing else (the shell is drawn all the same: noise, lesion and anatomy are the same draws);
    a skull-stripped study is unchanged."""
    seed = next(s for s in range(40, 80) if generate(s, **SMALL, skull_stripped=False).params["dura"])
    on, off = generate(seed, **SMALL, skull_stripped=False), generate(seed, **SMALL, skull_stripped=False, skull_on_dura=False)
    changed = ~np.isclose(on.dwi.array, off.dwi.array, rtol=1e-5, atol=1e-6)
    deep = ndimage.binary_erosion(on.tissue.array >= 2, iterations=2)  # partial-volume edge voxels left out
    assert changed.any() and not changed[deep].any()  # only outside the brain and on its edge
    assert (on.dwi.array[changed] > off.dwi.array[changed]).mean() > 0.9  # the shell is what brightened them
    assert np.array_equal(on.mask.array, off.mask.array) and on.params["lesion"] == off.params["lesion"]
    assert on.params["dura"] and not off.params["dura"]
    stripped = [generate(seed, **SMALL, skull_stripped=True, skull_on_dura=flag) for flag in (True, False)]
    assert np.array_equal(stripped[0].dwi.array, stripped[1].dwi.array)
    with pytest.raises(ValueError, match="skull_on_dura"):
        generate(seed, skull_on_dura="no")


@pytest.mark.needs_atlas
def test_skull_on_dura_probability_keeps_the_shell_in_part_of_the_skull_on_studies():
    """``skull_on_dura=p``: each skull-on study that draws a shell keeps it with probability p, by a
    draw of its own, so the study is exactly its ``True`` or its ``False`` version (every other draw
    unchanged) and the same seed gives the same study; 0 and 1 are ``False`` and ``True``."""
    shelled = [s for s in range(40, 50) if generate(s, **SMALL, skull_stripped=False, skull_on_dura=1.0).params["dura"]]
    half = {s: generate(s, **SMALL, skull_stripped=False, skull_on_dura=0.5) for s in shelled}
    kept = [s for s in shelled if half[s].params["dura"]]
    left = [s for s in shelled if not half[s].params["dura"]]
    assert kept and left  # both outcomes among the studies that draw a shell
    for seed, flag in ((kept[0], True), (left[0], False)):
        reference = generate(seed, **SMALL, skull_stripped=False, skull_on_dura=flag)
        assert np.array_equal(half[seed].dwi.array, reference.dwi.array)
        assert np.array_equal(half[seed].adc.array, reference.adc.array)
        assert np.array_equal(half[seed].mask.array, reference.mask.array)
    again = generate(left[0], **SMALL, skull_stripped=False, skull_on_dura=0.5)
    assert np.array_equal(again.dwi.array, half[left[0]].dwi.array)  # deterministic per seed
    assert np.array_equal(generate(left[0], **SMALL, skull_stripped=False, skull_on_dura=0.0).dwi.array,
                          generate(left[0], **SMALL, skull_stripped=False, skull_on_dura=False).dwi.array)
    for bad in (1.5, -0.1, "half", None):
        with pytest.raises(ValueError, match="skull_on_dura"):
            generate(left[0], skull_on_dura=bad)


@pytest.mark.needs_atlas
def test_template_scale_sets_the_subjects_size_and_keeps_every_other_draw():
    """``template_scale`` (template mm per subject mm): a fixed scale s gives a brain s³ times
    smaller in volume than at 1, with the same lesion kind and signal draws; the pose's drawn size
    is recorded; the default range is the old one (0.9-1.1)."""
    fixed = {**SMALL, "skull_stripped": True, "slice_thickness_mm": 2.0}
    unit, small = generate(5, **fixed, template_scale=1.0), generate(5, **fixed, template_scale=1.2)
    voxel_ml = unit.dwi.voxel_volume_mm3 / 1000.0
    brain_ml = [float((study.tissue.array > 0).sum()) * voxel_ml for study in (unit, small)]
    # the 3 % anisotropy is drawn per axis on top, and the mask's edge is voxelised: a few per cent
    assert brain_ml[1] / brain_ml[0] == pytest.approx(1.2**-3, rel=0.08)
    assert unit.params["lesion"]["kind"] == small.params["lesion"]["kind"]
    assert unit.params["lesion"]["signal"] == small.params["lesion"]["signal"]
    assert small.params["template_scale"] == pytest.approx(1.2, rel=0.05)
    assert 0.9 * 0.96 <= generate(5, **fixed).params["template_scale"] <= 1.1 * 1.04
    with pytest.raises(ValueError, match="template_scale"):
        generate(5, template_scale=(1.2, 0.9))
