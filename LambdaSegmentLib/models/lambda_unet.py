"""LambdaUNet (Ou et al., MICCAI 2021) and its 2D / 3D variants.

A milesial-style UNet whose encoder convolutions are Lambda+ layers: the stem is a
plain DoubleConv, each down block is MaxPool2d(2) + [Lambda+ -> BN -> ReLU] x 2, the
decoder is convolutional. Slices interact only inside Lambda+ layers.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Iterator, Sequence

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .lambda_plus import LambdaPlus
from .registry import register_model
from .unet_blocks import UNet2p5d, make_norm

PAPER_WIDTHS = (64, 128, 256, 512, 1024)


class LambdaDown(nn.Module):
    """MaxPool2d(2) then [Lambda+ -> norm -> ReLU] x 2 (norm: BatchNorm, or GroupNorm with ``norm="group"``).

    forward(x ((b t), in, h, w), num_slices) -> ((b t), out, h/2, w/2).

    With ``checkpoint_activations`` the block keeps only its input during training and
    recomputes its activations in the backward pass (less memory, about one more forward
    of the block); its BatchNorms' running statistics are updated once, as without it.
    """

    def __init__(
        self, in_channels: int, out_channels: int, checkpoint_activations: bool = False, norm: str = "batch",
        **lambda_config: object,
    ) -> None:
        super().__init__()
        self.checkpoint_activations = checkpoint_activations
        self.pool = nn.MaxPool2d(2)
        self.lambda1 = LambdaPlus(in_channels, out_channels, value_norm=norm, **lambda_config)
        self.norm1 = make_norm(norm, out_channels)
        self.lambda2 = LambdaPlus(out_channels, out_channels, value_norm=norm, **lambda_config)
        self.norm2 = make_norm(norm, out_channels)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor, num_slices: int) -> torch.Tensor:
        if self.checkpoint_activations and self.training and torch.is_grad_enabled():
            return checkpoint(
                self._body, x, num_slices, use_reentrant=False,
                context_fn=lambda: (nullcontext(), frozen_batch_norm_statistics(self)),
            )
        return self._body(x, num_slices)

    def _body(self, x: torch.Tensor, num_slices: int) -> torch.Tensor:
        x = self.act(self.norm1(self.lambda1(self.pool(x), num_slices)))
        return self.act(self.norm2(self.lambda2(x, num_slices)))


def batch_norms(module: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """Every BatchNorm (1d, 2d, 3d) inside ``module``, in ``modules()`` order."""
    return [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


@contextmanager
def frozen_batch_norm_statistics(module: nn.Module) -> Iterator[None]:
    """BatchNorms inside ``module`` normalise with batch statistics but leave their running
    statistics unchanged (for the recomputation of a checkpointed block)."""
    norms = batch_norms(module)
    saved = [(m.momentum, m.num_batches_tracked.clone() if m.num_batches_tracked is not None else None) for m in norms]
    for m in norms:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, (momentum, tracked) in zip(norms, saved):
            m.momentum = momentum
            if tracked is not None:
                m.num_batches_tracked.copy_(tracked)


class LambdaUNet(UNet2p5d):
    """LambdaUNet. Defaults are the paper's configuration (13,848,193 parameters).

    Args:
        in_channels: input channels, default 2 ([eADC, DWI b1000]).
        widths: channels per level, default (64, 128, 256, 512, 1024).
        key_dim: |k| of every Lambda+ layer (16).
        intra_depth: |u| (4).
        value_dim: |v| per head (32); heads = width / value_dim.
        local_size: R of the local lambda (3).
        slice_context: T of the inter-slice lambda (3); 0 gives LambdaUNet-2D.
        local_3d: R x R x T local context instead of the inter-slice lambda (LambdaUNet-3D).
        query_norm: "batch" (the paper's BatchNorm on the queries) or "rms" (per-pixel unit-RMS
            queries: each Lambda+ layer linear, not quadratic, in its input's scale, so the
            eight stacked layers cannot overflow on an input brighter than training showed;
            ``lambda_plus.QueryRMSNorm``).
        content_norm: "none" (the paper's; every package up to 2.1.0) or "rms" (each slice's
            global content lambda scaled to unit RMS with a learned gain, so a slice's
            context cannot grow layer by layer away from its neighbours' and swamp the deep
            features: the cause of the dropped slices of ``docs/MODEL_CARD.md``;
            ``lambda_plus.ContentRMSNorm``).
        norm: "batch" (the paper's BatchNorm everywhere; every package up to 2.1.0) or "group"
            (GroupNorm of 8 channels per group in every block, and on the Lambda+ values: each
            slice normalised by its own statistics, the same in training and at inference; no
            running statistics, so none can differ between lesion-rich training windows and a
            whole study: the second cause of the dropped slices of ``docs/MODEL_CARD.md``).
            Changes the function: a model must be trained with it.
        stem_norm: the normalisation of the stem (``inc``) and the first encoder block
            (``downs.0``, its Lambda+ values included; its queries keep ``query_norm``) instead of ``norm``; None (every package
            up to 2.1.0): ``norm``. ``"group"`` with BatchNorm elsewhere takes batch statistics
            out of the two levels where they decided whether whole-territory infarcts were
            found (``benchmarks/batchnorm_swap.py``; ``docs/ablation.md``), and keeps them in
            the deeper levels, where GroupNorm everywhere learned too little.
        checkpoint_activations: recompute each encoder block's activations in the backward
            pass instead of storing them (training memory; same results).

    forward(x (b, c, t, h, w)) -> logits (b, 1, t, h, w); h, w divisible by 16, t >= 1.

    Example::

        model = create_model("lambda_unet")
        logits = model(torch.randn(1, 2, 8, 64, 64))  # (1, 1, 8, 64, 64)
    """

    def __init__(
        self,
        in_channels: int = 2,
        widths: Sequence[int] = PAPER_WIDTHS,
        key_dim: int = 16,
        intra_depth: int = 4,
        value_dim: int = 32,
        local_size: int = 3,
        slice_context: int = 3,
        local_3d: bool = False,
        query_norm: str = "batch",
        content_norm: str = "none",
        norm: str = "batch",
        stem_norm: str | None = None,
        checkpoint_activations: bool = False,
    ) -> None:
        lambda_config = dict(
            key_dim=key_dim,
            intra_depth=intra_depth,
            value_dim=value_dim,
            local_size=local_size,
            slice_context=slice_context,
            local_3d=local_3d,
            query_norm=query_norm,
            content_norm=content_norm,
        )
        # UNet2p5d builds the encoder blocks in level order, so they take these norms in turn.
        down_norms = iter([stem_norm or norm] + [norm] * (len(widths) - 2))
        super().__init__(
            in_channels, widths,
            lambda a, b: LambdaDown(a, b, checkpoint_activations, next(down_norms), **lambda_config),
            norm=norm, stem_norm=stem_norm,
        )
        self.slice_context = slice_context

    @property
    def slice_receptive_radius(self) -> int:
        """Slices on each side that can influence an output slice (each Lambda+ reaches T//2)."""
        per_layer = self.slice_context // 2
        return per_layer * 2 * len(self.downs)


@register_model("lambda_unet")
def lambda_unet(**config: object) -> LambdaUNet:
    """2.5D LambdaUNet (paper configuration by default)."""
    return LambdaUNet(**config)


@register_model("lambda_unet_2d")
def lambda_unet_2d(**config: object) -> LambdaUNet:
    """LambdaUNet-2D: no inter-slice lambda (13,846,529 parameters by default)."""
    return LambdaUNet(**{"slice_context": 0, **config})


@register_model("lambda_unet_3d")
def lambda_unet_3d(**config: object) -> LambdaUNet:
    """LambdaUNet-3D: a 3D local context R x R x T instead of the inter-slice lambda."""
    return LambdaUNet(**{"local_3d": True, **config})
