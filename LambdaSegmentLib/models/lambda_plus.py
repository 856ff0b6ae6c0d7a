"""The Lambda+ layer of LambdaUNet (Ou et al., MICCAI 2021, equations 1-7).

Axis letters: b studies, t slices, B = (b t) folded slices, h heads, k query/key
depth |k|, u intra-depth |u|, v value depth |v|, n and m pixels of one slice,
o positional offsets.

For a pixel n of slice t with query q_n (one per head, |k| each) the layer returns

    y_n = q_n^T (lambda^G_t + lambda^L_n + lambda^S_n)                     (eq. 7)

- global lambda   lambda^G_t = sum_{m in slice t} softmax_m(K)_m V_m^T       (eq. 1-2)
- local lambda    lambda^L_n = sum_{m in R x R around n} E_{n-m} V_m^T + e   (eq. 3-4)
- inter-slice     lambda^S_n = sum_{m at n's 2D location in T slices} F_{n-m} V_m^T + f   (eq. 5-6)

each a |k| x |v| matrix shared by all heads. E, F are learned relative-position
kernels (|k| x |u| per offset) with a bias per key channel (e, f), as in the authors'
Conv3d / Conv2d. Slices beyond a study's ends are zeros (zero padding within a study);
studies in one batch never mix.

The positional lambdas are applied without materialising a |k| x |v| matrix per
pixel: q_n^T (sum_m E_{n-m} V_m^T) = sum_m (q_n^T E_{n-m}) V_m^T, so each head gets
|u| weights per offset and the values of the neighbouring pixels are accumulated
directly. The maths is unchanged (verified against a per-pixel loop in the tests).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .slices import check_slice_batch


class LambdaPlus(nn.Module):
    """Lambda+ layer: global, local (R x R) and inter-slice (T) lambdas.

    Args:
        in_channels: input channels |c|.
        out_channels: output channels = heads x |v|.
        key_dim: |k|, depth of queries and keys (authors: 16).
        intra_depth: |u|, the intra-depth of keys and values (authors: 4).
        value_dim: |v|, value depth per head (authors: 32, so heads = out_channels / 32).
        local_size: R, side of the in-slice local context (authors: 3); 0 disables it.
        slice_context: T, slices in the inter-slice context, centre included (authors: 3);
            0 disables it (LambdaUNet-2D). Must be odd.
        local_3d: when True the local context is R x R x T (LambdaUNet-3D) and there is no
            separate inter-slice lambda.

    Shapes:
        forward(x, num_slices): x is ((b t), in_channels, H, W) with whole studies of
        ``num_slices`` consecutive slices; returns ((b t), out_channels, H, W).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        key_dim: int = 16,
        intra_depth: int = 4,
        value_dim: int = 32,
        local_size: int = 3,
        slice_context: int = 3,
        local_3d: bool = False,
    ) -> None:
        super().__init__()
        if out_channels % value_dim:
            raise ValueError(f"out_channels {out_channels} must be a multiple of value_dim {value_dim}")
        for name, size in (("local_size", local_size), ("slice_context", slice_context)):
            if size < 0 or (size and size % 2 == 0):
                raise ValueError(f"{name} must be 0 or odd, got {size}")
        if local_3d and not (local_size and slice_context):
            raise ValueError("local_3d needs both local_size and slice_context")
        self.heads = out_channels // value_dim
        self.key_dim, self.intra_depth, self.value_dim = key_dim, intra_depth, value_dim
        self.local_size, self.slice_context, self.local_3d = local_size, slice_context, local_3d

        self.to_q = nn.Conv2d(in_channels, self.heads * key_dim, 1, bias=False)
        self.norm_q = nn.BatchNorm2d(self.heads * key_dim)
        self.to_k = nn.Conv2d(in_channels, intra_depth * key_dim, 1, bias=False)
        self.to_v = nn.Conv2d(in_channels, intra_depth * value_dim, 1, bias=False)
        self.norm_v = nn.BatchNorm2d(intra_depth * value_dim)

        # Positional kernels, shaped (k, u, T', R', R') like the authors' Conv3d weights.
        self.local_weight = self.local_bias = None
        self.slice_weight = self.slice_bias = None
        if local_size:
            depth = slice_context if local_3d else 1
            self.local_weight = nn.Parameter(torch.empty(key_dim, intra_depth, depth, local_size, local_size))
            self.local_bias = nn.Parameter(torch.empty(key_dim))
        if slice_context and not local_3d:
            self.slice_weight = nn.Parameter(torch.empty(key_dim, intra_depth, slice_context, 1, 1))
            self.slice_bias = nn.Parameter(torch.empty(key_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Variance-preserving projections; positional kernels scaled by their fan-in.

        The query BatchNorm starts with gain |k|^-1/2 (attention's 1/sqrt(d), folded into a
        learnable affine) so that q^T lambda keeps the variance of lambda at initialisation.
        """
        for conv in (self.to_q, self.to_k, self.to_v):
            nn.init.trunc_normal_(conv.weight, std=conv.in_channels**-0.5)
        nn.init.constant_(self.norm_q.weight, self.key_dim**-0.5)
        nn.init.zeros_(self.norm_q.bias)
        for weight, bias in ((self.local_weight, self.local_bias), (self.slice_weight, self.slice_bias)):
            if weight is not None:
                fan_in = weight[0].numel()
                nn.init.trunc_normal_(weight, std=fan_in**-0.5)
                nn.init.zeros_(bias)

    @property
    def kernel_extent(self) -> tuple[int, int]:
        """(slices, pixels) extent of the combined positional kernel: (T', R')."""
        depth = self.slice_context if (self.slice_weight is not None or self.local_3d) else 1
        side = self.local_size if self.local_weight is not None else 1
        return depth, side

    def positional_kernel(self) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, int, int]]] | None:
        """Local and inter-slice kernels merged onto their active offsets.

        Returns (kernel (k, u, o), bias (k,), offsets [(dt, di, dj)] indexing the padded
        (T', R', R') neighbourhood), or None when the layer has no positional lambda.
        """
        if self.local_weight is None and self.slice_weight is None:
            return None
        depth, side = self.kernel_extent
        ref = self.local_weight if self.local_weight is not None else self.slice_weight
        kernel = ref.new_zeros(self.key_dim, self.intra_depth, depth, side, side)
        active = torch.zeros(depth, side, side, dtype=torch.bool)
        bias = ref.new_zeros(self.key_dim)
        if self.local_weight is not None:
            t0 = 0 if self.local_3d else depth // 2
            kernel[:, :, t0 : t0 + self.local_weight.shape[2]] += self.local_weight
            active[t0 : t0 + self.local_weight.shape[2]] = True
            bias = bias + self.local_bias
        if self.slice_weight is not None:
            kernel[:, :, :, side // 2 : side // 2 + 1, side // 2 : side // 2 + 1] += self.slice_weight
            active[:, side // 2, side // 2] = True
            bias = bias + self.slice_bias
        offsets = [tuple(int(i) for i in idx) for idx in active.nonzero()]
        flat = rearrange(kernel, "k u t i j -> k u (t i j)")[:, :, active.flatten()]
        return flat, bias, offsets

    def forward(self, x: torch.Tensor, num_slices: int) -> torch.Tensor:
        check_slice_batch(x, num_slices)
        height, width = x.shape[-2:]
        q = rearrange(self.norm_q(self.to_q(x)), "B (h k) H W -> B h k (H W)", h=self.heads)
        keys = rearrange(self.to_k(x), "B (u k) H W -> B u k (H W)", u=self.intra_depth)
        keys = keys.softmax(dim=-1)  # normalised over the pixels of each slice
        values = rearrange(self.norm_v(self.to_v(x)), "B (u v) H W -> B u v (H W)", u=self.intra_depth)

        content_lambda = torch.einsum("Bukm,Buvm->Bkv", keys, values)  # B k v
        y = torch.einsum("Bhkn,Bkv->Bhvn", q, content_lambda)  # B h v n

        positional = self.positional_kernel()
        if positional is not None:
            kernel, bias, offsets = positional
            y = y + torch.einsum("Bhkn,k->Bhn", q, bias).unsqueeze(2)
            y = y + self._apply_positional(q, values, kernel, offsets, num_slices, height, width)
        return rearrange(y, "B h v (H W) -> B (h v) H W", H=height)

    def _apply_positional(
        self,
        q: torch.Tensor,
        values: torch.Tensor,
        kernel: torch.Tensor,
        offsets: list[tuple[int, int, int]],
        num_slices: int,
        height: int,
        width: int,
    ) -> torch.Tensor:
        """sum_m (q_n^T E_{n-m}) V_m^T over the positional neighbourhood; returns (B, h, v, n)."""
        depth, side = self.kernel_extent
        weights = torch.einsum("Bhkn,kuo->Bhuon", q, kernel)  # per-pixel, per-offset weights
        weights = rearrange(weights, "(b t) h u o (H W) -> b h u o t H W", t=num_slices, H=height)
        grid = rearrange(values, "(b t) u v (H W) -> b u v t H W", t=num_slices, H=height)
        pt, ps = depth // 2, side // 2
        # Zero padding along t stays inside each study: slices of another study never enter.
        grid = F.pad(grid, (ps, ps, ps, ps, pt, pt))
        out = weights.new_zeros(weights.shape[0], self.heads, self.value_dim, num_slices, height, width)
        for o, (dt, di, dj) in enumerate(offsets):
            shifted = grid[:, :, :, dt : dt + num_slices, di : di + height, dj : dj + width]
            for u in range(self.intra_depth):
                out.addcmul_(weights[:, :, u, o].unsqueeze(2), shifted[:, u].unsqueeze(1))
        return rearrange(out, "b h v t H W -> (b t) h v (H W)")

