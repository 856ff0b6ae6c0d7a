"""Training losses on logits (b, 1, t, h, w) against {0, 1} targets of the same shape."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ..metrics.isles import label_lesions

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def bce_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy with logits over all voxels (the paper's loss)."""
    return F.binary_cross_entropy_with_logits(logits.float(), target.float())


def soft_dice_loss(logits: torch.Tensor, target: torch.Tensor, smooth: float = 1.0) -> torch.Tensor:
    """1 − soft Dice of sigmoid(logits) over the whole batch (global, so lesion-free
    windows do not each count as a perfect or a failed sample)."""
    probability = logits.float().sigmoid()
    target = target.float()
    intersection = (probability * target).sum()
    return 1.0 - (2.0 * intersection + smooth) / (probability.sum() + target.sum() + smooth)


def dice_bce_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """BCE + soft Dice: the Dice term keeps the small lesion class from being drowned out."""
    return bce_loss(logits, target) + soft_dice_loss(logits, target)


def soft_tversky_loss(logits: torch.Tensor, target: torch.Tensor, alpha: float = 0.3, beta: float = 0.7,
                      smooth: float = 1.0) -> torch.Tensor:
    """1 − soft Tversky index of sigmoid(logits) over the whole batch (Salehi et al. 2017).

    TI = (TP + s) / (TP + α FP + β FN + s) with soft counts; α = β = 0.5 is
    :func:`soft_dice_loss` (at half its smoothing). β > α weighs a missed lesion voxel more than a false one, for a
    model that finds a lesion's core and misses its fainter margin and the faint emboli (issue 13).
    """
    probability = logits.float().sigmoid()
    target = target.float()
    true_positive = (probability * target).sum()
    false_positive = (probability * (1.0 - target)).sum()
    false_negative = ((1.0 - probability) * target).sum()
    return 1.0 - (true_positive + smooth) / (true_positive + alpha * false_positive + beta * false_negative + smooth)


def tversky_bce_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """BCE + soft Tversky at α 0.3, β 0.7: :func:`dice_bce_loss` with misses weighed over false marks."""
    return bce_loss(logits, target) + soft_tversky_loss(logits, target)


def lesion_labels(target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each window's connected lesions, numbered across the whole batch.

    Args:
        target: (b, 1, t, h, w) {0, 1}.
    Returns:
        (labels, window): labels int64 (b, t h w) on ``target``'s device, 0 = background and
        1..N = the batch's N lesions (26-connected within a window, the lesion-wise F1's
        lesions); window int64 (N,): the batch index of each lesion.
    """
    masks = target.detach().cpu().numpy()
    labels = np.zeros((masks.shape[0], masks[0].size), dtype=np.int64)
    counts = []
    for i, mask in enumerate(masks):
        window_labels, count = label_lesions(mask[0])
        labels[i] = np.where(window_labels > 0, window_labels + sum(counts), 0).ravel()
        counts.append(count)
    window = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return torch.from_numpy(labels).to(target.device), torch.from_numpy(window).to(target.device)


def blob_loss(logits: torch.Tensor, target: torch.Tensor, smooth: float = 1.0) -> torch.Tensor:
    """Mean over the batch's lesions of (BCE + 1 − soft Dice), each lesion scored alone.

    The blob loss of Kofler et al. (2023, "blob loss: instance imbalance aware loss functions
    for semantic segmentation"): for lesion i, the other lesions of its window are masked
    out and BCE and soft Dice are taken over lesion i and its window's background, so a
    4-voxel embolus weighs as much as a 200 mL infarct. A global loss lets the large one
    drown out the small ones, which are what the lesion-wise F1 counts. All lesions at once
    with per-label sums (no loop over lesions).

    Returns:
        scalar; 0 (with a gradient) for a batch without lesions.
    """
    labels, window = lesion_labels(target)  # (b, n voxels), (N,)
    if window.numel() == 0:
        return logits.sum() * 0.0
    probability = logits.float().sigmoid().flatten(1)
    voxel_bce = F.binary_cross_entropy_with_logits(logits.float(), target.float(), reduction="none").flatten(1)
    background = labels == 0
    # the lesion's window's background, then the lesion's own voxels
    bg_probability = (probability * background).sum(1)[window]
    bg_bce = (voxel_bce * background).sum(1)[window]
    bg_voxels = background.sum(1)[window].float()
    flat, slots = labels.flatten(), window.numel() + 1
    own_probability = probability.new_zeros(slots).index_add(0, flat, probability.flatten())[1:]
    own_bce = voxel_bce.new_zeros(slots).index_add(0, flat, voxel_bce.flatten())[1:]
    own_voxels = torch.bincount(flat, minlength=slots)[1:].float()
    dice = (2.0 * own_probability + smooth) / (bg_probability + own_probability + own_voxels + smooth)
    bce = (bg_bce + own_bce) / (bg_voxels + own_voxels)
    return (bce + 1.0 - dice).mean()


def blob_dice_bce_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """BCE + soft Dice over the batch (:func:`dice_bce_loss`) + :func:`blob_loss`: the global
    terms draw each infarct's extent, the blob term makes every small lesion count."""
    return dice_bce_loss(logits, target) + blob_loss(logits, target)


LOSSES: dict[str, Loss] = {"bce": bce_loss, "dice_bce": dice_bce_loss, "tversky_bce": tversky_bce_loss,
                           "blob_dice_bce": blob_dice_bce_loss}
# the losses defined for a probability (not only {0, 1}) as target: distillation's (training.distillation)
SOFT_TARGET_LOSSES = ("bce", "dice_bce")


def make_loss(name: str) -> Loss:
    """The loss registered as ``name`` ("bce", the paper's, "dice_bce", "tversky_bce" or "blob_dice_bce")."""
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown loss {name!r}; available: {', '.join(LOSSES)}") from None
