"""Inference-time rewrites of a trained segmentation model that keep its outputs.

- BatchNorm folding: an eval-mode ``Conv2d -> BatchNorm2d`` pair inside a Sequential
  becomes one convolution (``torch.nn.utils.fusion.fuse_conv_bn_eval``); the BatchNorm
  is replaced by ``nn.Identity``. (Lambda+ folds its own query/value BatchNorms into its
  projection whenever it is in eval mode.)
- Channels-last memory format for every 4D weight, so oneDNN convolutions and the
  pixels-major Lambda+ layers exchange tensors without layout conversions.
- The BatchNorms after Lambda+ layers (not foldable: Lambda+ is not a convolution) become
  in-place affines on the Lambda+ output, which nothing else reads.
- Optional slice chunking (``SliceChunkedUNet``): in the UNet family only the encoder
  blocks mix slices; the stem and the whole decoder are 2D, so they can run a few slices
  at a time. The full-resolution decoder activations then exist for ``slice_chunk`` slices
  only, without the halo recomputation of slab streaming. Lambda+ layers run in chunks of
  the same number of slices too (``LambdaPlus.inference_slice_chunk``: each chunk reads the
  values of T//2 neighbouring slices), so only the encoder blocks' inputs and outputs and
  the skips exist for the whole study. Paper LambdaUNet, 24 x 256^2, fp32 CPU, 2 threads:
  peak RSS 1.54 GiB chunked against 2.58 GiB in one pass
  (``benchmarks/results/inference_speed_cpu.md``, "chunked" and "optimised" rows).

The result equals the plain eval model up to float rounding (tested to 1e-4 on logits).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from .lambda_plus import LambdaPlus
from .lambda_unet import LambdaDown
from .slices import check_in_plane_size, fold_slices, unfold_slices
from .unet_blocks import UNet2p5d

INFERENCE_SLICE_CHUNK = 4
"""Slices at a time for ``slice_chunk`` in the inference engine (and its benchmark rows):
GEMMs of 4 x 16^2 = 1024 pixels or more at every level, intermediates of 4 slices."""


def fold_batch_norms(model: nn.Module) -> int:
    """Fold every ``Conv2d`` directly followed by ``BatchNorm2d`` in a Sequential, in place.

    The model must be in eval mode (running statistics are used). Returns the number of
    BatchNorms folded.
    """
    if model.training:
        raise ValueError("fold_batch_norms needs an eval-mode model (call model.eval() first)")
    folded = 0
    for module in model.modules():
        if not isinstance(module, nn.Sequential):
            continue
        names = list(module._modules)
        for first, second in zip(names, names[1:]):
            conv, norm = module._modules[first], module._modules[second]
            if isinstance(conv, nn.Conv2d) and isinstance(norm, nn.BatchNorm2d) and norm.track_running_stats:
                module._modules[first] = fuse_conv_bn_eval(conv, norm)
                module._modules[second] = nn.Identity()
                folded += 1
    return folded


class InPlaceBatchNorm(nn.Module):
    """An eval-mode ``BatchNorm2d`` applied in place: x * scale + shift per channel.

    Only for tensors that nothing else reads (here: a Lambda+ layer's fresh output).
    forward(x (n, c, h, w)) -> x, modified.
    """

    def __init__(self, norm: nn.BatchNorm2d) -> None:
        super().__init__()
        scale = torch.rsqrt(norm.running_var + norm.eps)
        if norm.weight is not None:
            scale = scale * norm.weight
        shift = -norm.running_mean * scale
        if norm.bias is not None:
            shift = shift + norm.bias
        self.register_buffer("scale", scale.detach()[:, None, None])
        self.register_buffer("shift", shift.detach()[:, None, None])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul_(self.scale).add_(self.shift)


def batch_norms_in_place(model: nn.Module) -> int:
    """Replace the BatchNorms after the Lambda+ layers of every ``LambdaDown`` by
    ``InPlaceBatchNorm``, in place; the model must be in eval mode. Returns how many."""
    if model.training:
        raise ValueError("batch_norms_in_place needs an eval-mode model (call model.eval() first)")
    replaced = 0
    for module in model.modules():
        if isinstance(module, LambdaDown):
            for name in ("norm1", "norm2"):
                norm = getattr(module, name)
                if isinstance(norm, nn.BatchNorm2d) and norm.track_running_stats:
                    setattr(module, name, InPlaceBatchNorm(norm))
                    replaced += 1
    return replaced


def optimise_for_inference(
    model: nn.Module, *, fold_bn: bool = True, channels_last: bool = True, slice_chunk: int | None = None
) -> nn.Module:
    """An eval-mode copy of ``model`` with BatchNorms folded and channels-last weights.

    Args:
        model: any segmentation model; not modified.
        fold_bn: fold Conv2d -> BatchNorm2d pairs; apply the BatchNorms after Lambda+
            layers in place.
        channels_last: channels-last weights (and so activations).
        slice_chunk: when set and the model is a ``UNet2p5d`` using its forward, wrap it in
            ``SliceChunkedUNet`` running its 2D stem and decoder this many slices at a time,
            and set every Lambda+ layer's ``inference_slice_chunk`` to it.

    forward() keeps its signature and results (within float rounding); use the copy under
    ``torch.inference_mode()``.
    """
    optimised = copy.deepcopy(model).eval()
    if fold_bn:
        fold_batch_norms(optimised)
        batch_norms_in_place(optimised)
    if channels_last:
        for module in optimised.modules():
            if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
                # Module.to(memory_format=...) refuses the 5D Lambda+ kernels; convert 4D weights only.
                module.weight.data = module.weight.data.contiguous(memory_format=torch.channels_last)
    # Only models that run UNet2p5d's own forward: SliceChunkedUNet re-implements exactly
    # that one (AttentionUNet, for one, has its own and decoder blocks returning tuples).
    if slice_chunk is not None and isinstance(optimised, UNet2p5d) and type(optimised).forward is UNet2p5d.forward:
        optimised = SliceChunkedUNet(optimised, slice_chunk)
        for module in optimised.modules():
            if isinstance(module, LambdaPlus):
                module.inference_slice_chunk = slice_chunk
    return optimised


class SliceChunkedUNet(nn.Module):
    """Runs a ``UNet2p5d`` with its 2D parts (stem, decoder, head) ``slice_chunk`` slices at a time.

    forward(x (b, c, t, h, w)) -> logits (b, 1, t, h, w), equal to ``unet(x)``: the encoder
    blocks, the only ones that mix slices, still see every slice of each study at once
    (their Lambda+ layers may chunk on their own: ``LambdaPlus.inference_slice_chunk``).
    The stem's chunks are written into one preallocated tensor (no concatenated copy).
    """

    def __init__(self, unet: UNet2p5d, slice_chunk: int) -> None:
        super().__init__()
        if slice_chunk < 1:
            raise ValueError(f"slice_chunk must be >= 1, got {slice_chunk}")
        self.unet, self.slice_chunk = unet, slice_chunk

    @property
    def slice_receptive_radius(self) -> int:
        return self.unet.slice_receptive_radius

    @property
    def widths(self) -> list[int]:
        return self.unet.widths

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        unet = self.unet
        check_in_plane_size(x, 2 ** (len(unet.widths) - 1))
        folded, num_slices = fold_slices(x)  # (b t) c h w
        chunks = [slice(i, i + self.slice_chunk) for i in range(0, folded.shape[0], self.slice_chunk)]
        first = unet.inc(folded[chunks[0]])
        channels_last = first.is_contiguous(memory_format=torch.channels_last) and not first.is_contiguous()
        stem = torch.empty(
            (folded.shape[0], *first.shape[1:]), dtype=first.dtype, device=first.device,
            memory_format=torch.channels_last if channels_last else torch.contiguous_format,
        )
        stem[chunks[0]] = first
        del first
        for rows in chunks[1:]:
            stem[rows] = unet.inc(folded[rows])
        skips = [stem]
        del stem
        for down in unet.downs:
            skips.append(down(skips[-1], num_slices))
        logits = []
        for rows in chunks:
            y = skips[-1][rows]
            for up, skip in zip(unet.ups, reversed(skips[:-1])):
                y = up(y, skip[rows])
            logits.append(unet.outc(y))
        return unfold_slices(torch.cat(logits), num_slices)
