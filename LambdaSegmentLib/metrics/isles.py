"""ISLES'22 challenge metrics: volume Dice, lesion-wise F1, |ΔV| (mL), |Δ lesion count|.

Lesions are 3D connected components with 26-connectivity (faces, edges and corners), as
in the ISLES'22 evaluation. A true lesion is detected when any of its voxels is
predicted; a predicted component is a false positive when none of its voxels is lesion.
Empty-vs-empty scores 1 (Dice and lesion-wise F1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

CONNECTIVITY_26 = np.ones((3, 3, 3), dtype=bool)


def _as_bool(mask: np.ndarray) -> np.ndarray:
    return np.asarray(mask) != 0


def _check(prediction: np.ndarray, truth: np.ndarray) -> None:
    if prediction.shape != truth.shape:
        raise ValueError(f"prediction shape {prediction.shape} differs from truth shape {truth.shape}")
    if prediction.ndim != 3:
        raise ValueError(f"lesion metrics need 3D masks, got {prediction.ndim}D")


def label_lesions(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """Connected lesions of a 3D mask (26-connectivity): (labels int32, number of lesions)."""
    labels, count = ndimage.label(_as_bool(mask), structure=CONNECTIVITY_26)
    return labels.astype(np.int32, copy=False), int(count)


def volume_dice(prediction: np.ndarray, truth: np.ndarray) -> float:
    """2|P∩G| / (|P| + |G|) over the whole volume; 1 when both are empty."""
    p, g = _as_bool(prediction), _as_bool(truth)
    if p.shape != g.shape:
        raise ValueError(f"prediction shape {p.shape} differs from truth shape {g.shape}")
    total = int(p.sum()) + int(g.sum())
    return 1.0 if total == 0 else 2.0 * int(np.logical_and(p, g).sum()) / total


@dataclass(frozen=True)
class LesionDetection:
    """Lesion-wise detection counts and F1 of one volume.

    Attributes:
        true_positives: true lesions touched by the prediction.
        false_negatives: true lesions not touched at all.
        false_positives: predicted components that touch no true lesion.
        f1: TP / (TP + (FP + FN) / 2); 1 when there is nothing to find and nothing predicted.
        true_count, predicted_count: number of connected lesions in truth and prediction.
    """

    true_positives: int
    false_negatives: int
    false_positives: int
    f1: float
    true_count: int
    predicted_count: int


def lesion_detection(prediction: np.ndarray, truth: np.ndarray) -> LesionDetection:
    """ISLES'22 lesion-wise detection of a 3D prediction against a 3D truth."""
    p, g = _as_bool(prediction), _as_bool(truth)
    _check(p, g)
    truth_labels, true_count = label_lesions(g)
    predicted_labels, predicted_count = label_lesions(p)
    detected = np.unique(truth_labels[p & g])  # true lesions with at least one predicted voxel
    true_positives = int(np.count_nonzero(detected))
    touching = np.unique(predicted_labels[p & g])  # predicted components with a true voxel
    false_positives = predicted_count - int(np.count_nonzero(touching))
    false_negatives = true_count - true_positives
    denominator = true_positives + (false_positives + false_negatives) / 2
    f1 = 1.0 if denominator == 0 else true_positives / denominator
    return LesionDetection(true_positives, false_negatives, false_positives, f1, true_count, predicted_count)


def lesion_wise_f1(prediction: np.ndarray, truth: np.ndarray) -> float:
    """ISLES'22 lesion-wise F1 (see :func:`lesion_detection`)."""
    return lesion_detection(prediction, truth).f1


def absolute_volume_difference_ml(prediction: np.ndarray, truth: np.ndarray, voxel_volume_mm3: float) -> float:
    """| predicted lesion volume − true lesion volume | in mL (voxels × mm³ / 1000)."""
    if not voxel_volume_mm3 > 0:
        raise ValueError(f"voxel volume must be positive, got {voxel_volume_mm3} mm³")
    difference = abs(int(_as_bool(prediction).sum()) - int(_as_bool(truth).sum()))
    return difference * float(voxel_volume_mm3) / 1000.0


def absolute_lesion_count_difference(prediction: np.ndarray, truth: np.ndarray) -> int:
    """| number of predicted connected lesions − number of true ones | (26-connectivity)."""
    p, g = _as_bool(prediction), _as_bool(truth)
    _check(p, g)
    return abs(label_lesions(p)[1] - label_lesions(g)[1])
