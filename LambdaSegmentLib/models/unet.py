"""The 2D convolutional UNet baseline (Ronneberger et al. 2015) with LambdaUNet's widths."""

from __future__ import annotations

from typing import Sequence

from .lambda_unet import PAPER_WIDTHS
from .registry import register_model
from .unet_blocks import ConvDown, UNet2p5d


class UNet(UNet2p5d):
    """2D UNet applied slice by slice (31,042,945 parameters by default).

    Args:
        in_channels: input channels, default 2 ([eADC, DWI b1000]).
        widths: channels per level, default (64, 128, 256, 512, 1024).

    forward(x (b, c, t, h, w)) -> logits (b, 1, t, h, w).
    """

    def __init__(self, in_channels: int = 2, widths: Sequence[int] = PAPER_WIDTHS) -> None:
        super().__init__(in_channels, widths, ConvDown)

    @property
    def slice_receptive_radius(self) -> int:
        """A 2D network never looks at other slices."""
        return 0


@register_model("unet")
def unet(**config: object) -> UNet:
    """2D conv UNet, same widths as LambdaUNet."""
    return UNet(**config)
