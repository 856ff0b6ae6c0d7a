"""Attention UNet baseline (Oktay et al., MIDL 2018): a 2D UNet whose skip connections
pass through additive attention gates, applied slice by slice.

The gate follows the paper's equations: the skip features x (fine scale) are projected
with a stride-2 linear map W_x to the resolution of the gating signal g (the coarser
decoder features), added to W_g g, passed through ReLU and a 1x1 projection psi, and a
sigmoid gives one coefficient alpha in [0, 1] per skip pixel (after bilinear resampling
back to the skip's resolution). The skip is multiplied by alpha before concatenation.
Encoder, decoder convolutions and up-sampling are the conv UNet's blocks (``unet_blocks``).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .lambda_unet import PAPER_WIDTHS
from .registry import register_model
from .slices import check_in_plane_size, fold_slices, unfold_slices
from .unet_blocks import ConvDown, UNet2p5d, Up


class AttentionGate(nn.Module):
    """Additive attention gate: alpha = sigmoid(psi^T ReLU(W_x^T x + W_g^T g + b_g) + b_psi).

    Args:
        skip_channels: channels of the gated skip features x.
        gating_channels: channels of the gating signal g (one level coarser).
        inter_channels: channels of the intermediate space (Oktay et al.: skip_channels // 2).

    Shapes:
        coefficients(skip (n, skip_channels, 2h, 2w), gating (n, gating_channels, h, w))
        -> alpha (n, 1, 2h, 2w) in [0, 1]; forward(skip, gating) -> skip * alpha, same
        shape as skip.
    """

    def __init__(self, skip_channels: int, gating_channels: int, inter_channels: int) -> None:
        super().__init__()
        # W_x sees each 2x2 block of skip pixels: the paper's down-sampling of x to g's grid.
        self.skip_proj = nn.Conv2d(skip_channels, inter_channels, kernel_size=2, stride=2, bias=False)
        self.gating_proj = nn.Conv2d(gating_channels, inter_channels, kernel_size=1, bias=True)
        self.psi = nn.Conv2d(inter_channels, 1, kernel_size=1, bias=True)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Variance-preserving projections; psi scaled so that alpha starts spread around
        0.5 (neither saturated nor constant), so every gate receives gradient at step one."""
        for proj in (self.skip_proj, self.gating_proj):
            # Two projections are summed before the ReLU: halve each one's variance.
            nn.init.kaiming_normal_(proj.weight, mode="fan_in", nonlinearity="relu")
            proj.weight.data.mul_(math.sqrt(0.5))
        nn.init.zeros_(self.gating_proj.bias)
        nn.init.normal_(self.psi.weight, std=1.0 / math.sqrt(self.psi.in_channels))
        nn.init.zeros_(self.psi.bias)

    def coefficients(self, skip: torch.Tensor, gating: torch.Tensor) -> torch.Tensor:
        """Attention coefficients alpha (n, 1, 2h, 2w) in [0, 1] for every skip pixel."""
        q = F.relu(self.skip_proj(skip) + self.gating_proj(gating))  # (n, inter, h, w)
        alpha = torch.sigmoid(self.psi(q))  # (n, 1, h, w)
        # Bilinear resampling of values in [0, 1] stays in [0, 1] (convex combinations).
        return F.interpolate(alpha, size=skip.shape[-2:], mode="bilinear", align_corners=False)

    def forward(self, skip: torch.Tensor, gating: torch.Tensor) -> torch.Tensor:
        return skip * self.coefficients(skip, gating)


class AttentionUp(Up):
    """The conv UNet's ``Up`` block with the skip gated by the coarser features first.

    forward(x (n, in, h, w), skip (n, skip, 2h, 2w)) -> ((n, skip, 2h, 2w), alpha (n, 1, 2h, 2w)).
    """

    def __init__(self, in_channels: int, skip_channels: int) -> None:
        super().__init__(in_channels, skip_channels)
        self.gate = AttentionGate(skip_channels, in_channels, max(skip_channels // 2, 1))

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        alpha = self.gate.coefficients(skip, x)
        return super().forward(x, skip * alpha), alpha


class AttentionUNet(UNet2p5d):
    """2D Attention UNet applied slice by slice (32,088,389 parameters by default).

    The conv UNet (same widths, 31,042,945 parameters) plus one additive attention gate
    per skip connection (1,045,444 parameters together), gated by the next coarser
    decoder features; intermediate gate width = skip width / 2 as Oktay et al.

    Args:
        in_channels: input channels, default 2 ([eADC, DWI b1000]).
        widths: channels per level, default (64, 128, 256, 512, 1024) as the conv UNet;
            h and w must be divisible by 2^(len(widths) - 1) (16 by default).

    Shapes:
        forward(x (b, c, t, h, w)) -> logits (b, 1, t, h, w). Slices never interact
        (``slice_receptive_radius`` is 0).

    Example::

        model = create_model("attention_unet")
        logits = model(torch.randn(1, 2, 8, 64, 64))  # (1, 1, 8, 64, 64)
        logits, alphas = model.forward_with_attention(torch.randn(1, 2, 8, 64, 64))
        # alphas[0]: (1, 1, 8, 8, 8) at the coarsest skip ... alphas[-1]: (1, 1, 8, 64, 64)
    """

    def __init__(self, in_channels: int = 2, widths: Sequence[int] = PAPER_WIDTHS) -> None:
        super().__init__(in_channels, widths, ConvDown, AttentionUp)
        for module in self.modules():
            if isinstance(module, AttentionGate):
                module.reset_parameters()

    @property
    def slice_receptive_radius(self) -> int:
        """A 2D network never looks at other slices."""
        return 0

    def forward_with_attention(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits (b, 1, t, h, w) and the attention maps of the gates, coarsest first:
        alpha (b, 1, t, h / 2^l, w / 2^l) in [0, 1] for l = levels - 2, ..., 0."""
        check_in_plane_size(x, 2 ** (len(self.widths) - 1))
        folded, num_slices = fold_slices(x)
        skips = [self.inc(folded)]
        for down in self.downs:
            skips.append(down(skips[-1], num_slices))
        y = skips.pop()
        alphas = []
        for up in self.ups:
            y, alpha = up(y, skips.pop())
            alphas.append(unfold_slices(alpha, num_slices))
        return unfold_slices(self.outc(y), num_slices), alphas

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with_attention(x)[0]


@register_model("attention_unet")
def attention_unet(**config: object) -> AttentionUNet:
    """2D Attention UNet (Oktay et al. 2018), same widths as the conv UNet."""
    return AttentionUNet(**config)
