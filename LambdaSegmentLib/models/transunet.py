"""TransUNet baseline (Chen et al., 2021), hybrid CNN + transformer, applied slice by slice.

Layout as in the paper's R50-ViT hybrid, scaled down:
- CNN encoder: a ResNet-style stem, root 7x7 stride-2 convolution (1/2), max-pool (1/4),
  then residual stages at 1/4, 1/8 and 1/16 (``cnn_widths``);
- transformer encoder on the 1/16 feature map, one token per pixel (patch size 1): a
  1x1 patch embedding to ``hidden``, learned position embeddings, ``layers`` pre-norm
  ``nn.TransformerEncoderLayer`` blocks, a final LayerNorm;
- cascaded up-sampling decoder: 3x3 conv from ``hidden``, then four (bilinear x2, concat
  CNN skip, DoubleConv) blocks with skips at 1/8, 1/4 and 1/2 and none at full resolution,
  then a 1x1 segmentation head.

Position embeddings are learned for a reference token grid (``pos_grid``, default 8 x 8 =
a 128 x 128 slice, i.e. a 256 mm field of view at the 2 mm preprocessing spacing) and
resampled bicubically to any other h/16 x w/16 grid, as ViT does for new resolutions.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .registry import register_model
from .slices import SliceWise
from .unet_blocks import DoubleConv, init_conv_bn


class ResidualBlock(nn.Module):
    """Basic residual block (He et al. 2016): conv3x3(stride)-BN-ReLU-conv3x3-BN + shortcut, ReLU.

    forward(x (n, in, h, w)) -> (n, out, h / stride, w / stride). The shortcut is a
    strided 1x1 conv + BN when the shape changes, else the identity.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
        )
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def zero_init_last_norm(self) -> None:
        """Start as (almost) the shortcut: the residual branch's last BN gain is 0 (Goyal et al. 2017)."""
        nn.init.zeros_(self.body[-1].weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.shortcut(x))


def residual_stage(in_channels: int, out_channels: int, blocks: int, stride: int) -> nn.Sequential:
    """``blocks`` residual blocks, the first one changing width and resolution."""
    return nn.Sequential(
        ResidualBlock(in_channels, out_channels, stride),
        *(ResidualBlock(out_channels, out_channels) for _ in range(blocks - 1)),
    )


