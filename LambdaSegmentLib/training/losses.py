"""Training losses on logits (b, 1, t, h, w) against {0, 1} targets of the same shape."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

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


LOSSES: dict[str, Loss] = {"bce": bce_loss, "dice_bce": dice_bce_loss}


def make_loss(name: str) -> Loss:
    """The loss registered as ``name`` ("bce", the paper's, or "dice_bce")."""
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown loss {name!r}; available: {', '.join(LOSSES)}") from None
