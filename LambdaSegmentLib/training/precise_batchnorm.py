"""Precise BatchNorm statistics: the running statistics re-estimated after training.

During training a BatchNorm keeps an exponential moving average of its batch statistics
(momentum 0.1), so what inference normalises with is mostly the last ten or so batches'
statistics. A short fine-tune (issue 13's stage 2: 96 steps of 4 windows) thereby ships
statistics estimated on ~40 windows, and two training seeds differ in them as much as in
anything they learned. Re-estimating them afterwards as an equal-weight average over many
fresh batches of the same distribution ("precise BN", Wu & Johnson, *Rethinking "Batch" in
BatchNorm*, 2021) removes that noise without touching a learned weight.
"""

from __future__ import annotations

from itertools import islice
from typing import Iterable

import torch
from torch import nn

from LambdaSegmentLib.models import batch_norms


def training_batch_norms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """The BatchNorms of ``model`` that are in train mode, i.e. that updated their running
    statistics during training (a frozen or ``freeze_batchnorm`` one stays in eval mode)."""
    return [norm for norm in batch_norms(model) if norm.training and norm.track_running_stats]


def reestimate_batchnorm(model: nn.Module, images: Iterable[torch.Tensor], batches: int) -> int:
    """Re-estimate the running statistics of ``model``'s training BatchNorms on ``batches``
    batches of ``images``, in place, and return how many BatchNorms were re-estimated.

    ``model`` must be in the train/eval state it trained in (``SegmentationModule.train()``):
    the BatchNorms in train mode are reset and re-estimated as a cumulative average
    (momentum None) over the batches, one weight each; those in eval mode keep theirs.
    ``images`` yields model inputs, (b, c, t, h, w) float32 for the registry's slice models.
    No gradient is computed and no parameter changes. Afterwards every BatchNorm has its
    momentum back and the model is in eval mode.

    Raises ValueError when ``images`` runs out before ``batches`` batches or ``batches`` < 1:
    statistics averaged over fewer batches than asked for would not be what was recorded.
    """
    if batches < 1:
        raise ValueError(f"precise BatchNorm needs at least one batch, not {batches}")
    norms = training_batch_norms(model)
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: every batch weighs the same
    seen = 0
    try:
        with torch.no_grad():
            for image in islice(images, batches):  # never draws a batch beyond the last
                model(image)
                seen += 1
    finally:
        for norm, momentum in zip(norms, momenta):
            norm.momentum = momentum
        model.eval()
    if seen < batches:
        raise ValueError(f"precise BatchNorm asked for {batches} batches but the data gave {seen}")
    return len(norms)

