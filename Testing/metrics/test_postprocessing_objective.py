"""``benchmarks/real_scan_cv.py``'s post-processing objectives: issue 13's targets as one score
(``targets_score``) and the search choosing differently under it than under volume Dice alone;
``--validation-synthesis``, the generator options of the search's synthetic validation studies."""

from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from LambdaSegmentLib.inference.postprocess import PostProcessing


@pytest.fixture(scope="module")
def cv(load_script):
    return load_script("benchmarks/real_scan_cv.py")


def lesion(shape: tuple[int, int, int], *boxes: tuple[slice, slice, slice]) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    for box in boxes:
        mask[box] = True
    return mask


def test_the_targets_score_is_dice_and_f1_less_false_positives_beyond_one_ml(cv) -> None:
    truth = lesion((4, 8, 8), np.s_[1, 2:4, 2:4])
    assert cv.targets_score(truth, truth, 1.0) == 1.0
    with_spot = truth.copy()
    with_spot[3, 6, 6] = True  # Dice 8/9, F1 1 / (1 + 1/2)
    assert cv.targets_score(with_spot, truth, 1.0) == pytest.approx(0.5 * (8 / 9 + 2 / 3))
    # the same spot at 2,000 mm³ per voxel is 2 mL of false positives: 1 mL beyond the target
    assert cv.targets_score(with_spot, truth, 2000.0) == pytest.approx(0.5 * (8 / 9 + 2 / 3) - 0.1)
    assert cv.targets_score(np.zeros_like(truth), truth, 1.0) == 0.0


class Stand:
    """What ``choose`` reads of a prepared study: its truth, voxel volume and thresholded mask."""

    def __init__(self, probability: np.ndarray, truth: np.ndarray) -> None:
        self.probability, self.truth = probability, truth
        self.study = SimpleNamespace(dwi=SimpleNamespace(voxel_volume_mm3=1.0))

    def mask(self, settings: PostProcessing) -> np.ndarray:
        return self.probability >= settings.threshold


def test_the_targets_objective_trades_a_faint_lesion_for_ten_false_spots(cv) -> None:
    """A bright 1 mL lesion, a faint 1 mL lesion and ten faint 0.05 mL spots: threshold 0.3 keeps
    the faint lesion and the spots (Dice 0.89, F1 0.29), 0.4 neither (Dice 0.67, F1 0.67).
    Volume Dice prefers 0.3; the targets prefer 0.4."""
    shape = (20, 40, 40)
    bright = lesion(shape, np.s_[2:12, 2:12, 2:12])
    faint = lesion(shape, np.s_[2:12, 20:30, 2:12])
    spots = lesion(shape, *[np.s_[14:16, 2 + 7 * n : 7 + 7 * n, i : i + 5] for n in range(5) for i in (20, 30)])
    probability = np.where(bright, 0.8, np.where(faint | spots, 0.35, 0.0)).astype(np.float32)
    case = Stand(probability, bright | faint)
    by_dice, _ = cv.choose([case], [], ("threshold",), "dice")
    by_targets, value = cv.choose([case], [], ("threshold",), "targets")
    assert by_dice.threshold == 0.3
    assert by_targets.threshold == 0.4
    assert value == pytest.approx(2 / 3)


def test_the_search_on_synthetic_studies_alone_ignores_the_real_case(cv) -> None:
    """``--search-data synthetic``: with no fold case the synthetic validation alone decides.
    The real case wants threshold 0.7 (its lesion at 0.8, as many false voxels at 0.6: Dice 2/3
    below 0.6); the synthetic study slightly prefers 0.3 (a 64-voxel lesion at 0.8 and an 8-voxel
    one at 0.35: Dice 1 at 0.3, 16/17 at 0.7). Together 0.7 wins; alone the synthetic study
    chooses 0.3."""
    shape = (10, 20, 20)
    real_truth = lesion(shape, np.s_[2:6, 2:8, 2:8])
    real = Stand(np.where(real_truth, 0.8, np.where(lesion(shape, np.s_[2:6, 12:18, 2:8]), 0.6, 0.0)).astype(np.float32), real_truth)
    large, small = lesion(shape, np.s_[2:6, 2:6, 2:6]), lesion(shape, np.s_[7:9, 12:14, 12:14])
    synthetic = Stand(np.where(large, 0.8, np.where(small, 0.35, 0.0)).astype(np.float32), large | small)
    with_case, _ = cv.choose([real], [synthetic], ("threshold",), "dice")
    alone, value = cv.choose([], [synthetic], ("threshold",), "dice")
    assert with_case.threshold == 0.7
    assert alone.threshold == 0.3 and value == pytest.approx(1.0)


