"""``benchmarks/real_scan_frontier.py``: issue 13's targets counted over every held-out result file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def frontier(load_script):
    return load_script("benchmarks/real_scan_frontier.py")


RULE = {"volume_dice": 0.4, "lesion_f1": 0.1, "abs_dv_ml": 4.0, "fp_ml": 15.0}


def score(dice: float, f1: float, dv: float, fp: float) -> dict:
    return {"volume_dice": dice, "lesion_f1": f1, "abs_dv_ml": dv, "fp_ml": fp}


def write_result(directory: Path, label: str, a: dict, b: dict, *, trained_on_b: tuple[str, ...] = ("0003",)) -> None:
    """A real_scan_cv.py result: fold A (uses 0001) scored on 0003 with ``a``, fold B on 0001 with ``b``
    (the same score natively and at 6 mm), the ADC rule at :data:`RULE`."""
    folds = {
        "A": {"held_out_case": "0003", "trained_on": ["0001"], "weights_sha256": "a" * 64,
              "scores": {grid: {"model": a, "adc_rule": RULE} for grid in ("native", "6mm")}},
        "B": {"held_out_case": "0001", "trained_on": list(trained_on_b), "weights_sha256": "b" * 64,
              "scores": {grid: {"model": b, "adc_rule": RULE} for grid in ("native", "6mm")}},
    }
    (directory / f"{label}.json").write_text(json.dumps({"label": label, "folds": folds}), encoding="utf-8")


def test_the_pareto_front_keeps_only_undominated_points(frontier) -> None:
    points = [(2.0, 0.5, "far"), (0.5, 0.3, "low"), (1.0, 0.3, "dominated"), (0.5, 0.2, "worse"), (3.0, 0.4, "behind")]
    assert frontier.pareto_front(points) == [(0.5, 0.3, "low"), (2.0, 0.5, "far")]
    assert frontier.pareto_front([(1.0, 0.3, "first"), (1.0, 0.3, "tie")]) == [(1.0, 0.3, "first")]


def test_absolute_targets_include_their_bound_and_the_adc_rule_must_be_beaten(frontier) -> None:
    dice, f1, fp, dice_rule, _f1_rule, dv_rule, _fp_rule = frontier.TARGETS
    assert dice.met(score(0.6, 0, 0, 0), RULE) and not dice.met(score(0.599, 0, 0, 0), RULE)
    assert fp.met(score(0, 0, 0, 1.0), RULE) and not fp.met(score(0, 0, 0, 1.01), RULE)
    assert not dice_rule.met(score(0.4, 0, 0, 0), RULE) and dice_rule.met(score(0.41, 0, 0, 0), RULE)
    assert not dv_rule.met(score(0, 0, 4.0, 0), RULE) and dv_rule.met(score(0, 0, 3.9, 0), RULE)
    assert f1.met(score(0, 0.5, 0, 0), RULE)


def test_configurations_leave_out_a_fold_that_is_not_held_out(frontier, tmp_path) -> None:
    write_result(tmp_path, "held", score(0.9, 0.5, 1.0, 0.5), score(0.45, 0.2, 2.0, 0.1))
    write_result(tmp_path, "leaky", score(0.9, 0.5, 1.0, 0.5), score(0.9, 0.9, 0.0, 0.0), trained_on_b=("0001", "0003"))
    configs, left_out = frontier.configurations(tmp_path)
    assert [c.label for c in configs] == ["held"] and left_out == 1
    # 0003 meets all 7 on both grids; 0001 misses Dice >= 0.6 and F1 >= 0.5 on both
    assert len(configs[0].cells_met()) == 28 - 4


def test_the_report_counts_targets_and_names_the_best(frontier, tmp_path) -> None:
    write_result(tmp_path, "one", score(0.9, 0.55, 1.0, 0.8), score(0.30, 0.2, 2.0, 0.1))
    write_result(tmp_path, "two", score(0.8, 0.40, 1.0, 2.5), score(0.45, 0.3, 2.0, 0.1))
    configs, left_out = frontier.configurations(tmp_path)
    text = frontier.report(configs, left_out, "the command")
    assert "Command (the highlights mark the figure only): `the command`" in text
    assert "**2** of them (0 result files left out" in text
    assert "| 0001 | native | volume Dice >= 0.6 | 0 of 2 | 0.450 (`two`) |" in text
    assert "| 0003 | native | false positives <= 1 mL | 1 of 2 | 0.800 (`one`) |" in text
    assert "Configurations meeting all 28 cells: **0**" in text
    # "one": all 7 on 0003, and on 0001 only FP <= 1 mL and three of the rule's (its Dice 0.30 under 0.4)
    assert "The most cells met by one configuration: **22 of 28**, by 1: `one`" in text
    # both are on the front: "one" has fewer false positives, "two" more of 0001's Dice
    assert "| 0.80 | 0.300 |" in text and "| 2.50 | 0.450 |" in text


def test_the_command_writes_the_table_and_the_figure_and_refuses_an_unknown_highlight(frontier, tmp_path, monkeypatch) -> None:
    results = tmp_path / "results"
    results.mkdir()
    write_result(results, "one", score(0.9, 0.55, 1.0, 0.8), score(0.30, 0.2, 2.0, 0.1))
    monkeypatch.setattr(frontier, "RESULTS", results)
    monkeypatch.setattr("sys.argv", ["real_scan_frontier.py", "--output", str(tmp_path / "out" / "frontier"), "--highlight", "one"])
    frontier.main()
    assert (tmp_path / "out" / "frontier.md").read_text(encoding="utf-8").startswith("# Issue 13's targets")
    assert (tmp_path / "out" / "frontier.png").stat().st_size > 0
    monkeypatch.setattr("sys.argv", ["real_scan_frontier.py", "--output", str(tmp_path / "x"), "--highlight", "nope"])
    with pytest.raises(SystemExit, match="no held-out configuration labelled nope"):
        frontier.main()
    assert not (tmp_path / "x.md").exists()
