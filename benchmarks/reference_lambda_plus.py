"""A straightforward reference of the paper's Lambda+ maths, for benchmarks and tests.

It materialises every per-pixel lambda the way the paper's Appendix A pseudocode (and
the authors' code) does, written here from the equations:

- content lambda per slice (sum over u and m of softmax(K) V^T), repeated at every pixel;
- local lambda: a Conv3d over the values viewed as (B, u, v, H, W), kernel (1, R, R),
  the value axis acting as the convolution's depth (one R x R kernel per (k, u));
- inter-slice lambda: the values rearranged ``(b t) u v p -> (b p) u v t`` and a Conv2d
  with kernel (1, T) along the slice axis, i.e. one tiny image per study pixel;
- y = q^T lambda per pixel (a batched matmul over the summed |k| x |v| lambdas).

``ReferenceLambdaPlus`` wraps a project ``LambdaPlus`` and uses its parameters, so
``reference_model(model)`` turns a LambdaUNet into the reference with the same weights.
The LambdaUNet-3D variant (an R x R x T local context) is a Conv3d over (t, H, W) per
value channel.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

from LambdaSegmentLib.models.lambda_plus import LambdaPlus
from LambdaSegmentLib.models.slices import check_slice_batch


class _ContiguousGradient(torch.autograd.Function):
    """Identity whose backward makes the incoming gradient contiguous.

    torch 2.13's CPU BatchNorm2d backward returns wrong input gradients when a batch of
    one image receives a gradient with odd strides (here (4, 1, 24, 4) for (1, 4, 5, 6),
    what the matmul backward hands back through the rearranges); found by the gradient
    tests of the optimised layer, which agree with float64 gradcheck.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad.contiguous()


def reference_lambda_plus(layer: LambdaPlus, x: torch.Tensor, num_slices: int) -> torch.Tensor:
    """The paper's Lambda+ with materialised per-pixel lambdas.

    x: ((b t), c, H, W) -> ((b t), heads * v, H, W) (contiguous NCHW).
    """
    check_slice_batch(x, num_slices)
    height, width = x.shape[-2:]
    p = height * width
    q = layer.to_q(x)
    if layer.query_norm == "batch":
        q = layer.norm_q(q)
    else:  # unit RMS over each head's k channels, times the learned gain (h, k)
        q = rearrange(q, "B (h k) H W -> B h k H W", h=layer.heads)
        q = q * torch.rsqrt(q.square().mean(dim=2, keepdim=True) + layer.norm_q.eps)
        q = rearrange(q * layer.norm_q.weight[..., None, None], "B h k H W -> B (h k) H W")
    q = rearrange(_ContiguousGradient.apply(q), "B (h k) H W -> B h k (H W)", h=layer.heads)
    k = rearrange(layer.to_k(x), "B (u k) H W -> B u k (H W)", u=layer.intra_depth).softmax(dim=-1)
    v = rearrange(_ContiguousGradient.apply(layer.norm_v(layer.to_v(x))), "B (u v) H W -> B u v (H W)", u=layer.intra_depth)

    # torch.einsum's backward is wrong for some shapes with size-1 axes in torch 2.13
    # (found by these tests), so the two contractions are explicit matmuls.
    content = torch.matmul(rearrange(k, "B u k m -> B k (u m)"), rearrange(v, "B u v m -> B (u m) v"))
    if layer.content_norm == "rms":  # each slice's k x v content lambda to unit RMS, times the learned gain
        norm = layer.norm_content
        content = content * torch.rsqrt(content.square().mean(dim=(1, 2), keepdim=True) + norm.eps) * norm.weight
    lam = repeat(content, "B k v -> B k v p", p=p)  # global lambda, eq. 1-2
    if layer.local_3d:  # LambdaUNet-3D: one R x R x T local lambda, a Conv3d over (t, H, W) per value channel
        r, t_ctx = layer.local_size, layer.slice_context
        v_volume = rearrange(v, "(b t) u v (H W) -> (b v) u t H W", t=num_slices, H=height)
        local = F.conv3d(v_volume, layer.local_weight, layer.local_bias, padding=(t_ctx // 2, r // 2, r // 2))
        lam = lam + rearrange(local, "(b v) k t H W -> (b t) k v (H W)", v=layer.value_dim)
    elif layer.local_weight is not None:  # local lambda, eq. 3-4
        r = layer.local_size
        v_local = rearrange(v, "B u v (H W) -> B u v H W", H=height)
        local = F.conv3d(v_local, layer.local_weight, layer.local_bias, padding=(0, r // 2, r // 2))
        lam = lam + rearrange(local, "B k v H W -> B k v (H W)")
    if layer.slice_weight is not None:  # inter-slice lambda, eq. 5-6
        t_ctx = layer.slice_context
        v_slices = rearrange(v, "(b t) u v p -> (b p) u v t", t=num_slices)
        weight = rearrange(layer.slice_weight, "k u t 1 1 -> k u 1 t")
        inter = F.conv2d(v_slices, weight, layer.slice_bias, padding=(0, t_ctx // 2))
        lam = lam + rearrange(inter, "(b p) k v t -> (b t) k v p", p=p)
    y = torch.matmul(rearrange(q, "B h k p -> B p h k"), rearrange(lam, "B k v p -> B p k v"))  # eq. 7
    return rearrange(y, "B (H W) h v -> B (h v) H W", H=height)


class ReferenceLambdaPlus(nn.Module):
    """A ``LambdaPlus`` (its parameters and buffers) computed by ``reference_lambda_plus``."""

    def __init__(self, layer: LambdaPlus) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, num_slices: int) -> torch.Tensor:
        return reference_lambda_plus(self.layer, x, num_slices)


def reference_model(model: nn.Module) -> nn.Module:
    """A deep copy of ``model`` with every ``LambdaPlus`` computed by the reference."""
    model = copy.deepcopy(model)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, LambdaPlus):
                setattr(parent, name, ReferenceLambdaPlus(child))
    return model