def test_validation_synthesis_reaches_the_search_studies_only(cv, monkeypatch) -> None:
    calls: list[tuple[int, dict]] = []
    monkeypatch.setattr(cv, "synthetic", lambda seed, **ranges: calls.append((seed, ranges)) or (None, None))
    options = cv.validation_synthesis('{"susceptibility_mirror_offset_mm": [2, 5], "susceptibility_side_gain": [0.6, 0.9]}')
    assert len(cv.validation_studies(options)) == len(cv.SYNTHETIC_VALIDATION_SEEDS)
    assert [seed for seed, _ in calls] == list(cv.SYNTHETIC_VALIDATION_SEEDS)
    assert all(ranges == {**options, "skull_stripped": True} for _, ranges in calls)
    calls.clear()
    cv.validation_studies(cv.validation_synthesis("{}"))
    assert all(ranges == {"skull_stripped": True} for _, ranges in calls)  # the protocol's studies as before
    assert cv.validation_description({}) == "synthetic seeds 32000000-32000011"
    assert cv.validation_description(options) == ('synthetic seeds 32000000-32000011 with {"susceptibility_mirror_offset_mm": '
                                                  '[2, 5], "susceptibility_side_gain": [0.6, 0.9]}')


def test_validation_large_adds_skull_stripped_whole_territory_studies_after_the_others(cv, monkeypatch) -> None:
    """Rule 83: ``--validation-large N`` puts N whole-territory infarcts into the search's
    validation, on their own seeds, so that a step that loses them is seen by the search."""
    calls: list[tuple[int, dict]] = []
    monkeypatch.setattr(cv, "synthetic", lambda seed, **ranges: calls.append((seed, ranges)) or (None, None))
    options = {"susceptibility_side_gain": [0.6, 0.9]}
    studies = cv.validation_studies(options, large=3)
    assert [name for name, _, _ in studies] == ([f"synth-{seed}" for seed in cv.SYNTHETIC_VALIDATION_SEEDS]
                                                 + ["synth-large-32100000", "synth-large-32100001", "synth-large-32100002"])
    assert all(ranges == {**options, **cv.SYNTHETIC_LARGE_RANGES, "skull_stripped": True} for _, ranges in calls[-3:])
    assert not set(cv.large_validation_seeds(3)) & set(cv.SYNTHETIC_LARGE_SEEDS)  # never the scoring studies
    assert cv.validation_description({}, 3) == ("synthetic seeds 32000000-32000011 + 3 whole-territory (100-300 mL) "
                                                "seeds 32100000-32100002")


def test_validation_embolic_adds_skull_stripped_embolic_showers_after_the_large_ones(cv, monkeypatch) -> None:
    """Rule 141: ``--validation-embolic N`` puts N embolic showers into the search's validation,
    after the whole-territory infarcts, on seeds of their own that no other group uses."""
    calls: list[tuple[int, dict]] = []
    monkeypatch.setattr(cv, "synthetic", lambda seed, **ranges: calls.append((seed, ranges)) or (None, None))
    options = {"susceptibility_side_gain": [0.6, 0.9]}
    names = [name for name, _, _ in cv.validation_studies(options, large=1, embolic=2)]
    assert names[-3:] == ["synth-large-32100000", "synth-embolic-32200000", "synth-embolic-32200001"]
    assert all(ranges == {**options, "lesion_kind": "embolic", "lesion_volume_ml": (2.0, 10.0), "skull_stripped": True}
               for _, ranges in calls[-2:])
    others = set(cv.SYNTHETIC_VALIDATION_SEEDS) | set(cv.large_validation_seeds(100)) | set(cv.SYNTHETIC_TEST_SEEDS)
    assert not set(cv.embolic_validation_seeds(100)) & (others | set(cv.SYNTHETIC_LARGE_SEEDS))
    assert cv.validation_description({}, 1, 2) == ("synthetic seeds 32000000-32000011 + 1 whole-territory (100-300 mL) "
                                                   "seeds 32100000-32100000 + 2 embolic (2-10 mL) seeds 32200000-32200001")
    assert len(cv.validation_studies({}, embolic=0)) == len(cv.SYNTHETIC_VALIDATION_SEEDS)


def test_an_embolic_validation_study_is_a_skull_stripped_shower_of_small_lesions(cv) -> None:
    """The first embolic validation study, made for real: skull-stripped, several small lesions."""
    from LambdaSegmentLib.metrics import label_lesions

    ((_, study, truth),) = cv.validation_studies({}, embolic=1)[-1:]
    _, count = label_lesions(truth)
    volume_ml = truth.sum() * study.dwi.voxel_volume_mm3 / 1000
    assert count >= 2 and 0.5 <= volume_ml <= 12.0
    assert (study.dwi.array == 0).mean() > 0.3  # skull-stripped: nothing outside the brain


