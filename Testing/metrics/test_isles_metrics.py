"""ISLES'22 metrics (volume Dice, lesion-wise F1, |ΔV|, |Δcount|) against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.metrics import (
    absolute_lesion_count_difference,
    absolute_volume_difference_ml,
    lesion_detection,
    lesion_wise_f1,
    score_case,
    volume_dice,
)


def empty() -> np.ndarray:
    return np.zeros((6, 10, 10), dtype=np.uint8)


def two_lesions() -> np.ndarray:
    truth = empty()
    truth[1:3, 1:3, 1:3] = 1  # lesion A: 8 voxels
    truth[4, 7:9, 7:9] = 1  # lesion B: 4 voxels
    return truth


def test_empty_truth_and_empty_prediction_score_perfectly() -> None:
    assert volume_dice(empty(), empty()) == 1.0
    assert lesion_wise_f1(empty(), empty()) == 1.0
    assert absolute_volume_difference_ml(empty(), empty(), 8.0) == 0.0
    assert absolute_lesion_count_difference(empty(), empty()) == 0


def test_one_false_positive_voxel_on_an_empty_truth() -> None:
    prediction = empty()
    prediction[0, 0, 0] = 1
    assert volume_dice(prediction, empty()) == 0.0
    detection = lesion_detection(prediction, empty())
    assert (detection.true_positives, detection.false_positives, detection.false_negatives) == (0, 1, 0)
    assert detection.f1 == 0.0
    assert absolute_volume_difference_ml(prediction, empty(), 8.0) == pytest.approx(0.008)
    assert absolute_lesion_count_difference(prediction, empty()) == 1


def test_two_lesions_with_one_missed() -> None:
    truth = two_lesions()
    prediction = empty()
    prediction[1:3, 1:3, 1:2] = 1  # half of lesion A (4 of its 8 voxels); lesion B missed
    detection = lesion_detection(prediction, truth)
    assert (detection.true_positives, detection.false_negatives, detection.false_positives) == (1, 1, 0)
    assert detection.f1 == pytest.approx(1 / (1 + 0.5))  # TP / (TP + (FP + FN) / 2)
    assert volume_dice(prediction, truth) == pytest.approx(2 * 4 / (4 + 12))
    # 2 mm isotropic: 8 mm³ per voxel, 12 - 4 = 8 voxels -> 0.064 mL.
    assert absolute_volume_difference_ml(prediction, truth, 8.0) == pytest.approx(0.064)
    assert absolute_lesion_count_difference(prediction, truth) == 1


def test_a_prediction_touching_a_lesion_with_one_voxel_detects_it() -> None:
    truth = two_lesions()
    prediction = truth.copy()
    prediction[1:3, 1:3, 1:3] = 0
    prediction[2, 2, 2] = 1  # one voxel of lesion A
    prediction[0, 9, 0] = 1  # an isolated false positive
    detection = lesion_detection(prediction, truth)
    assert (detection.true_positives, detection.false_negatives, detection.false_positives) == (2, 0, 1)
    assert detection.f1 == pytest.approx(2 / (2 + 0.5))


def test_lesions_touching_only_at_a_corner_are_one_lesion_26_connectivity() -> None:
    truth = empty()
    truth[1, 1, 1] = 1
    truth[2, 2, 2] = 1  # diagonal neighbour: same lesion under 26-connectivity
    assert lesion_detection(truth, truth).true_count == 1


def test_score_case_gathers_all_metrics() -> None:
    truth = two_lesions()
    prediction = empty()
    prediction[1:3, 1:3, 1:2] = 1
    scores = score_case(prediction, truth, voxel_volume_mm3=8.0, slice_axis=0)
    assert scores.volume_dice == pytest.approx(0.5)
    assert scores.f1 == pytest.approx(scores.volume_dice)  # the paper's F1 is the volume Dice
    assert scores.recall == pytest.approx(4 / 12)
    assert scores.precision == 1.0
    assert scores.lesion_f1 == pytest.approx(2 / 3)
    assert (scores.true_lesions, scores.predicted_lesions) == (2, 1)
    assert scores.true_volume_ml == pytest.approx(0.096)
    assert scores.predicted_volume_ml == pytest.approx(0.032)
    # Slices 1, 2: (2*2 + e)/(2 + 4 + e) each; slice 4: B missed -> e/(4 + e); slices 0, 3, 5 empty -> 1.
    e = 1e-4
    expected = (2 * (4 + e) / (6 + e) + e / (4 + e) + 3) / 6
    assert scores.dsc == pytest.approx(expected, abs=1e-12)
