"""3D UNet baseline (Çiçek et al., MICCAI 2016) made safe for thick-slice DWI.

Differences from the original, on purpose:
- Pooling and up-sampling act in-plane only, (1, 2, 2): the slice axis is never
  down-sampled, so any slice count t >= 1 works and thick slices (typically 3-6 mm against
  ~2 mm in-plane after preprocessing) are never merged.
- Through-slice kernel depth per level (``kernel_depths``, default (1, 3, 3, 3, 3)): at the
  full-resolution level the slices are 2-3x farther apart than the pixels, so a 3x3x3
  kernel there would mix tissue centimetres apart through-plane while looking only
  millimetres in-plane; it uses (1, 3, 3). From the second level on the in-plane spacing
  (>= 4 mm) has caught up with the slice spacing and the kernels are 3x3x3. This is the
  rule nnU-Net applies to anisotropic data.
- BatchNorm, as Çiçek et al., rather than InstanceNorm/GroupNorm: those normalise with
  statistics over the whole study, so every output slice would depend on every input slice
  and overlapping-slab inference could never be exact. With BatchNorm (eval mode: a fixed
  per-channel affine) an output slice depends only on the slices within
  ``slice_receptive_radius``.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from .registry import register_model
from .slices import check_in_plane_size
from .unet_blocks import init_conv_bn

DEFAULT_WIDTHS_3D = (32, 64, 128, 256, 512)
DEFAULT_KERNEL_DEPTHS = (1, 3, 3, 3, 3)


class DoubleConv3d(nn.Sequential):
    """(conv (d, 3, 3), BN, ReLU) x 2: (b, in, t, h, w) -> (b, out, t, h, w); d is 1 or 3."""

    def __init__(self, in_channels: int, out_channels: int, kernel_depth: int) -> None:
        kernel, padding = (kernel_depth, 3, 3), (kernel_depth // 2, 1, 1)
        layers: list[nn.Module] = []
        for a, b in ((in_channels, out_channels), (out_channels, out_channels)):
            # No bias: the BatchNorm that follows has its own shift.
            layers += [nn.Conv3d(a, b, kernel, padding=padding, bias=False), nn.BatchNorm3d(b), nn.ReLU(inplace=True)]
        super().__init__(*layers)


class UNet3d(nn.Module):
    """3D UNet with in-plane-only pooling (21,807,937 parameters by default).

    Args:
        in_channels: input channels, default 2 ([eADC, DWI b1000]).
        widths: channels per level, default (32, 64, 128, 256, 512) (Çiçek et al. go
            32...256 in three poolings; four in-plane poolings give 1/16 like the 2D models).
            h and w must be divisible by 2^(len(widths) - 1) (16 by default).
        kernel_depths: through-slice kernel size per level, 1 or 3 each, default
            (1, 3, 3, 3, 3): (1, 3, 3) kernels at full resolution, 3x3x3 below (see the
            module docstring). The decoder block of a level uses the level's depth.

    Shapes:
        forward(x (b, c, t, h, w)) -> logits (b, 1, t, h, w), any t >= 1. An output slice
        depends on input slices within ``slice_receptive_radius`` (14 by default) only.

    Example::

        model = create_model("unet_3d")
        logits = model(torch.randn(1, 2, 20, 128, 128))  # (1, 1, 20, 128, 128)
        model.slice_receptive_radius  # 14
    """

    def __init__(
        self,
        in_channels: int = 2,
        widths: Sequence[int] = DEFAULT_WIDTHS_3D,
        kernel_depths: Sequence[int] = DEFAULT_KERNEL_DEPTHS,
    ) -> None:
        super().__init__()
        widths, kernel_depths = list(widths), list(kernel_depths)
        if len(kernel_depths) != len(widths):
            raise ValueError(f"need one kernel depth per level: {len(widths)} widths, {len(kernel_depths)} depths")
        if any(d not in (1, 3) for d in kernel_depths):
            raise ValueError(f"kernel depths must be 1 or 3, got {kernel_depths}")
        self.widths, self.kernel_depths = widths, kernel_depths
        self.encoders = nn.ModuleList(
            DoubleConv3d(a, b, d) for a, b, d in zip([in_channels, *widths[:-1]], widths, kernel_depths)
        )
        self.pool = nn.MaxPool3d(kernel_size=(1, 2, 2))
        # Decoder level l (coarse to fine): up-sample widths[l+1] -> widths[l], concatenate the skip.
        levels = range(len(widths) - 2, -1, -1)
        self.upsamples = nn.ModuleList(
            nn.ConvTranspose3d(widths[l + 1], widths[l], kernel_size=(1, 2, 2), stride=(1, 2, 2)) for l in levels
        )
        self.decoders = nn.ModuleList(DoubleConv3d(2 * widths[l], widths[l], kernel_depths[l]) for l in levels)
        self.outc = nn.Conv3d(widths[0], 1, kernel_size=1)
        init_conv_bn(self)

    @property
    def slice_receptive_radius(self) -> int:
        """Slices on each side that can influence an output slice.

        Pooling and up-sampling never reach across slices, so the radius is the sum of
        the through-slice half-kernels along the longest path (every encoder conv, then
        every decoder conv): 2 x (d // 2) per encoder level and per decoder level.
        """
        encoder = sum(2 * (d // 2) for d in self.kernel_depths)
        decoder = sum(2 * (d // 2) for d in self.kernel_depths[:-1])
        return encoder + decoder

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 5:
            raise ValueError(
                f"expected a study batch shaped (batch, channels, slices, height, width), got {tuple(x.shape)}"
            )
        check_in_plane_size(x, 2 ** (len(self.widths) - 1))
        skips = []
        y = x
        for level, encoder in enumerate(self.encoders):
            y = encoder(self.pool(y) if level else y)  # (b, widths[level], t, h / 2^level, w / 2^level)
            skips.append(y)
        y = skips.pop()
        for upsample, decoder in zip(self.upsamples, self.decoders):
            y = decoder(torch.cat([skips.pop(), upsample(y)], dim=1))
        return self.outc(y)


@register_model("unet_3d")
def unet_3d(**config: object) -> UNet3d:
    """3D UNet (Çiçek et al. 2016) with in-plane-only pooling."""
    return UNet3d(**config)