def test_the_search_keeps_the_bilateral_partner_fraction_wherever_the_step_is_on(cv) -> None:
    settings = cv.candidate_settings(("threshold", "bilateral"), (0.5,), bilateral_fractions=(0.5,))
    assert [(s.bilateral_partner_mm, s.bilateral_partner_fraction) for s in settings] == [(None, 0.0), (4.0, 0.5)]
    fixed = cv.candidate_settings(("threshold",), (0.5,), bilateral_mm=4.0, bilateral_fractions=(0.5,))
    assert [(s.bilateral_partner_mm, s.bilateral_partner_fraction) for s in fixed] == [(4.0, 0.5)]
    # several: one setting each, in the order given (the first wins a tie), the step off first
    searched = cv.candidate_settings(("threshold", "bilateral"), (0.5,), bilateral_fractions=(0.5, 0.25, 0.1))
    assert [(s.bilateral_partner_mm, s.bilateral_partner_fraction) for s in searched] == [
        (None, 0.0), (4.0, 0.5), (4.0, 0.25), (4.0, 0.1)]
    with pytest.raises(argparse.ArgumentTypeError, match="finite share"):
        cv.partner_fraction("-1")


def test_the_search_tries_the_edge_exception_only_with_an_edge_depth(cv) -> None:
    """Rule 93: ``edge_keep`` adds the ratios at which a shallow lesion is kept, off first, and
    only to settings whose edge check is on."""
    settings = cv.candidate_settings(("threshold", "edge", "edge_keep"), (0.5,))
    pairs = [(s.min_edge_depth_mm, s.edge_keep_ratio) for s in settings]
    assert pairs[0] == (None, None) and (None, 1.3) not in pairs
    assert [k for e, k in pairs if e == 6.0] == [None, 1.3, 1.5, 2.0]
    assert len(pairs) == 1 + 3 * 4
    assert all(s.edge_keep_ratio is None for s in cv.candidate_settings(("threshold", "edge"), (0.5,)))


@pytest.mark.parametrize("text, match", [
    ("{bad", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"susceptibility_mirror_offset": [2, 5]}', "unknown synthesis option"),
    ('{"susceptibility_side_gain": [0.5, 3]}', "susceptibility_side_gain must be"),
    ('{"skull_stripped": false}', "fixed by the protocol"),
])
def test_a_bad_validation_synthesis_is_refused_before_any_work(cv, monkeypatch, capsys, tmp_path, text, match) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=match):
        cv.validation_synthesis(text)
    # on the command line: argparse's usage error (exit 2), before the data check and any study
    monkeypatch.setattr(cv, "ISLES", tmp_path / "absent")
    monkeypatch.setattr(sys, "argv", ["real_scan_cv.py", "--label", "x", "--validation-synthesis", text])
    with pytest.raises(SystemExit) as stopped:
        cv.main()
    assert stopped.value.code == 2
    assert "--validation-synthesis" in capsys.readouterr().err


def test_the_threshold_grid_is_the_one_given(cv) -> None:
    assert [s.threshold for s in cv.candidate_settings(("threshold",))] == list(cv.GRID["threshold"])
    assert [s.threshold for s in cv.candidate_settings(("threshold",), (0.1, 0.2, 0.3))] == [0.1, 0.2, 0.3]
    # a threshold that is not searched stays at 0.5, whatever values were given
    assert {s.threshold for s in cv.candidate_settings(("edge",), (0.1, 0.2))} == {0.5}


def test_the_margin_step_is_searched_from_off_and_named_in_the_ablation_table(cv, load_script) -> None:
    """Rule 109's grid, off first so that a tie keeps it off; a search without the step never sets it."""
    assert [s.margin_dwi_ratio for s in cv.candidate_settings(("margin",))] == [None, 1.3, 1.4, 1.5, 1.7]
    assert all(s.margin_dwi_ratio is None for s in cv.candidate_settings(("threshold", "edge", "contralateral")))
    table = load_script("benchmarks/real_scan_cv_table.py")
    assert table.settings(PostProcessing(threshold=0.5, margin_dwi_ratio=1.4).as_dict()) == "t 0.5, margin ≥ 1.4 × DWI"


