"""The Lambda+ layer of LambdaUNet (Ou et al., MICCAI 2021, equations 1-7).

Axis letters: b studies, t slices, B = (b t) folded slices, h heads, k query/key
depth |k|, u intra-depth |u|, v value depth |v|, n and m pixels of one slice,
o positional offsets, j = (offset, u) pairs of one neighbourhood row.

For a pixel n of slice t with query q_n (one per head, |k| each) the layer returns

    y_n = q_n^T (lambda^G_t + lambda^L_n + lambda^S_n)                     (eq. 7)

- global lambda   lambda^G_t = sum_{m in slice t} softmax_m(K)_m V_m^T       (eq. 1-2)
                  (with ``content_norm="rms"``: g * lambda^G_t / RMS(lambda^G_t), ``ContentRMSNorm``)
- local lambda    lambda^L_n = sum_{m in R x R around n} E_{n-m} V_m^T + e   (eq. 3-4)
- inter-slice     lambda^S_n = sum_{m at n's 2D location in T slices} F_{n-m} V_m^T + f   (eq. 5-6)

each a |k| x |v| matrix shared by all heads. E, F are learned relative-position
kernels (|k| x |u| per offset) with a bias per key channel (e, f), as in the authors'
Conv3d / Conv2d. Slices beyond a study's ends are zeros (zero padding within a study);
studies in one batch never mix.

How it is computed (the maths above is unchanged; tests compare with a per-pixel loop
and with the authors' way of materialising every per-pixel lambda):

- Pixels-major ("channels-last") layout throughout: q, keys and values are one fused
  1x1 projection (a GEMM; at inference the query/value BatchNorms are folded into it).
- The biases e, f are the same for every pixel, so they are folded into the per-slice
  content lambda: one GEMM per slice gives q_n^T (lambda^G_t + e + f).
- The positional part works on a zero-padded grid of values flattened over
  (t, row, column): an offset (dt, di, dj) becomes a constant shift of the flat pixel
  index, so the neighbours of all pixels along one kernel row are a strided *view*
  (no copy) of shape (pixels, dj x u, v). A block of pixels at a time, those views are
  copied into one (pixels, o u, v) buffer, so that the per-pixel product is one batched
  matmul over all offsets (row by row the matrices, e.g. 4 x 12 x 8, are small enough for
  ATen's scalar loop, several times slower than a batched BLAS call). Two contractions
  are available, chosen per layer by their multiply-add count (``positional_path``):
    * "reassociated": w_n = q_n^T E (|h| x |o u| per pixel, one GEMM), then
      y_n = w_n @ V_n (batched matmul over pixels). Cheapest with few heads.
    * "materialised": lambda_n = E @ V_n (|k| x |v| per pixel), then y_n = q_n^T lambda_n.
      Cheaper when heads are many (deep levels).
  With autograd both run through ``_NeighbourhoodMatmul``, whose backward is explicit
  batched matmuls and shifted adds (autograd through overlapping strided views would be
  very slow); without it the term is added in place on the studies' own pixels.
- Inference in chunks of slices (``inference_slice_chunk``): every output slice depends on
  its own slice (queries, keys, global lambda) and on the values of the T//2 slices on each
  side, so a study can run a few slices at a time, each value projected once and kept for
  the next chunk's halo. Only the layer's input and output then exist for the whole study;
  the result is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from einops import rearrange
from torch import nn

from .slices import check_slice_batch

POSITIONAL_PATHS = ("auto", "reassociated", "materialised")
QUERY_NORMS = ("batch", "rms")
CONTENT_NORMS = ("none", "rms")
VALUE_NORMS = ("batch", "group")


class QueryRMSNorm(nn.Module):
    """Per-pixel RMS normalisation of each head's query, with a learned gain per channel.

    forward(q (..., h, k)) -> (..., h, k): every |k|-vector scaled to RMS 1, then by ``weight``
    (h, k), which starts at |k|^-1/2 (attention's 1/sqrt(d)) so that ||q|| = 1.

    Why: with BatchNorm (eval mode: a fixed affine map) the query is linear in the layer's
    input, and so is each value, so y = q^T lambda is *quadratic* in it; eight Lambda+ layers
    deep, an input pixel 30x brighter than training ever showed becomes 30^(2^8) and the
    float32 output overflows (measured: `docs/MODEL_CARD.md`, Architecture). A unit-RMS query
    makes y linear in the values, so the layer grows like a convolution.
    """

    def __init__(self, heads: int, key_dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.full((heads, key_dim), key_dim**-0.5))

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return nn.functional.rms_norm(q, (q.shape[-1],), eps=self.eps) * self.weight.to(q.dtype)


class ContentRMSNorm(nn.Module):
    """Per-slice RMS normalisation of the global (content) lambda, with a learned gain.

    forward(content (B, k, v)) -> (B, k, v): each slice's |k| x |v| content lambda
    sum_m softmax_m(K) V_m^T scaled to RMS 1 over its k v entries, then multiplied by
    ``weight`` (k, v), which starts at 1 (with unit-norm queries, q^T lambda then has
    about unit variance at initialisation).

    Why: the content lambda is a softmax-weighted mean of the slice's values, so its size
    follows the size of the slice's activations, and q_n^T lambda^G_t adds the same context
    to every pixel of the slice. Through BatchNorm (eval mode: a fixed affine) and ReLU the
    next layer's values, hence its content lambda, follow that size again: eight layers
    deep this per-slice loop can amplify one slice's activations by 10x relative to its
    neighbours until the slice-wide context swamps the deep features and the whole slice is
    called background (measured: ``benchmarks/dropped_slice.py``; ``docs/MODEL_CARD.md``,
    Architecture, "Why a whole slice can be dropped"). With a unit-RMS content lambda the global context carries what the
    slice holds (its direction), not how strongly the previous layer responded, so the loop
    has no gain; the local and inter-slice lambdas stay linear, like convolutions.
    """

    def __init__(self, key_dim: int, value_dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(key_dim, value_dim))

    def forward(self, content: torch.Tensor) -> torch.Tensor:
        return nn.functional.rms_norm(content, content.shape[-2:], self.weight.to(content.dtype), eps=self.eps)


@dataclass(frozen=True)
class _Row:
    """Consecutive active offsets (dt, di, dj0..dj0+span-1) of one kernel row.

    ``shift`` is the flat-grid shift of its first offset relative to the centre pixel;
    ``column`` the first column of the row's block in the (k, j) kernel matrix.
    """

    shift: int
    span: int
    column: int


class _NeighbourhoodMatmul(torch.autograd.Function):
    """out[n] = weights[n] @ neighbourhood[n], the neighbourhood of pixel n being the
    kernel rows' values grid[n + shift_row + (0..span-1)] stacked in (row, dj, u) order.

    weights: (N, r, J) per-pixel matrices, or one (r, J) matrix shared by every pixel,
        J = sum of row spans x u.
    grid: (margin + N + margin, u, v) contiguous zero-padded values on the flat grid.
    Returns (N, r, v).

    ``chunk`` pixels at a time, each chunk's neighbourhoods are gathered into one (n, J, v)
    buffer so that each product is a single batched matmul over all offsets (row by row
    the matrices are so small, e.g. 4 x 12 x 8, that ATen runs them in a scalar loop,
    several times slower); the backward gathers them again instead of keeping them.
    """

    @staticmethod
    def forward(ctx, weights: torch.Tensor, grid: torch.Tensor, rows: tuple[_Row, ...], margin: int, chunk: int) -> torch.Tensor:
        ctx.save_for_backward(weights, grid)
        ctx.rows, ctx.margin, ctx.chunk = rows, margin, chunk
        num_pixels, value = grid.shape[0] - 2 * margin, grid.shape[2]
        out = weights.new_empty(num_pixels, weights.shape[-2], value)
        buffer = grid.new_empty(min(chunk, num_pixels), weights.shape[-1], value)
        for start in range(0, num_pixels, chunk):
            stop = min(num_pixels, start + chunk)
            neighbours = _gather_rows(grid, rows, margin + start, buffer[: stop - start])
            matrices = weights if weights.dim() == 2 else weights[start:stop]
            torch.matmul(matrices, neighbours, out=out[start:stop])
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        weights, grid = ctx.saved_tensors
        rows, margin, chunk = ctx.rows, ctx.margin, ctx.chunk
        num_pixels, intra = grid.shape[0] - 2 * margin, grid.shape[1]
        shared = weights.dim() == 2
        grad_out = grad_out.contiguous()
        grad_weights = grad_grid = None
        if ctx.needs_input_grad[0]:
            # A shared kernel's gradient sums over every chunk: accumulated in float32 (autocast may give bf16).
            grad_weights = torch.zeros_like(weights, dtype=torch.float32) if shared else torch.empty_like(weights)
        if ctx.needs_input_grad[1]:
            grad_grid = torch.zeros_like(grid)
        buffer = grid.new_empty(min(chunk, num_pixels), weights.shape[-1], grid.shape[2])
        for start in range(0, num_pixels, chunk):
            stop = min(num_pixels, start + chunk)
            grad_chunk = grad_out[start:stop]  # n r v
            if grad_weights is not None:
                neighbours = _gather_rows(grid, rows, margin + start, buffer[: stop - start])
                if shared:  # sum over the chunk's pixels as one GEMM, not n per-pixel products
                    grad_weights += torch.einsum("nrv,njv->rj", grad_chunk, neighbours).float()
                else:
                    torch.bmm(grad_chunk, neighbours.transpose(1, 2), out=grad_weights[start:stop])
            if grad_grid is not None:
                matrices = weights if shared else weights[start:stop]
                grad_neighbours = torch.matmul(matrices.transpose(-1, -2), grad_chunk)  # n J v
                for row in rows:
                    block = grad_neighbours[:, row.column * intra : (row.column + row.span) * intra]
                    block = block.view(stop - start, row.span, intra, -1)
                    for dj in range(row.span):
                        first = margin + start + row.shift + dj
                        grad_grid[first : first + stop - start] += block[:, dj]
        if shared and grad_weights is not None:
            grad_weights = grad_weights.to(weights.dtype)
        return grad_weights, grad_grid, None, None, None


def _gather_rows(
    grid: torch.Tensor,
    rows: tuple[_Row, ...],
    start: int,
    out: torch.Tensor,
    pixel_strides: tuple[int, ...] = (1,),
) -> torch.Tensor:
    """Copy the neighbourhoods of a block of pixels into ``out`` (*block, J, v), in the kernel
    matrix's column order (row by row, (dj, u)); returns ``out``.

    The block's first pixel is flat-grid row ``start`` (margin included); its pixels are
    ``out.shape[:-2]`` apart by ``pixel_strides`` flat-grid pixels (consecutive pixels:
    (1,); rows of one slice: (line, 1); whole slices: (plane, line, 1)).
    """
    intra, value = grid.shape[1], grid.shape[2]
    block = out.shape[:-2]
    for row in rows:
        neighbours = grid.as_strided(  # (*block, span u, v): overlapping view, no copy
            (*block, row.span * intra, value),
            (*(stride * intra * value for stride in pixel_strides), value, 1),
            grid.storage_offset() + (start + row.shift) * intra * value,
        )
        out[..., row.column * intra : (row.column + row.span) * intra, :] = neighbours
    return out


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
        query_norm: "batch" (the authors': BatchNorm on the queries) or "rms" (each pixel's
            query per head scaled to unit RMS, ``QueryRMSNorm``: the layer becomes linear
            rather than quadratic in its input's scale, so a stack cannot overflow).
        content_norm: "none" (the paper's, and every package before it: the content lambda
            as it is) or "rms" (each slice's content lambda scaled to unit RMS with a learned
            (k, v) gain, ``ContentRMSNorm``: the slice-wide context no longer grows with the
            slice's activations, so a slice cannot run away from its neighbours). Changes the
            function: a model must be trained with it.
        value_norm: "batch" (the authors': BatchNorm on the values) or "group" (GroupNorm, one
            group per intra-depth slot: each slice's values by their own statistics; no running
            statistics). Changes the function: a model must be trained with it.

    Attributes:
        positional_path: "auto" (default: the cheaper of the two by multiply-adds),
            "reassociated" or "materialised"; the result is the same up to rounding.
        inference_chunk_elements: without autograd, the positional neighbourhoods are
            gathered for this many elements (pixels x offsets x |u| x |v|) at a time
            (bounds memory; same result).
        training_chunk_elements: the same bound with autograd (forward and backward).
        inference_slice_chunk: in eval mode without autograd, run each study this many
            slices at a time (None: all at once). Bounds the layer's intermediate tensors
            to the chunk (plus T//2 halo slices of values); same result.

    Shapes:
        forward(x, num_slices): x is ((b t), in_channels, H, W) with whole studies of
        ``num_slices`` consecutive slices; returns ((b t), out_channels, H, W) in
        channels-last memory format (any input memory format is accepted).
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
        query_norm: str = "batch",
        content_norm: str = "none",
        value_norm: str = "batch",
    ) -> None:
        super().__init__()
        if query_norm not in QUERY_NORMS:
            raise ValueError(f"query_norm must be one of {QUERY_NORMS}, got {query_norm!r}")
        if content_norm not in CONTENT_NORMS:
            raise ValueError(f"content_norm must be one of {CONTENT_NORMS}, got {content_norm!r}")
        if value_norm not in VALUE_NORMS:
            raise ValueError(f"value_norm must be one of {VALUE_NORMS}, got {value_norm!r}")
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
        self.positional_path = "auto"
        self.inference_chunk_elements = 2**22  # gathered neighbourhood values held at once at inference (16 MiB fp32)
        self.inference_slice_chunk: int | None = None
        self.training_chunk_elements = 2**22  # gathered neighbourhood values held at once with autograd (16 MiB fp32)

        self.to_q = nn.Conv2d(in_channels, self.heads * key_dim, 1, bias=False)
        self.query_norm = query_norm
        self.norm_q: nn.Module = (
            nn.BatchNorm2d(self.heads * key_dim) if query_norm == "batch" else QueryRMSNorm(self.heads, key_dim)
        )
        self.to_k = nn.Conv2d(in_channels, intra_depth * key_dim, 1, bias=False)
        self.to_v = nn.Conv2d(in_channels, intra_depth * value_dim, 1, bias=False)
        # values: BatchNorm (the authors'; folded into the projection at inference) or
        # GroupNorm with one group per intra-depth slot (each slice by its own statistics)
        self.norm_v: nn.Module = (
            nn.BatchNorm2d(intra_depth * value_dim) if value_norm == "batch"
            else nn.GroupNorm(intra_depth, intra_depth * value_dim)
        )
        # Only registered when used, so the state dicts of "none" layers (every package so far) are unchanged.
        self.content_norm = content_norm
        self.norm_content: nn.Module | None = ContentRMSNorm(key_dim, value_dim) if content_norm == "rms" else None

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
        if self.norm_content is not None:
            nn.init.ones_(self.norm_content.weight)
        if isinstance(self.norm_q, nn.BatchNorm2d):
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
        (T', R', R') neighbourhood in row-major order), or None when the layer has no
        positional lambda.
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

    def chosen_positional_path(self, num_pixels: int | None = None) -> str:
        """The contraction used: ``positional_path`` unless "auto", then the one with
        fewer multiply-adds per pixel (reassociated: h o u (k + v); materialised:
        k v (o u + h)). ``num_pixels`` is accepted for symmetry; the ratio does not depend on it.
        """
        if self.positional_path not in POSITIONAL_PATHS:
            raise ValueError(f"positional_path must be one of {POSITIONAL_PATHS}, got {self.positional_path!r}")
        if self.positional_path != "auto":
            return self.positional_path
        positional = self.positional_kernel()
        num_offsets = len(positional[2]) if positional is not None else 0
        h, k, u, v = self.heads, self.key_dim, self.intra_depth, self.value_dim
        reassociated = h * num_offsets * u * (k + v)
        materialised = k * v * (num_offsets * u + h)
        return "reassociated" if reassociated <= materialised else "materialised"

    def forward(self, x: torch.Tensor, num_slices: int) -> torch.Tensor:
        check_slice_batch(x, num_slices)
        chunk = self.inference_slice_chunk
        if chunk is not None and chunk < num_slices and self._folded_projection_available():
            if chunk < 1:
                raise ValueError(f"inference_slice_chunk must be >= 1 or None, got {chunk}")
            return self._forward_in_slice_chunks(x, num_slices, chunk)
        folded, _, height, width = x.shape
        heads, kd, ud, vd = self.heads, self.key_dim, self.intra_depth, self.value_dim
        q, keys, values = self._project(x)  # (B n h k), (B n u k), (B n u v)

        positional = self.positional_kernel()
        # Content lambda with the positional biases folded in: the bias terms e, f of
        # eq. 4 and 6 are the same |k| x |v| matrix (bias per row) at every pixel.
        keys = keys.reshape(folded, height * width, ud, kd).softmax(dim=1)  # over the slice's pixels
        content = torch.bmm(
            keys.reshape(folded, height * width * ud, kd).transpose(1, 2),
            values.reshape(folded, height * width * ud, vd),
        )  # B k v: sum over the slice's pixels m and u of softmax(K) V^T
        if self.norm_content is not None:
            content = self.norm_content(content)  # B k v, unit RMS per slice times the gain
        if positional is not None:
            content = content + positional[1][:, None]
        y = torch.bmm(q.reshape(folded, height * width * heads, kd), content)  # B (n h) v
        y = y.view(folded, height, width, heads * vd)
        if positional is not None:
            y = self._add_positional(y, q, values, positional[0], positional[2], num_slices, height, width)
        return y.permute(0, 3, 1, 2)  # B (h v) H W, channels-last strides

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One fused 1x1 projection. Returns q (B, H, W, h, k), keys (B, H, W, u, k) before
        the softmax, values (B, H, W, u, v); BatchNorm folded into the GEMM in eval mode."""
        folded, channels, height, width = x.shape
        heads, kd, ud, vd = self.heads, self.key_dim, self.intra_depth, self.value_dim
        pixels = x.permute(0, 2, 3, 1).reshape(-1, channels)  # (B H W) c; a view if channels-last
        w_q, w_k, w_v = (conv.weight.flatten(1) for conv in (self.to_q, self.to_k, self.to_v))
        sizes = (heads * kd, ud * kd, ud * vd)
        if self.training or not self._inference_projection_available():
            projected = pixels @ torch.cat([w_q, w_k, w_v]).T
            q, k, v = projected.split(sizes, dim=1)
            # BatchNorm over (B H W) per channel, exactly BatchNorm2d's statistics.
            if self.query_norm == "batch":
                q = self.norm_q(q.reshape(folded, height, width, -1).permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
            v = self.norm_v(v.reshape(folded, height, width, -1).permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
            k = k.reshape(folded, height, width, -1)
        else:
            # Three GEMMs straight into contiguous tensors (no split copies at inference).
            (w_q, shift_q), (w_k, _), (w_v, shift_v) = self._folded_projection()
            q = _affine(pixels, w_q, shift_q).view(folded, height, width, -1)
            k = (pixels @ w_k.T).view(folded, height, width, -1)
            v = self._values_after_projection(_affine(pixels, w_v, shift_v).view(folded, height, width, -1))
        q = q.reshape(folded, height, width, heads, kd)
        if self.query_norm == "rms":
            q = self.norm_q(q)
        return (
            q,
            k.reshape(folded, height, width, ud, kd),
            v.reshape(folded, height, width, ud, vd),
        )

    def _inference_projection_available(self) -> bool:
        """True when every BatchNorm of the projections has running statistics to fold (a
        GroupNorm on the values needs none: it is applied per slice after the projection,
        ``_values_after_projection``)."""
        norms = [self.norm_v] + ([self.norm_q] if self.query_norm == "batch" else [])
        return all(norm.running_var is not None for norm in norms if isinstance(norm, nn.BatchNorm2d))

    def _folded_projection_available(self) -> bool:
        """True in eval mode without autograd, when the BatchNorms' running statistics exist."""
        return not self.training and not torch.is_grad_enabled() and self._inference_projection_available()

    def _folded_projection(self) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """(weight (out, c), shift (out,) or None) of the q, k, v projections with the eval-mode
        query and value BatchNorms folded in (an RMS query norm and a GroupNorm on the
        values are applied after the projection: they are not fixed affines)."""
        w_q, w_k, w_v = (conv.weight.flatten(1) for conv in (self.to_q, self.to_k, self.to_v))
        value: tuple[torch.Tensor, torch.Tensor | None] = (w_v, None)
        if isinstance(self.norm_v, nn.BatchNorm2d):
            scale_v, shift_v = _bn_affine(self.norm_v)
            value = (w_v * scale_v[:, None], shift_v)
        query: tuple[torch.Tensor, torch.Tensor | None] = (w_q, None)
        if self.query_norm == "batch":
            scale_q, shift_q = _bn_affine(self.norm_q)
            query = (w_q * scale_q[:, None], shift_q)
        return [query, (w_k, None), value]

    def _values_after_projection(self, values: torch.Tensor) -> torch.Tensor:
        """Values (n, H, W, u v) from ``_folded_projection`` -> normalised values, same shape.

        A folded BatchNorm is already in them; a GroupNorm (one group per intra-depth slot,
        statistics of each slice alone) is applied here, per slice, so a chunk of slices
        gets exactly what the whole study would. Runs nn.GroupNorm itself on a
        channels-last view: one implementation of the norm for training and inference.
        """
        if isinstance(self.norm_v, nn.BatchNorm2d):
            return values
        return self.norm_v(values.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)

    def _forward_in_slice_chunks(self, x: torch.Tensor, num_slices: int, chunk: int) -> torch.Tensor:
        """Inference forward, ``chunk`` slices of each study at a time; same output as forward.

        x ((b t), c, H, W) -> ((b t), h v, H, W) channels-last. Each chunk's queries and keys
        are projected for its own slices; values for the chunk and the T//2 slices on each
        side (clipped at the study's ends, where the zero padding is the same as in one pass),
        each slice's values projected once and carried over to the next chunk.
        """
        folded, channels, height, width = x.shape
        heads, kd, ud, vd = self.heads, self.key_dim, self.intra_depth, self.value_dim
        (w_q, shift_q), (w_k, _), (w_v, shift_v) = self._folded_projection()
        positional = self.positional_kernel()
        halo = self.kernel_extent[0] // 2 if positional is not None else 0
        content_bias = positional[1][:, None] if positional is not None else None
        out = None  # ((b t), H, W, h v), in the projections' dtype (autocast may lower it)

        def pixels(first: int, stop: int) -> torch.Tensor:  # (n H W) c; a view if channels-last
            return x[first:stop].permute(0, 2, 3, 1).reshape(-1, channels)

        for study_start in range(0, folded, num_slices):
            study_stop = study_start + num_slices
            values = None  # projected values of slices [values_start, values_start + len)
            values_start = study_start
            for start in range(study_start, study_stop, chunk):
                stop = min(study_stop, start + chunk)
                window_start, window_stop = max(study_start, start - halo), min(study_stop, stop + halo)
                projected_stop = values_start + (values.shape[0] if values is not None else 0)
                fresh = self._values_after_projection(
                    _affine(pixels(projected_stop, window_stop), w_v, shift_v).view(-1, height, width, ud * vd)
                ).reshape(-1, height, width, ud, vd)
                values = fresh if values is None else torch.cat([values[window_start - values_start :], fresh])
                values_start = window_start
                q = _affine(pixels(start, stop), w_q, shift_q).view(-1, height, width, heads, kd)
                if self.query_norm == "rms":
                    q = self.norm_q(q)
                if out is None:
                    out = q.new_empty(folded, height, width, heads * vd)
                keys = (pixels(start, stop) @ w_k.T).view(-1, height * width, ud, kd).softmax(dim=1)
                core = values[start - window_start : stop - window_start]
                size = stop - start
                content = torch.bmm(
                    keys.reshape(size, height * width * ud, kd).transpose(1, 2),
                    core.reshape(size, height * width * ud, vd),
                )  # n k v
                del keys
                if self.norm_content is not None:
                    content = self.norm_content(content)
                if content_bias is not None:
                    content += content_bias
                content = content.to(q.dtype)  # bmm(out=...) is not autocast: one dtype
                y = out[start:stop]  # contiguous: the chunk's rows of the output
                torch.bmm(q.reshape(size, height * width * heads, kd), content, out=y.view(size, -1, vd))
                if positional is not None:
                    slice_padding = (halo - (start - window_start), halo - (window_stop - stop))
                    self._add_positional(
                        y, q, values, positional[0], positional[2], size, height, width, slice_padding
                    )
        return out.permute(0, 3, 1, 2)  # B (h v) H W, channels-last strides

    def _add_positional(
        self,
        y: torch.Tensor,
        q: torch.Tensor,
        values: torch.Tensor,
        kernel: torch.Tensor,
        offsets: list[tuple[int, int, int]],
        num_slices: int,
        height: int,
        width: int,
        value_slice_padding: tuple[int, int] | None = None,
    ) -> torch.Tensor:
        """y + sum_m q_n^T E_{n-m} V_m^T over the positional neighbourhood; y is (B, H, W, h v).

        q holds whole studies of ``num_slices`` slices. ``values`` holds the same slices
        (None) or, for one chunk of a study, those slices plus up to T//2 neighbours on each
        side, with ``value_slice_padding`` = (zero slices before, after) completing them to
        T//2 on each side. Without autograd y is updated in place.
        """
        depth, side = self.kernel_extent
        pt, ps = depth // 2, side // 2
        heads, vd = self.heads, self.value_dim
        rows, kernel_matrix = _kernel_rows(kernel, offsets, depth, side, num_slices, height, width)
        # Under autocast the values come in a lower precision than the kernel parameters;
        # the in-place batched matmuls (not autocast) need one dtype.
        kernel_matrix = kernel_matrix.to(values.dtype)
        padded_shape = (num_slices + 2 * pt, height + 2 * ps, width + 2 * ps)
        plane = padded_shape[1] * padded_shape[2]
        # Pixels of the padded grid; zero slices at both ends of every study keep studies apart.
        margin = pt * plane + ps * padded_shape[2] + ps
        if value_slice_padding is None:
            grid = _padded_flat(values, num_slices, (pt, ps), margin)  # (margin + N + margin) u v
        else:
            grid = _padded_flat(values, values.shape[0], (pt, ps), margin, value_slice_padding)
        no_grad = not (torch.is_grad_enabled() and (q.requires_grad or values.requires_grad or kernel.requires_grad))
        path = self.chosen_positional_path()
        if no_grad:
            self._add_positional_in_place(y, q, grid, kernel_matrix, rows, margin, num_slices, path)
            return y
        q_grid = _padded_flat(q, num_slices, (pt, ps), 0)  # N h k
        chunk = max(1, self.training_chunk_elements // (kernel_matrix.shape[1] * vd))  # pixels gathered at once
        if path == "reassociated":
            weights = torch.matmul(q_grid, kernel_matrix)  # N h (o u): q_n^T E per offset
            out = _NeighbourhoodMatmul.apply(weights, grid, rows, margin, chunk)  # N h v
        else:
            lambdas = _NeighbourhoodMatmul.apply(kernel_matrix, grid, rows, margin, chunk)  # N k v: per-pixel lambdas
            out = torch.bmm(q_grid, lambdas)  # N h v
        interior = out.view(-1, *padded_shape, heads * vd)[:, pt : pt + num_slices, ps : ps + height, ps : ps + width]
        return y + interior.reshape(-1, height, width, heads * vd)

    def _add_positional_in_place(
        self,
        y: torch.Tensor,
        q: torch.Tensor,
        grid: torch.Tensor,
        kernel_matrix: torch.Tensor,
        rows: tuple[_Row, ...],
        margin: int,
        num_slices: int,
        path: str,
    ) -> None:
        """Inference: y (B, H, W, h v) += the positional term, in place, a chunk of pixels
        at a time (whole slices, or rows of one slice), never for the padding.

        q (B, H, W, h, k) and y hold whole studies of ``num_slices`` slices; ``grid`` is the
        zero-padded flat value grid of ``_add_positional``. Each chunk's neighbourhoods are
        gathered into one (n, o u, v) buffer so that the per-pixel product is a single
        batched matmul over all offsets: row by row the matrices are so small (e.g.
        4 x 12 x 8) that ATen runs them in a scalar loop, several times slower than one
        batched BLAS call. Same result as the autograd path.
        """
        folded, height, width = q.shape[:3]
        heads, kd, ud, vd = self.heads, self.key_dim, self.intra_depth, self.value_dim
        depth, side = self.kernel_extent
        pt, ps = depth // 2, side // 2
        line = width + 2 * ps
        plane = (height + 2 * ps) * line
        columns = kernel_matrix.shape[1]
        budget = max(1, self.inference_chunk_elements // (columns * vd))  # pixels per chunk
        slices_per_chunk = max(1, min(num_slices, budget // (height * width)))
        rows_per_chunk = height if slices_per_chunk > 1 else max(1, min(height, budget // width))
        gathered = grid.new_empty(slices_per_chunk * rows_per_chunk * width, columns, vd)
        y_pixels = y.view(folded, height, width, heads, vd)
        for study in range(folded // num_slices):
            for t0 in range(0, num_slices, slices_per_chunk):
                ns = min(slices_per_chunk, num_slices - t0)
                for i0 in range(0, height, rows_per_chunk):
                    nr = min(rows_per_chunk, height - i0)
                    n = ns * nr * width
                    first = margin + (study * (num_slices + 2 * pt) + pt + t0) * plane + (ps + i0) * line + ps
                    _gather_rows(grid, rows, first, gathered[:n].view(ns, nr, width, columns, vd), (plane, line, 1))
                    b = study * num_slices + t0
                    q_chunk = q[b : b + ns, i0 : i0 + nr].reshape(n, heads, kd)
                    y_chunk = y_pixels[b : b + ns, i0 : i0 + nr].view(n, heads, vd)
                    neighbourhoods = gathered[:n]
                    if path == "reassociated":
                        weights = torch.matmul(q_chunk, kernel_matrix)  # n h (o u): q_n^T E
                        y_chunk.baddbmm_(weights, neighbourhoods)
                    else:
                        lambdas = torch.matmul(kernel_matrix, neighbourhoods)  # n k v: per-pixel positional lambdas
                        y_chunk.baddbmm_(q_chunk, lambdas)


def _affine(pixels: torch.Tensor, weight: torch.Tensor, shift: torch.Tensor | None) -> torch.Tensor:
    """pixels (n, c) @ weight (out, c)^T + shift (out,), the shift optional."""
    return pixels @ weight.T if shift is None else torch.addmm(shift, pixels, weight.T)


def _bn_affine(norm: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel (scale, shift) of an eval-mode BatchNorm: y = scale x + shift."""
    scale = torch.rsqrt(norm.running_var + norm.eps)
    if norm.weight is not None:
        scale = scale * norm.weight
    shift = -norm.running_mean * scale
    if norm.bias is not None:
        shift = shift + norm.bias
    return scale, shift


def _padded_flat(
    tensor: torch.Tensor,
    num_slices: int,
    padding: tuple[int, int],
    margin: int,
    slice_padding: tuple[int, int] | None = None,
) -> torch.Tensor:
    """((b t), H, W, a, z) -> ((margin + b (before+t+after) (H+2ps) (W+2ps) + margin), a, z),
    zeros around; (before, after) = ``slice_padding``, default (pt, pt)."""
    pt, ps = padding
    before, after = slice_padding if slice_padding is not None else (pt, pt)
    _, height, width, a, z = tensor.shape
    studies = tensor.shape[0] // num_slices
    shape = (studies, before + num_slices + after, height + 2 * ps, width + 2 * ps)
    # One allocation with the margins included (no padded copy).
    flat = tensor.new_zeros(margin + shape[0] * shape[1] * shape[2] * shape[3] + margin, a, z)
    grid = flat[margin : flat.shape[0] - margin].view(*shape, a, z)
    grid[:, before : before + num_slices, ps : ps + height, ps : ps + width] = tensor.view(
        studies, num_slices, height, width, a, z
    )
    return flat


def _kernel_rows(
    kernel: torch.Tensor,
    offsets: list[tuple[int, int, int]],
    depth: int,
    side: int,
    num_slices: int,
    height: int,
    width: int,
) -> tuple[tuple[_Row, ...], torch.Tensor]:
    """Group active offsets into kernel rows of consecutive dj.

    Returns the rows (flat-grid shifts) and the kernel as a (k, J) matrix whose columns
    are ordered row by row as (dj, u), J = offsets x u.
    """
    plane, line = (height + 2 * (side // 2)) * (width + 2 * (side // 2)), width + 2 * (side // 2)
    rows: list[_Row] = []
    column = 0
    for index, (dt, di, dj) in enumerate(offsets):  # row-major, so each row's dj are consecutive
        shift = (dt - depth // 2) * plane + (di - side // 2) * line + (dj - side // 2)
        last = rows[-1] if rows else None
        if last is not None and shift == last.shift + last.span and offsets[index - 1][:2] == (dt, di):
            rows[-1] = _Row(last.shift, last.span + 1, last.column)
        else:
            rows.append(_Row(shift, 1, column))
        column += 1
    matrix = rearrange(kernel, "k u o -> k (o u)")
    return tuple(rows), matrix
