"""Building blocks of the 2D UNet family (Ronneberger et al. 2015, milesial layout).

All blocks work on folded slices ((b t), c, h, w). Encoder blocks take the slice count
explicitly so that 2.5D blocks (Lambda+) can recover the study layout; 2D blocks ignore it.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import torch
from torch import nn

from .lambda_plus import LambdaPlus
from .slices import check_in_plane_size, fold_slices, unfold_slices


#: Normalisations of the 2D blocks: "batch" (the paper's BatchNorm, running statistics at
#: inference) or "group" (GroupNorm of 8 channels per group: each slice normalised by its own
#: statistics, identically in training and at inference, so no running statistics exist to
#: differ between training windows and whole studies).
NORMS = ("batch", "group")
CHANNELS_PER_GROUP = 8


def make_norm(norm: str, channels: int) -> nn.Module:
    """The 2D normalisation layer named ``norm`` over ``channels`` channels ((n, c, h, w) -> same)."""
    if norm == "batch":
        return nn.BatchNorm2d(channels)
    if norm == "group":
        return nn.GroupNorm(max(1, channels // CHANNELS_PER_GROUP), channels)
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


def conv_bn_relu(in_channels: int, out_channels: int, norm: str = "batch") -> list[nn.Module]:
    """3x3 convolution, normalisation (BatchNorm by default), ReLU.

    The convolution keeps its bias although a normalisation follows, as in the authors'
    code, so that parameter counts match theirs (LambdaUNet 13,848,193; UNet 31,042,945).
    """
    return [
        nn.Conv2d(in_channels, out_channels, 3, padding=1),
        make_norm(norm, out_channels),
        nn.ReLU(inplace=True),
    ]


class DoubleConv(nn.Sequential):
    """(3x3 conv, norm, ReLU) x 2: (n, in, h, w) -> (n, out, h, w)."""

    def __init__(self, in_channels: int, out_channels: int, norm: str = "batch") -> None:
        super().__init__(*conv_bn_relu(in_channels, out_channels, norm), *conv_bn_relu(out_channels, out_channels, norm))


class ConvDown(nn.Module):
    """Max-pool by 2 then DoubleConv: (n, in, h, w) -> (n, out, h/2, w/2)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.pool = nn.MaxPool2d(2)
        self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x: torch.Tensor, num_slices: int) -> torch.Tensor:
        return self.conv(self.pool(x))


class Up(nn.Module):
    """Transposed-conv upsampling by 2 to the skip's width, concatenated skip, DoubleConv.

    forward(x (n, in, h, w), skip (n, skip, 2h, 2w)) -> (n, skip, 2h, 2w). With doubling
    widths (in = 2 skip) this is milesial's ``Up(in, in // 2, bilinear=False)``.
    """

    def __init__(self, in_channels: int, skip_channels: int, norm: str = "batch") -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, skip_channels, kernel_size=2, stride=2)
        self.conv = DoubleConv(2 * skip_channels, skip_channels, norm)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


DownFactory = Callable[[int, int], nn.Module]
UpFactory = Callable[[int, int], nn.Module]


class UNet2p5d(nn.Module):
    """UNet over folded slices with a pluggable encoder block.

    Args:
        in_channels: input channels (default 2: [eADC, DWI b1000]).
        widths: channels per level (paper: 64, 128, 256, 512, 1024).
        make_down: builds an encoder block ``(in, out) -> module`` whose forward is
            ``(x, num_slices)``; pooling is part of the block.
        make_up: builds a decoder block ``(in, skip) -> module`` (default :class:`Up`
            with ``norm``).
        norm: normalisation of the stem and the default decoder blocks (:data:`NORMS`).
        stem_norm: the stem's (``inc``) normalisation instead of ``norm`` (None: ``norm``).

    forward(x (b, c, t, h, w)) -> logits (b, 1, t, h, w); h and w divisible by 2^(levels-1).
    """

    def __init__(
        self, in_channels: int, widths: Sequence[int], make_down: DownFactory, make_up: UpFactory | None = None,
        norm: str = "batch", stem_norm: str | None = None,
    ) -> None:
        super().__init__()
        widths = list(widths)
        self.widths = widths
        make_up = make_up or functools.partial(Up, norm=norm)
        self.inc = DoubleConv(in_channels, widths[0], stem_norm or norm)
        self.downs = nn.ModuleList(make_down(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.ups = nn.ModuleList(make_up(a, b) for a, b in zip(widths[:0:-1], widths[-2::-1]))
        self.outc = nn.Conv2d(widths[0], 1, kernel_size=1)
        init_conv_bn(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_in_plane_size(x, 2 ** (len(self.widths) - 1))
        folded, num_slices = fold_slices(x)
        skips = [self.inc(folded)]
        for down in self.downs:
            skips.append(down(skips[-1], num_slices))
        y = skips.pop()
        for up in self.ups:
            y = up(y, skips.pop())
        return unfold_slices(self.outc(y), num_slices)


def init_conv_bn(module: nn.Module) -> None:
    """He initialisation for convolutions followed by ReLU, BatchNorm to identity;
    Lambda+ layers then re-apply their own ``reset_parameters``."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d, nn.GroupNorm, nn.LayerNorm)) and m.weight is not None:
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    for m in module.modules():
        if isinstance(m, LambdaPlus):
            m.reset_parameters()