def test_the_margin_share_is_searched_over_the_fixed_floor_unless_the_margin_is_searched_too(cv) -> None:
    """Rule 110's grid: off, then c = 0.2-0.5 over the floor 1.2; with the margin step searched as
    well, every share over every margin ratio and no share without one."""
    alone = [(s.margin_dwi_ratio, s.margin_lesion_fraction) for s in cv.candidate_settings(("margin_fraction",))]
    assert alone == [(None, None), (1.2, 0.2), (1.2, 0.3), (1.2, 0.4), (1.2, 0.5)]
    both = {(s.margin_dwi_ratio, s.margin_lesion_fraction) for s in cv.candidate_settings(("margin", "margin_fraction"))}
    assert len(both) == 1 + 4 * 5 and (None, None) in both and all(m is not None for m, q in both if q is not None)


def test_the_margin_s_mirror_check_is_on_exactly_where_the_margin_is(cv) -> None:
    """Rule 111: with the step searched, the check rides with every margin and never alone, so the
    search cannot choose the margin without it; unsearched, it is never set."""
    settings = cv.candidate_settings(("margin_fraction", "margin_mirror"))
    assert [(s.margin_lesion_fraction, s.margin_mirror_ratio) for s in settings] == [
        (None, None), (0.2, 1.2), (0.3, 1.2), (0.4, 1.2), (0.5, 1.2)]
    assert all(s.margin_mirror_ratio is None for s in cv.candidate_settings(("margin_fraction",)))


def test_the_satellite_exemption_is_searched_only_beside_a_check_it_lifts(cv, load_script) -> None:
    """Rule 132's grid: off, 10 and 20 mm wherever the edge or contralateral check is on, and
    off alone where neither is; unsearched, it is never set."""
    settings = cv.candidate_settings(("threshold", "edge", "contralateral", "satellite"))
    plain = cv.candidate_settings(("threshold", "edge", "contralateral"))
    with_checks = [s for s in plain if s.min_edge_depth_mm is not None or s.contralateral_ratio is not None]
    assert len(settings) == len(plain) + 2 * len(with_checks)
    assert {s.satellite_mm for s in settings} == {None, 10.0, 20.0}
    assert all(s.min_edge_depth_mm is not None or s.contralateral_ratio is not None
               for s in settings if s.satellite_mm is not None)
    assert all(s.satellite_mm is None for s in plain)
    table = load_script("benchmarks/real_scan_cv_table.py")
    assert table.settings(PostProcessing(min_edge_depth_mm=6.0, satellite_mm=10.0).as_dict()) == (
        "t 0.5, depth ≥ 6 mm, satellites kept within 10 mm")


def test_a_fixed_satellite_distance_rides_with_every_setting_that_has_a_check_to_lift(cv) -> None:
    """Rule 133: --satellite-mm fixes the exemption on; the search's settings are the plain ones,
    with the distance wherever the edge or contralateral check is on and nowhere else."""
    plain = cv.candidate_settings(("threshold", "edge", "contralateral"), bilateral_mm=4.0)
    fixed = cv.candidate_settings(("threshold", "edge", "contralateral"), bilateral_mm=4.0, satellite_mm=20.0)
    assert len(fixed) == len(plain)
    for a, b in zip(plain, fixed):
        lifts = a.min_edge_depth_mm is not None or a.contralateral_ratio is not None
        assert b.satellite_mm == (20.0 if lifts else None)
        assert b.as_dict() | {"satellite_mm": None} == a.as_dict()
    with pytest.raises(ValueError, match="either fixed .* or searched"):
        cv.candidate_settings(("threshold", "edge", "satellite"), satellite_mm=20.0)


def test_an_edge_only_exemption_rides_only_where_the_edge_check_is_on(cv) -> None:
    """Rule 134: with --satellite-edge-only the fixed exemption is set, edge-only, exactly where the
    edge check is on; a setting with the contralateral check alone gets none."""
    plain = cv.candidate_settings(("threshold", "edge", "contralateral"), bilateral_mm=4.0)
    fixed = cv.candidate_settings(("threshold", "edge", "contralateral"), bilateral_mm=4.0, satellite_mm=20.0,
                                  satellite_edge_only=True)
    assert len(fixed) == len(plain)
    for a, b in zip(plain, fixed):
        on = a.min_edge_depth_mm is not None
        assert (b.satellite_mm, b.satellite_edge_only) == ((20.0, True) if on else (None, False))
    with pytest.raises(ValueError, match="needs a fixed satellite_mm"):
        cv.candidate_settings(("threshold", "edge"), satellite_edge_only=True)