class TransUNet2d(nn.Module):
    """TransUNet on single slices: (n, c, h, w) -> logits (n, 1, h, w), h and w divisible by 16.

    Arguments as ``TransUNet``.
    """

    def __init__(
        self,
        in_channels: int = 2,
        cnn_widths: Sequence[int] = (32, 64, 128, 256),
        stage_blocks: Sequence[int] = (2, 2, 2),
        hidden: int = 256,
        layers: int = 4,
        heads: int = 8,
        mlp: int = 1024,
        dropout: float = 0.1,
        pos_grid: tuple[int, int] = (8, 8),
        decoder_widths: Sequence[int] = (128, 64, 32, 16),
    ) -> None:
        super().__init__()
        if len(cnn_widths) != 4 or len(stage_blocks) != 3 or len(decoder_widths) != 4:
            raise ValueError("need 4 cnn_widths (1/2, 1/4, 1/8, 1/16), 3 stage_blocks and 4 decoder_widths")
        if hidden % heads:
            raise ValueError(f"hidden {hidden} must be a multiple of heads {heads}")
        root, w4, w8, w16 = cnn_widths
        # CNN encoder down to 1/16; its 1/2, 1/4 and 1/8 features are the decoder's skips.
        self.root = nn.Sequential(
            nn.Conv2d(in_channels, root, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(root), nn.ReLU(inplace=True)
        )
        self.stages = nn.ModuleList(
            [
                nn.Sequential(nn.MaxPool2d(3, stride=2, padding=1), residual_stage(root, w4, stage_blocks[0], 1)),
                residual_stage(w4, w8, stage_blocks[1], 2),
                residual_stage(w8, w16, stage_blocks[2], 2),
            ]
        )
        # Transformer encoder on the 1/16 tokens (patch size 1).
        self.patch_embed = nn.Conv2d(w16, hidden, kernel_size=1)
        self.pos_grid = tuple(pos_grid)
        self.pos_embed = nn.Parameter(torch.zeros(1, hidden, *self.pos_grid))
        self.embed_dropout = nn.Dropout(dropout)
        self.transformer = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(
                d_model=hidden,
                nhead=heads,
                dim_feedforward=mlp,
                dropout=dropout,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            ),
            num_layers=layers,
            norm=nn.LayerNorm(hidden),
            enable_nested_tensor=False,
        )
        # Cascaded up-sampling decoder.
        self.conv_more = nn.Sequential(
            nn.Conv2d(hidden, w16, 3, padding=1, bias=False), nn.BatchNorm2d(w16), nn.ReLU(inplace=True)
        )
        skip_widths = (w8, w4, root, 0)
        in_widths = (w16, *decoder_widths[:-1])
        self.decoder = nn.ModuleList(
            DoubleConv(a + s, b) for a, s, b in zip(in_widths, skip_widths, decoder_widths)
        )
        self.head = nn.Conv2d(decoder_widths[-1], 1, kernel_size=1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """He init for convolutions, BN identity (residual branches zero), ViT init for the transformer.

        ``nn.TransformerEncoder`` deep-copies one layer, so every layer would start with
        identical weights; each is re-initialised here (Xavier-uniform projections, zero
        biases, identity LayerNorms) and the position embeddings get N(0, 0.02^2) as in ViT.
        """
        init_conv_bn(self)
        for module in self.modules():
            if isinstance(module, ResidualBlock):
                module.zero_init_last_norm()
        for module in self.transformer.modules():
            if isinstance(module, nn.MultiheadAttention):
                module._reset_parameters()  # Xavier-uniform in_proj, zero biases
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)

    def position_embeddings(self, grid_h: int, grid_w: int) -> torch.Tensor:
        """Position embeddings (1, grid_h * grid_w, hidden) for a grid_h x grid_w token grid:
        the learned reference grid itself, or its bicubic resampling."""
        pos = self.pos_embed
        if (grid_h, grid_w) != self.pos_grid:
            pos = F.interpolate(pos, size=(grid_h, grid_w), mode="bicubic", align_corners=False)
        return rearrange(pos, "1 d h w -> 1 (h w) d")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = [self.root(x)]  # (n, root, h/2, w/2)
        for stage in self.stages:
            skips.append(stage(skips[-1]))  # 1/4, 1/8, 1/16
        features = skips.pop()  # (n, w16, h/16, w/16)
        grid_h, grid_w = features.shape[-2:]
        tokens = rearrange(self.patch_embed(features), "n d h w -> n (h w) d")
        tokens = self.embed_dropout(tokens + self.position_embeddings(grid_h, grid_w))
        tokens = self.transformer(tokens)  # (n, h/16 * w/16, hidden)
        y = self.conv_more(rearrange(tokens, "n (h w) d -> n d h w", h=grid_h))
        for block in self.decoder:
            y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            y = block(torch.cat([y, skips.pop()], dim=1) if skips else y)
        return self.head(y)


class TransUNet(SliceWise):
    """TransUNet (Chen et al. 2021), scaled for CPU training, applied slice by slice
    (7,374,769 parameters by default).

    Args:
        in_channels: input channels, default 2 ([eADC, DWI b1000]).
        cnn_widths: CNN encoder widths at 1/2 (root conv), 1/4, 1/8, 1/16; default (32, 64, 128, 256).
        stage_blocks: residual blocks in the 1/4, 1/8 and 1/16 stages; default (2, 2, 2).
        hidden: transformer width (token dimension); default 256 (paper: 768).
        layers: transformer encoder layers; default 4 (paper: 12).
        heads: attention heads, ``hidden`` divisible by it; default 8 (32 per head; paper: 12 x 64).
        mlp: feed-forward width of each transformer layer; default 1024 (4 x hidden, as ViT).
        dropout: dropout of embeddings, attention and MLP; default 0.1 (paper: 0.1).
        pos_grid: token grid (h/16, w/16) the position embeddings are learned for; other
            grids are interpolated bicubically. Default (8, 8) (128 x 128 slices).
        decoder_widths: channels of the four up-sampling blocks; default (128, 64, 32, 16)
            (paper: 256, 128, 64, 16).

    Shapes:
        forward(x (b, c, t, h, w)) -> logits (b, 1, t, h, w); h, w divisible by 16, any
        t >= 1; slices never interact (``slice_receptive_radius`` is 0).

    Example::

        model = create_model("transunet")
        logits = model(torch.randn(1, 2, 8, 128, 128))  # (1, 1, 8, 128, 128)
        logits = model(torch.randn(1, 2, 8, 96, 160))   # 6 x 10 tokens, interpolated embeddings
    """

    def __init__(self, **config: object) -> None:
        super().__init__(TransUNet2d(**config))

    @property
    def slice_receptive_radius(self) -> int:
        """A 2D network never looks at other slices."""
        return 0


@register_model("transunet")
def transunet(**config: object) -> TransUNet:
    """Hybrid CNN + transformer TransUNet (Chen et al. 2021), CPU-sized by default."""
    return TransUNet(**config)
