"""The paper's per-slice DSC and pixel-level scores, against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.metrics import PAPER_EPSILON, per_slice_dice, pixel_scores


def empty(shape=(4, 5, 5)) -> np.ndarray:
    return np.zeros(shape, dtype=np.uint8)


def test_empty_prediction_of_an_empty_volume_scores_one_everywhere() -> None:
    assert per_slice_dice(empty(), empty()) == 1.0
    scores = pixel_scores(empty(), empty())
    assert (scores.recall, scores.precision, scores.f1) == (1.0, 1.0, 1.0)


def test_lesion_free_slice_predicted_empty_scores_one_the_paper_quirk() -> None:
    truth, prediction = empty(), empty()
    truth[0, 1:3, 1:3] = 1  # slice 0: 4 lesion pixels
    prediction[0, 1:3, 1:2] = 1  # 2 of them found
    # slice 0: (2*2 + e) / (2 + 4 + e); slices 1-3 lesion-free and predicted empty: 1 each.
    slice0 = (4 + PAPER_EPSILON) / (6 + PAPER_EPSILON)
    assert per_slice_dice(prediction, truth) == pytest.approx((slice0 + 3.0) / 4, abs=1e-12)
    # The volume-level F1 does not get the three free 1s.
    assert pixel_scores(prediction, truth).f1 == pytest.approx(4 / 6)


def test_one_false_positive_pixel_on_a_lesion_free_slice_zeroes_that_slice() -> None:
    truth, prediction = empty(), empty()
    prediction[2, 0, 0] = 1
    expected = (3.0 + PAPER_EPSILON / (1 + PAPER_EPSILON)) / 4
    assert per_slice_dice(prediction, truth) == pytest.approx(expected, abs=1e-12)
    scores = pixel_scores(prediction, truth)
    assert (scores.recall, scores.precision, scores.f1) == (0.0, 0.0, 0.0)
    assert (scores.true_positives, scores.false_positives, scores.false_negatives) == (0, 1, 0)


def test_slice_axis_selects_which_axis_is_averaged() -> None:
    truth, prediction = empty((2, 3, 4)), empty((2, 3, 4))
    truth[:, :, 0] = 1
    prediction[:, :, 0] = 1
    prediction[0, 0, 3] = 1  # one FP on slice w=3 (lesion-free along w) or on slice t=0
    along_w = per_slice_dice(prediction, truth, slice_axis=2)
    along_t = per_slice_dice(prediction, truth, slice_axis=0)
    # Along w: slice 0 perfect (1), slices 1-2 empty (1), slice 3 one FP (≈0).
    assert along_w == pytest.approx((3 + PAPER_EPSILON / (1 + PAPER_EPSILON)) / 4, abs=1e-12)
    # Along t: slice 0 has 3 TP + 1 FP -> (6 + e)/(7 + e); slice 1 perfect.
    assert along_t == pytest.approx(((6 + PAPER_EPSILON) / (7 + PAPER_EPSILON) + 1) / 2, abs=1e-12)


def test_pixel_scores_count_voxels_over_the_whole_volume() -> None:
    truth, prediction = empty(), empty()
    truth[1, 0, 0:4] = 1  # 4 true voxels
    prediction[1, 0, 0:3] = 1  # 3 found
    prediction[3, 4, 4] = 1  # 1 false positive
    scores = pixel_scores(prediction, truth)
    assert scores.recall == pytest.approx(3 / 4)
    assert scores.precision == pytest.approx(3 / 4)
    assert scores.f1 == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))


def test_missing_every_lesion_voxel_scores_zero_recall_and_zero_precision() -> None:
    truth = empty()
    truth[0, 0, 0] = 1
    scores = pixel_scores(empty(), truth)
    assert (scores.recall, scores.precision, scores.f1) == (0.0, 0.0, 0.0)
    assert per_slice_dice(empty(), truth) == pytest.approx((PAPER_EPSILON / (1 + PAPER_EPSILON) + 3) / 4)


def test_mismatched_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="shape"):
        per_slice_dice(empty((2, 2, 2)), empty((2, 2, 3)))
    with pytest.raises(ValueError, match="shape"):
        pixel_scores(empty((2, 2, 2)), empty((2, 2, 3)))
