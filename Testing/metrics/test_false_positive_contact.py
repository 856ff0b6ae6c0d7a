"""Issue 13's rule 79: false positives on the reference lesions' border apart from detached marks
(``metrics.regions.false_positive_ml_by_contact``), as ``benchmarks/real_scan_cv.py`` scores them
and ``benchmarks/real_scan_cv_table.py --means`` reports them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from LambdaSegmentLib.metrics.isles import lesion_detection
from LambdaSegmentLib.metrics.regions import false_positive_ml_by_contact


def scene() -> tuple[np.ndarray, np.ndarray]:
    """A 2x2x2 reference lesion; the prediction finds it with a one-voxel-wide border on one side,
    a spur and a spot joined to the found lesion only through a corner (26-connected, so border),
    and two spots apart (detached)."""
    truth = np.zeros((6, 12, 12), bool)
    truth[2:4, 4:6, 4:6] = True
    prediction = truth.copy()
    prediction[2:4, 4:6, 6] = True  # border: 4 voxels next to the lesion
    prediction[4, 6, 7] = True  # spur: corner-joined to the border voxel (3, 5, 6)
    prediction[0, 10, 10] = True  # detached spot
    prediction[1, 1, 1] = True  # detached spot
    prediction[1, 3, 3] = True  # border: joined to the lesion's corner voxel (2, 4, 4) only
    return prediction, truth


def test_border_and_detached_false_positives_add_up_and_follow_26_connectivity() -> None:
    prediction, truth = scene()
    split = false_positive_ml_by_contact(prediction, truth, voxel_volume_mm3=1000.0)
    assert split == {"fp_border_ml": 6.0, "fp_detached_ml": 2.0}
    assert sum(split.values()) == np.count_nonzero(prediction & ~truth)  # the false-positive mL
    # detached = lesion-wise F1's false detections (one voxel each here)
    assert split["fp_detached_ml"] == lesion_detection(prediction, truth).false_positives


def test_a_mark_beside_a_lesion_it_does_not_reach_is_detached() -> None:
    truth = np.zeros((4, 10, 10), bool)
    truth[1:3, 2:4, 2:4] = True
    prediction = np.zeros_like(truth)
    prediction[1:3, 2:4, 5:7] = True  # one empty column away: no reference voxel in its component
    assert false_positive_ml_by_contact(prediction, truth, voxel_volume_mm3=8.0) == {"fp_border_ml": 0.0, "fp_detached_ml": 8 * 8.0 / 1000}
    assert false_positive_ml_by_contact(np.zeros_like(truth), truth, voxel_volume_mm3=8.0) == {"fp_border_ml": 0.0, "fp_detached_ml": 0.0}


@pytest.fixture(scope="module")
def cv(load_script):
    return load_script("benchmarks/real_scan_cv.py")


@pytest.fixture(scope="module")
def table(load_script):
    return load_script("benchmarks/real_scan_cv_table.py")


def test_the_cross_validation_scores_carry_the_split(cv) -> None:
    prediction, truth = scene()
    prepared = SimpleNamespace(truth=truth, study=SimpleNamespace(dwi=SimpleNamespace(voxel_volume_mm3=2000.0)), posterior_fossa=None)
    row = cv.score(prepared, prediction)
    assert row["fp_ml"] == pytest.approx(16.0)
    assert (row["fp_border_ml"], row["fp_detached_ml"]) == (pytest.approx(12.0), pytest.approx(4.0))


def result_file(directory, label: str, detached: float | None) -> None:  # noqa: ANN001
    model = {"volume_dice": 0.5, "lesion_f1": 0.25, "fp_ml": 1.0}
    if detached is not None:
        model["fp_detached_ml"] = detached
    folds = {fold: {"scores": {grid: {"model": model} for grid in ("native", "6mm")}} for fold in ("A", "B")}
    (directory / f"{label}.json").write_text(json.dumps({"folds": folds}), encoding="utf-8")


def test_the_means_report_detached_false_positives_only_where_every_file_has_them(table, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(table, "RESULTS", tmp_path)
    result_file(tmp_path, "new1", 0.25)
    result_file(tmp_path, "new2", 0.75)
    result_file(tmp_path, "old", None)
    both_new = table.held_out_means(["new1", "new2"]).splitlines()
    assert both_new[0].startswith("new1: 0.5000 / 0.2500 / 1.000 mL (detached 0.250 mL)")
    assert both_new[-1] == "mean over 2: 0.5000 / 0.2500 / 1.000 mL (detached 0.500 mL)"
    mixed = table.held_out_means(["new1", "old"]).splitlines()
    assert mixed[1].startswith("old: 0.5000 / 0.2500 / 1.000 mL;")
    assert mixed[-1] == "mean over 2: 0.5000 / 0.2500 / 1.000 mL"


def test_rule_26_branches_against_r_double_prime(table) -> None:
    reference = (0.522, 0.2325, 1.705)  # R″, as the card's rules 74-98 read it
    assert table.rule26((0.532, 0.20, 2.205), reference) == ["1"]  # both bounds met exactly
    assert table.rule26((0.5246, 0.3012, 0.983), reference) == ["2"]  # rule 96's six quota runs
    assert table.rule26((0.502, 0.2325, 0.705), reference) == ["3"]
    assert table.rule26((0.4490, 0.3077, 0.505), reference) == []  # rule 91's six: Dice too low for 2 and 3
    assert table.rule26((0.567, 0.330, 2.3), reference) == []  # Dice and F1 high, false positives over + 0.5 mL
    assert table.rule26((0.56, 0.30, 1.0), reference) == ["1", "2"]


def test_the_means_judge_rule_26_and_the_whole_territory_condition(table, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(table, "RESULTS", tmp_path)
    result_file(tmp_path, "row", 0.1)
    data = json.loads((tmp_path / "row.json").read_text(encoding="utf-8"))
    for fold, dice in (("A", 0.81), ("B", 0.9)):
        data["folds"][fold]["synthetic"] = {"summary": {"true_100ml_or_more": {"model_dice": dice}}}
    (tmp_path / "row.json").write_text(json.dumps(data), encoding="utf-8")
    judged = table.held_out_means(["row"], (0.45, 0.2, 1.0)).splitlines()[-1]
    assert judged == "rule 26 against 0.45 / 0.2 / 1 mL: branch 1, 2 passed; every fold's >= 100 mL synthetic >= 0.8: yes"
    data["folds"]["A"]["synthetic"]["summary"]["true_100ml_or_more"]["model_dice"] = 0.79
    (tmp_path / "row.json").write_text(json.dumps(data), encoding="utf-8")
    assert table.held_out_means(["row"], (0.45, 0.2, 1.0)).endswith("every fold's >= 100 mL synthetic >= 0.8: no")
    result_file(tmp_path, "unscored", 0.1)  # no synthetic score: the condition cannot be met
    assert table.held_out_means(["unscored"], (0.6, 0.3, 0.1)).endswith("no branch passed; every fold's >= 100 mL synthetic >= 0.8: no")


def test_the_ranges_table_spans_the_seeds_per_case_and_setting_beside_the_adc_rule(table, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(table, "RESULTS", tmp_path)
    rule = {"volume_dice": 0.1, "lesion_f1": 0.05, "abs_dv_ml": 12.0, "fp_ml": 18.0}
    for label, dice in (("seed1", 0.8), ("seed2", 0.85)):
        folds = {}
        for fold, case in (("A", "0003"), ("B", "0001")):
            scores = {grid: {"model": {"volume_dice": dice if fold == "A" else 0.2, "lesion_f1": 0.3,
                                       "abs_dv_ml": 5.0, "fp_ml": 1.0 if grid == "native" else 0.5},
                             "adc_rule": rule} for grid in ("native", "6mm")}
            folds[fold] = {"held_out_case": case, "scores": scores}
        (tmp_path / f"{label}.json").write_text(json.dumps({"folds": folds}), encoding="utf-8")
    lines = table.held_out_ranges(["seed1", "seed2"]).splitlines()
    assert len(lines) == 2 + 4  # header, rule, fold A native and 6 mm, fold B native and 6 mm
    assert lines[2] == "| 0003 (fold A) | native | 0.800–0.850 | 0.300 | 5.00 | 1.00 | 0.100 / 0.050 / 12.00 / 18.00 |"
    assert lines[3].startswith("|  | 6 mm | 0.800–0.850 | 0.300 | 5.00 | 0.50 |")
    assert lines[4].startswith("| 0001 (fold B) | native | 0.200 |")  # equal at 3 decimals: one value, not a range
