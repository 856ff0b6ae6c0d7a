"""The paper's metrics, computed exactly as the authors' code does (Ou et al., MICCAI 2021).

- "DSC" is the mean over the slices of one volume of the per-slice Dice
  ``(2|P∩G| + ε) / (|P| + |G| + ε)`` with ε = 1e-4. A lesion-free slice predicted empty
  therefore scores 1, and one with a single false-positive pixel scores ≈ 0 (ε / (1 + ε)).
  This is why the paper's DSC differs from its F1.
- Recall, precision and F1 are pixel-level over the whole volume (so F1 equals the
  volume Dice), and all three are 1 when prediction and truth are both empty.

Both are per volume; the paper then averages them over patients.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torchmetrics.functional.classification import binary_stat_scores

PAPER_EPSILON = 1e-4


def _as_bool_tensor(mask: np.ndarray | torch.Tensor) -> torch.Tensor:
    tensor = mask if isinstance(mask, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(mask))
    return tensor.detach().cpu().bool()


def _check_shapes(prediction: torch.Tensor, truth: torch.Tensor) -> None:
    if prediction.shape != truth.shape:
        raise ValueError(f"prediction shape {tuple(prediction.shape)} differs from truth shape {tuple(truth.shape)}")


def per_slice_dice(
    prediction: np.ndarray | torch.Tensor,
    truth: np.ndarray | torch.Tensor,
    *,
    slice_axis: int = 0,
    epsilon: float = PAPER_EPSILON,
) -> float:
    """The paper's "DSC" of one volume: the mean over slices of the ε-smoothed slice Dice.

    Args:
        prediction, truth: binary masks of the same shape (any nonzero value is lesion),
            e.g. (t, h, w) with ``slice_axis=0``.
        slice_axis: the array axis that indexes slices (for a DWI-grid array (k, j, i)
            this is ``2 - find_slice_axis(volume)``).
        epsilon: the authors' smoothing term, 1e-4.

    Returns:
        mean over slices of ``(2|P∩G| + ε) / (|P| + |G| + ε)``, in [0, 1].
    """
    p, g = _as_bool_tensor(prediction), _as_bool_tensor(truth)
    _check_shapes(p, g)
    p = p.movedim(slice_axis, 0).flatten(1).double()  # (slices, pixels)
    g = g.movedim(slice_axis, 0).flatten(1).double()
    intersection = (p * g).sum(dim=1)
    dice = (2 * intersection + epsilon) / (p.sum(dim=1) + g.sum(dim=1) + epsilon)
    return float(dice.mean())


@dataclass(frozen=True)
class PixelScores:
    """Pixel-level scores of one volume (the paper's Recall, Precision, F1).

    Attributes:
        recall: TP / (TP + FN).
        precision: TP / (TP + FP).
        f1: 2 TP / (2 TP + FP + FN), equal to the volume Dice.
        true_positives, false_positives, false_negatives: voxel counts.
    """

    recall: float
    precision: float
    f1: float
    true_positives: int
    false_positives: int
    false_negatives: int


def pixel_scores(prediction: np.ndarray | torch.Tensor, truth: np.ndarray | torch.Tensor) -> PixelScores:
    """Pixel-level recall, precision and F1 over a whole volume, as the authors computed them.

    All three are 1 when prediction and truth are both empty. When only one is empty the
    undefined ratio (recall with no true lesion, precision with no predicted lesion) is 0,
    as is F1.
    """
    p, g = _as_bool_tensor(prediction), _as_bool_tensor(truth)
    _check_shapes(p, g)
    tp, fp, _tn, fn, _support = (int(v) for v in binary_stat_scores(p.flatten().long(), g.flatten().long()))
    if tp + fp + fn == 0:
        return PixelScores(1.0, 1.0, 1.0, 0, 0, 0)
    recall = tp / (tp + fn) if tp + fn else 0.0
    precision = tp / (tp + fp) if tp + fp else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn)
    return PixelScores(recall, precision, f1, tp, fp, fn)
