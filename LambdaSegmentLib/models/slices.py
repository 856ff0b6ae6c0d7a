"""Folding a study's slices into the batch and back, with the slice count explicit.

Axis letters used across the models: b batch (studies), c channels, t slices,
h w in-plane pixels.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn


def fold_slices(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(b, c, t, h, w) -> ((b t), c, h, w) and the slice count t."""
    if x.ndim != 5:
        raise ValueError(
            f"expected a study batch shaped (batch, channels, slices, height, width), got {tuple(x.shape)}"
        )
    return rearrange(x, "b c t h w -> (b t) c h w"), x.shape[2]


def unfold_slices(x: torch.Tensor, num_slices: int) -> torch.Tensor:
    """((b t), c, h, w) -> (b, c, t, h, w) given the slice count t."""
    check_slice_batch(x, num_slices)
    return rearrange(x, "(b t) c h w -> b c t h w", t=num_slices)


def check_slice_batch(x: torch.Tensor, num_slices: int) -> None:
    """Raise ``ValueError`` unless the folded batch of ``x`` holds whole studies of ``num_slices``."""
    if num_slices < 1:
        raise ValueError(f"slice count must be >= 1, got {num_slices}")
    if x.shape[0] % num_slices != 0:
        raise ValueError(
            f"a folded batch of {x.shape[0]} slices cannot hold whole studies of {num_slices} slices"
        )


def check_in_plane_size(x: torch.Tensor, multiple: int = 16) -> None:
    """Raise ``ValueError`` unless height and width are divisible by ``multiple``."""
    height, width = x.shape[-2:]
    if height % multiple or width % multiple:
        raise ValueError(
            f"height and width must be divisible by {multiple}, got {height}x{width}; pad the study first"
        )


class SliceWise(nn.Module):
    """Runs a 2D network (``(n, c, h, w) -> (n, 1, h, w)``) on every slice of a study batch.

    ``forward`` takes (b, c, t, h, w) and returns (b, 1, t, h, w); slices never mix.
    """

    def __init__(self, net2d: nn.Module) -> None:
        super().__init__()
        self.net2d = net2d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_in_plane_size(x)
        folded, num_slices = fold_slices(x)
        return unfold_slices(self.net2d(folded), num_slices)
