"""Noise on the BatchNorm statistics while training (issue 13, ``--batchnorm-noise SD``).

What it is for: at inference a BatchNorm normalises with running statistics, which a short
fine-tune estimates on few batches. Swapping the stage-2 models' moving-average statistics
for precise ones (a shift of 0.03 standard deviations in the stem) took their whole-territory
infarcts from Dice 0.84 to 0.63 with every weight unchanged, and the shift that mattered was
in the stem and the first Lambda+ level alone (``benchmarks/batchnorm_swap.py``). A network
whose decisions sit that close to its normalisation also sits that close to a scanner's
intensity calibration. Training under a random shift of every statistic teaches it a margin.

In train mode, each forward pass of a BatchNorm draws per channel δ, η ~ N(0, SD) and
normalises as if its batch mean were μ + δ·σ and its standard deviation σ·e^η:

    x̂' = (x̂ − δ)·e^(−η),  so  y' = γ·x̂' + β = (y − β − γ·δ)·e^(−η) + β

with y the BatchNorm's own output, γ, β its affine (1, 0 without one). One draw per channel
and pass, shared by every window and slice of the batch, as a statistic is. The running
statistics are updated from the input as always (the noise acts on the output only), and in
eval mode nothing changes: inference computes exactly what it did. The draws come from
torch's default generator, so a seeded run is reproducible.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from LambdaSegmentLib.models import batch_norms


def perturbed_output(norm: nn.modules.batchnorm._BatchNorm, output: torch.Tensor, sd: float) -> torch.Tensor:
    """``norm``'s ``output`` (b, C, ...) as if its statistics were shifted by fresh
    δ, η ~ N(0, ``sd``) per channel (module docstring)."""
    channels = output.shape[1]
    shape = (1, channels) + (1,) * (output.dim() - 2)
    delta = torch.randn(channels, device=output.device, dtype=output.dtype) * sd
    eta = torch.randn(channels, device=output.device, dtype=output.dtype) * sd
    gamma = norm.weight if norm.weight is not None else torch.ones_like(delta)
    beta = norm.bias if norm.bias is not None else torch.zeros_like(delta)
    gamma, beta = gamma.to(output.dtype), beta.to(output.dtype)
    return ((output - beta.view(shape) - (gamma * delta).view(shape)) * torch.exp(-eta).view(shape)) + beta.view(shape)


def add_statistics_noise(model: nn.Module, sd: float) -> list[RemovableHandle]:
    """Perturb the output of every BatchNorm of ``model`` that is in train mode at the time of
    its forward pass (module docstring); returns the hooks' handles (``handle.remove()`` undoes
    it). ``sd`` must be > 0 (0 means no noise: add no hooks)."""
    if not sd > 0:
        raise ValueError(f"BatchNorm statistics noise needs a standard deviation > 0, not {sd}")

    def hook(norm: nn.Module, _inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> torch.Tensor | None:
        return perturbed_output(norm, output, sd) if norm.training else None

    return [norm.register_forward_hook(hook) for norm in batch_norms(model)]
