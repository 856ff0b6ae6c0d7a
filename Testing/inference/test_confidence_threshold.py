"""``scripts/choose_confidence_threshold.py``: its rule on hand-made validation lesions, and the
manifest it writes (the package still loads with the same weights' SHA-256)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.inference.untrained import save_untrained_package


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("scripts/choose_confidence_threshold.py")


def lesions(values_and_truth: list[tuple[float, bool]]) -> list[dict]:
    return [{"mean_probability": p, "true_positive": t, "volume_ml": 0.1} for p, t in values_and_truth]


def test_the_threshold_flags_the_most_false_positives_in_excess_of_true_ones(script):
    records = lesions([(0.52, False), (0.55, False), (0.58, True), (0.60, False), (0.63, False),
                       (0.70, True), (0.72, False), (0.80, True), (0.90, True), (0.95, True)])
    # below 0.615: 3 false, 1 true (+2); below 0.665: 4 false, 1 true (+3, the best); below 0.71: +2; below 0.76: +3 (tie, higher)
    assert script.choose_threshold(records, 0.5) == pytest.approx(0.665)
    summary = script.summary(records, 0.665)
    assert (summary["flagged"], summary["flagged_false_positive"], summary["flagged_true_positive"]) == (5, 4, 1)


def test_without_a_threshold_that_flags_more_false_than_true_positives_nothing_is_flagged(script):
    assert script.choose_threshold(lesions([(0.6, True), (0.7, False), (0.8, True)]), 0.5) == 0.5
    assert script.choose_threshold([], 0.4) == 0.4
    everything_false = lesions([(0.6, False), (0.9, False)])
    assert script.choose_threshold(everything_false, 0.5) == pytest.approx(0.901)  # all are false positives: flag all


def test_the_threshold_goes_into_the_manifest_and_the_package_still_verifies(script, tmp_path: Path):
    directory = save_untrained_package(tmp_path / "package")
    before = load_model_package(directory)
    assert before.low_confidence_below is None
    script.record_threshold(directory, 0.7766, {"rule": "test", "validation": "none"})
    after = load_model_package(directory)
    assert after.low_confidence_below == 0.7766 and after.sha256 == before.sha256
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["low_confidence_rule"] == {"rule": "test", "validation": "none"}
    assert {k: v for k, v in manifest.items() if not k.startswith("low_confidence")} == before.manifest
