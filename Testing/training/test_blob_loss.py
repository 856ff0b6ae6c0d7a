"""The blob loss (per-lesion BCE + soft Dice) against a loop over lesions, and what it rewards."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import ndimage

from LambdaSegmentLib.cli.train import LOSS_NAMES, SOFT_TARGET_LOSS_NAMES
from LambdaSegmentLib.training.losses import LOSSES, SOFT_TARGET_LOSSES, blob_dice_bce_loss, blob_loss, dice_bce_loss, lesion_labels


def reference_blob_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Kofler et al.'s definition, one lesion at a time: the other lesions of the window masked out."""
    terms = []
    for window_logits, window_target in zip(logits, target):
        labels, count = ndimage.label(window_target[0].numpy() != 0, structure=np.ones((3, 3, 3)))
        labels = torch.from_numpy(labels)
        for lesion in range(1, count + 1):
            keep = (labels == 0) | (labels == lesion)
            x, y = window_logits[0][keep], (labels == lesion)[keep].float()
            p = x.sigmoid()
            dice = (2 * (p * y).sum() + 1) / (p.sum() + y.sum() + 1)
            terms.append(F.binary_cross_entropy_with_logits(x, y) + 1 - dice)
    return torch.stack(terms).mean()


def random_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 1, 4, 12, 12, generator=generator) * 3
    target = (torch.rand(3, 1, 4, 12, 12, generator=generator) > 0.93).float()
    target[1] = 0  # a lesion-free window among lesion windows
    target[2, 0, :, 2:8, 2:8] = 1  # a large lesion beside small ones
    return logits, target


@pytest.mark.parametrize("seed", range(4))
def test_blob_loss_equals_the_per_lesion_loop(seed: int) -> None:
    logits, target = random_batch(seed)
    assert float(blob_loss(logits, target)) == pytest.approx(float(reference_blob_loss(logits, target)), rel=1e-5)


def test_lesions_are_26_connected_and_numbered_across_the_batch() -> None:
    target = torch.zeros(2, 1, 2, 5, 5)
    target[0, 0, 0, 0, 0] = target[0, 0, 1, 1, 1] = 1  # touching by a corner: one lesion
    target[0, 0, 0, 4, 4] = 1
    target[1, 0, 1, 2, 2] = 1
    labels, window = lesion_labels(target)
    assert labels.shape == (2, 50)
    assert window.tolist() == [0, 0, 1]
    assert sorted(labels[0].unique().tolist()) == [0, 1, 2] and sorted(labels[1].unique().tolist()) == [0, 3]


def test_every_lesion_counts_alike_whatever_its_size() -> None:
    """Missing a 1-voxel lesion beside a found 64-voxel one: the global loss hardly notices;
    the blob term loses that lesion's Dice (1 − 0.5 with smoothing 1), half of it in the mean
    over the two lesions."""
    target = torch.zeros(1, 1, 4, 16, 16)
    target[0, 0, :, 2:6, 2:6] = 1
    target[0, 0, 1, 12, 12] = 1
    found_all = torch.where(target > 0, 8.0, -8.0)
    missed_small = found_all.clone()
    missed_small[0, 0, 1, 12, 12] = -8.0
    global_gap = float(dice_bce_loss(missed_small, target) - dice_bce_loss(found_all, target))
    blob_gap = float(blob_loss(missed_small, target) - blob_loss(found_all, target))
    assert global_gap < 0.03
    assert blob_gap > 0.2 and blob_gap > 10 * global_gap


def test_blob_loss_is_zero_with_a_gradient_without_lesions_and_registered() -> None:
    logits = torch.randn(2, 1, 2, 4, 4, requires_grad=True)
    loss = blob_loss(logits, torch.zeros(2, 1, 2, 4, 4))
    loss.backward()
    assert float(loss) == 0.0 and logits.grad is not None
    logits, target = random_batch(0)
    assert float(blob_dice_bce_loss(logits, target)) == pytest.approx(float(dice_bce_loss(logits, target) + blob_loss(logits, target)))
    assert LOSSES["blob_dice_bce"] is blob_dice_bce_loss
    assert set(LOSS_NAMES) == set(LOSSES)  # the CLI's choices, spelled out to keep torch out of parser building
    assert set(SOFT_TARGET_LOSS_NAMES) == set(SOFT_TARGET_LOSSES) <= set(LOSSES)  # the same for --teacher's check


def test_blob_loss_gradient_matches_the_loop() -> None:
    logits, target = random_batch(5)
    mine = logits.clone().requires_grad_(True)
    reference = logits.clone().requires_grad_(True)
    blob_loss(mine, target).backward()
    reference_blob_loss(reference, target).backward()
    torch.testing.assert_close(mine.grad, reference.grad, rtol=1e-4, atol=1e-7)