def test_a_capped_margin_rides_only_where_the_margin_step_is_on(cv) -> None:
    """Rule 137: with --margin-capped every setting with a margin is capped and none without."""
    steps = ("threshold", "margin_fraction", "margin_mirror")
    plain = cv.candidate_settings(steps, bilateral_mm=4.0)
    capped = cv.candidate_settings(steps, bilateral_mm=4.0, margin_capped=True)
    assert len(capped) == len(plain) and any(a.margin_dwi_ratio is not None for a in plain)
    for a, b in zip(plain, capped):
        assert b.margin_capped == (a.margin_dwi_ratio is not None)
        assert b.as_dict() | {"margin_capped": False} == a.as_dict()
    with pytest.raises(ValueError, match="margin_capped needs the margin step"):
        cv.candidate_settings(("threshold", "edge"), margin_capped=True)


def test_a_fixed_edge_height_rides_only_where_the_edge_check_is_on(cv, load_script) -> None:
    """Rule 145: with --edge-max-height every setting with the edge check confines it to the brain's
    lower part and none without the check carries the height."""
    steps = ("threshold", "edge", "contralateral")
    plain = cv.candidate_settings(steps, bilateral_mm=4.0)
    confined = cv.candidate_settings(steps, bilateral_mm=4.0, edge_max_height=0.5)
    assert len(confined) == len(plain) and any(a.min_edge_depth_mm is None for a in plain)
    for a, b in zip(plain, confined):
        assert b.edge_max_height == (0.5 if a.min_edge_depth_mm is not None else None)
        assert b.as_dict() | {"edge_max_height": None} == a.as_dict()
    with pytest.raises(ValueError, match="edge_max_height needs the edge step"):
        cv.candidate_settings(("threshold", "contralateral"), edge_max_height=0.5)
    table = load_script("benchmarks/real_scan_cv_table.py")
    assert table.settings(PostProcessing(min_edge_depth_mm=6.0, edge_max_height=0.5).as_dict()) == (
        "t 0.5, depth ≥ 6 mm below 0.5 of the brain's height")


def oblique_direction(degrees: float) -> np.ndarray:
    """Columns: the i, j, k axes rotated about LPS x by ``degrees`` (an oblique axial stack)."""
    angle = np.deg2rad(degrees)
    return np.array([[1.0, 0.0, 0.0], [0.0, np.cos(angle), -np.sin(angle)], [0.0, np.sin(angle), np.cos(angle)]])


@pytest.mark.parametrize(("spacing", "direction", "thick"), [
    ((1.8, 1.8, 2.0), np.eye(3), False),  # ISLES'22-like 2 mm axial
    ((1.8, 1.8, 6.0), np.eye(3), True),  # its 6 mm slabs
    ((1.0, 1.0, 4.0), np.eye(3), True),  # a 4 mm clinical stack: the bound itself is thick
    ((1.0, 1.0, 3.9), np.eye(3), False),
    ((1.0, 1.0, 5.0), oblique_direction(20.0), True),  # oblique axial
    ((5.0, 0.9, 0.9), np.array([[0.0, 0.0, -1.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]), True),  # sagittal: slices along i
    ((0.9, 0.9, 5.0), np.diag([-1.0, -1.0, 1.0]), True),  # RAS-stored axial
])
def test_by_thickness_scores_a_study_by_its_own_slice_spacing(cv, spacing, direction, thick) -> None:
    """``--by-thickness``: the thick settings go to a study whose slices are >= 4 mm apart along its
    slice axis, found from its geometry (axial, oblique, sagittal, RAS-stored), never to a thin one;
    without thick settings every study takes the one set."""
    from LambdaSegmentLib.io import Volume

    shape = (12, 24, 24) if spacing[0] < 2 else (24, 24, 12)  # (k, j, i): the slice axis has the fewest voxels
    study = SimpleNamespace(dwi=Volume(np.zeros(shape, np.float32), spacing, direction=direction))
    native, thick_settings = PostProcessing(threshold=0.3), PostProcessing(threshold=0.6)
    assert cv.slice_spacing_mm(study) == max(spacing)
    assert cv.settings_for(study, native, thick_settings) is (thick_settings if thick else native)
    assert cv.settings_for(study, native, None) is native


def test_by_thickness_needs_the_search_on_the_fold_case(cv, monkeypatch, capsys) -> None:
    """``--by-thickness`` is refused, by name, where no fold case is searched or a package is shipped."""
    for extra in (["--search-data", "synthetic"], ["--postprocessing", "package"], ["--ship", "somewhere"]):
        monkeypatch.setattr(sys, "argv", ["real_scan_cv.py", "--by-thickness", *extra])
        with pytest.raises(SystemExit):
            cv.main()
        assert "--by-thickness" in capsys.readouterr().err
