"""Lambda+ against a per-pixel implementation of the paper's equations 1-7."""

from __future__ import annotations

import itertools

import pytest
import torch
from einops import rearrange

from LambdaSegmentLib.models import LambdaPlus


def make_layer(**config: object) -> LambdaPlus:
    """A small Lambda+ in eval mode with non-trivial BatchNorm statistics and biases."""
    defaults = dict(in_channels=3, out_channels=4, key_dim=3, intra_depth=2, value_dim=2, local_size=3, slice_context=3)
    layer = LambdaPlus(**{**defaults, **config}).double()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        batch_norms = [norm for norm in (layer.norm_q, layer.norm_v) if isinstance(norm, torch.nn.BatchNorm2d)]
        if not isinstance(layer.norm_q, torch.nn.BatchNorm2d):
            layer.norm_q.weight.copy_(torch.randn(layer.norm_q.weight.shape, generator=generator, dtype=torch.float64))
        if isinstance(layer.norm_v, torch.nn.GroupNorm):
            layer.norm_v.weight.copy_(torch.randn(layer.norm_v.weight.shape, generator=generator, dtype=torch.float64))
            layer.norm_v.bias.copy_(torch.randn(layer.norm_v.bias.shape, generator=generator, dtype=torch.float64))
        if layer.norm_content is not None:
            layer.norm_content.weight.copy_(torch.randn(layer.norm_content.weight.shape, generator=generator, dtype=torch.float64))
        for norm in batch_norms:
            norm.running_mean.copy_(torch.randn(norm.num_features, generator=generator, dtype=torch.float64))
            norm.running_var.copy_(torch.rand(norm.num_features, generator=generator, dtype=torch.float64) + 0.5)
            norm.weight.copy_(torch.randn(norm.num_features, generator=generator, dtype=torch.float64))
            norm.bias.copy_(torch.randn(norm.num_features, generator=generator, dtype=torch.float64))
        for bias in (layer.local_bias, layer.slice_bias):
            if bias is not None:
                bias.copy_(torch.randn(bias.shape, generator=generator, dtype=torch.float64))
    return layer.eval()


def reference_queries(layer: LambdaPlus, x: torch.Tensor) -> torch.Tensor:
    """q ((b t), H, W, heads, k): the projection, then BatchNorm per channel ("batch") or each
    head's k-vector divided by its root mean square and scaled by the learned gain ("rms")."""
    q = layer.to_q(x)
    if layer.query_norm == "batch":
        return rearrange(layer.norm_q(q), "B (h k) H W -> B H W h k", h=layer.heads)
    q = rearrange(q, "B (h k) H W -> B H W h k", h=layer.heads)
    rms = (q.square().mean(dim=-1, keepdim=True) + layer.norm_q.eps).sqrt()
    return q / rms * layer.norm_q.weight


def reference_lambda_plus(layer: LambdaPlus, x: torch.Tensor, num_slices: int) -> torch.Tensor:
    """Equations 1-7 evaluated pixel by pixel with explicit loops over n and m.

    x: ((b t), c, H, W) -> ((b t), heads * v, H, W). Written from the paper, not from the layer.
    """
    heads, kd, ud, vd = layer.heads, layer.key_dim, layer.intra_depth, layer.value_dim
    folded, _, height, width = x.shape
    q = reference_queries(layer, x)
    keys = rearrange(layer.to_k(x), "B (u k) H W -> B H W k u", u=ud)
    values = rearrange(layer.norm_v(layer.to_v(x)), "B (u v) H W -> B H W v u", u=ud)
    # Keys normalised by softmax over the pixels m of the same slice.
    keys = rearrange(keys, "B H W k u -> B (H W) k u").softmax(dim=1).reshape(keys.shape)
    r, t_ctx = layer.local_size, layer.slice_context
    out = torch.zeros(folded, heads * vd, height, width, dtype=x.dtype)
    for slice_index, i, j in itertools.product(range(folded), range(height), range(width)):
        study, t = divmod(slice_index, num_slices)
        # Global lambda (eq. 1-2): sum over every pixel m of the slice of K_m V_m^T.
        lam = torch.zeros(kd, vd, dtype=x.dtype)
        for mi, mj in itertools.product(range(height), range(width)):
            lam += keys[slice_index, mi, mj] @ values[slice_index, mi, mj].T
        if layer.content_norm == "rms":  # the slice's content lambda to unit RMS over its k v entries, times the gain
            lam = lam / (lam.square().mean() + layer.norm_content.eps).sqrt() * layer.norm_content.weight
        if layer.local_3d:
            # 3D local context R x R x T: E_{nm} per (dt, di, dj).
            for dt, di, dj in itertools.product(range(t_ctx), range(r), range(r)):
                mt, mi, mj = t + dt - t_ctx // 2, i + di - r // 2, j + dj - r // 2
                if 0 <= mt < num_slices and 0 <= mi < height and 0 <= mj < width:
                    e_nm = layer.local_weight[:, :, dt, di, dj]  # k x u
                    lam += e_nm @ values[study * num_slices + mt, mi, mj].T
            lam += layer.local_bias[:, None]
        else:
            if r:  # local lambda (eq. 3-4): R x R around n in the same slice
                for di, dj in itertools.product(range(r), range(r)):
                    mi, mj = i + di - r // 2, j + dj - r // 2
                    if 0 <= mi < height and 0 <= mj < width:
                        lam += layer.local_weight[:, :, 0, di, dj] @ values[slice_index, mi, mj].T
                lam += layer.local_bias[:, None]
            if t_ctx:  # inter-slice lambda (eq. 5-6): same 2D location in T slices of the same study
                for dt in range(t_ctx):
                    mt = t + dt - t_ctx // 2
                    if 0 <= mt < num_slices:
                        lam += layer.slice_weight[:, :, dt, 0, 0] @ values[study * num_slices + mt, i, j].T
                lam += layer.slice_bias[:, None]
        # Applying the lambdas (eq. 7): y_n = q_n^T lambda, per head.
        y = torch.stack([q[slice_index, i, j, h] @ lam for h in range(heads)])  # h x v
        out[slice_index, :, i, j] = y.flatten()
    return out


CONFIGS = {
    "lambda_unet": dict(),
    "lambda_unet_2d": dict(slice_context=0),
    "lambda_unet_3d": dict(local_3d=True),
    "no_local": dict(local_size=0),
    "wide_context": dict(local_size=5, slice_context=5, key_dim=4, intra_depth=3),
    "rms_queries": dict(query_norm="rms"),
    "rms_queries_3d": dict(query_norm="rms", local_3d=True),
    "rms_content": dict(query_norm="rms", content_norm="rms"),
    "rms_content_3d": dict(content_norm="rms", local_3d=True),
    "group_values": dict(query_norm="rms", value_norm="group"),
    "group_values_3d": dict(value_norm="group", local_3d=True),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_equals_per_pixel_reference_of_equations_1_to_7(name: str) -> None:
    layer = make_layer(**CONFIGS[name])
    num_slices = 4
    x = torch.randn(2 * num_slices, 3, 5, 6, dtype=torch.float64)
    with torch.no_grad():
        expected = reference_lambda_plus(layer, x, num_slices)
        actual = layer(x, num_slices)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def test_float32_matches_reference_within_1e_5() -> None:
    layer = make_layer()
    x = torch.randn(6, 3, 5, 5, dtype=torch.float64)
    with torch.no_grad():
        expected = reference_lambda_plus(layer, x, 3)
        actual = layer.float()(x.float(), 3)
    torch.testing.assert_close(actual.double(), expected, atol=1e-5, rtol=1e-4)


def _output_change(layer: LambdaPlus, x: torch.Tensor, num_slices: int, where: tuple[int, ...]) -> torch.Tensor:
    """Per-pixel max |change| of the output after perturbing x at (slice, :, i, j)."""
    with torch.no_grad():
        before = layer(x, num_slices)
        perturbed = x.clone()
        perturbed[where[0], :, where[1], where[2]] += 10.0
        after = layer(perturbed, num_slices)
    return (after - before).abs().amax(dim=1)  # (B, H, W)


def test_inter_slice_context_is_the_same_pixel_in_t_adjacent_slices_only() -> None:
    layer = make_layer(slice_context=3)
    num_slices = 6
    x = torch.randn(num_slices, 3, 6, 6, dtype=torch.float64)
    target_slice, ti, tj = 2, 3, 3
    # Another 2D location in the adjacent slice: no effect on the target pixel.
    change = _output_change(layer, x, num_slices, (target_slice + 1, 0, 0))
    assert change[target_slice, ti, tj] == 0
    # The same 2D location in the adjacent slices (within T): an effect.
    for neighbour in (target_slice - 1, target_slice + 1):
        change = _output_change(layer, x, num_slices, (neighbour, ti, tj))
        assert change[target_slice, ti, tj] > 1e-6
    # A slice farther than T // 2: no effect, even at the same 2D location.
    change = _output_change(layer, x, num_slices, (target_slice + 2, ti, tj))
    assert change[target_slice].abs().max() == 0


def test_lambda_unet_2d_layer_ignores_other_slices() -> None:
    layer = make_layer(slice_context=0)
    x = torch.randn(4, 3, 5, 5, dtype=torch.float64)
    change = _output_change(layer, x, 4, (1, 2, 2))
    assert change[[0, 2, 3]].abs().max() == 0


def test_global_lambda_is_shared_by_all_pixels_of_a_slice() -> None:
    """With positional lambdas off, y_n = q_n^T lambda^G: one k x v matrix fits every pixel of a slice."""
    layer = make_layer(local_size=0, slice_context=0)
    x = torch.randn(3, 3, 6, 6, dtype=torch.float64)
    with torch.no_grad():
        y = rearrange(layer(x, 3), "B (h v) H W -> B h (H W) v", h=layer.heads)
        q = rearrange(reference_queries(layer, x), "B H W h k -> B h (H W) k")
    for s in range(3):
        # All heads and all pixels of slice s share one lambda: stack them and solve once.
        q_s, y_s = q[s].reshape(-1, layer.key_dim), y[s].reshape(-1, layer.value_dim)
        lam = torch.linalg.lstsq(q_s, y_s).solution
        torch.testing.assert_close(q_s @ lam, y_s, atol=1e-9, rtol=1e-9)
    # And the slices really do have different lambdas.
    lam0 = torch.linalg.lstsq(q[0].reshape(-1, layer.key_dim), y[0].reshape(-1, layer.value_dim)).solution
    assert not torch.allclose(q[1].reshape(-1, layer.key_dim) @ lam0, y[1].reshape(-1, layer.value_dim))


def test_studies_in_one_batch_never_mix() -> None:
    layer = make_layer()
    study_a = torch.randn(4, 3, 5, 5, dtype=torch.float64)
    study_b = torch.randn(4, 3, 5, 5, dtype=torch.float64)
    with torch.no_grad():
        together = layer(torch.cat([study_a, study_b]), 4)
        torch.testing.assert_close(together[:4], layer(study_a, 4), atol=1e-12, rtol=0)
        torch.testing.assert_close(together[4:], layer(study_b, 4), atol=1e-12, rtol=0)


def test_batch_that_cannot_hold_the_slice_count_is_refused() -> None:
    layer = make_layer()
    with pytest.raises(ValueError, match="cannot hold whole studies of 4 slices"):
        layer(torch.randn(6, 3, 5, 5, dtype=torch.float64), 4)


def test_gradients_reach_every_parameter() -> None:
    layer = make_layer().train()
    layer(torch.randn(6, 3, 5, 5, dtype=torch.float64), 3).square().sum().backward()
    for name, parameter in layer.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize("query_norm", ["batch", "rms"])
def test_gradients_reach_every_parameter_with_either_query_norm(query_norm: str) -> None:
    layer = make_layer(query_norm=query_norm).train()
    layer(torch.randn(6, 3, 5, 5, dtype=torch.float64), 3).square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters())


def test_rms_queries_make_the_layer_linear_in_its_input_scale() -> None:
    """BatchNorm queries (eval: affine) give y quadratic in x; unit-RMS queries give y linear:
    scaling x by s scales y by about s, not s^2 (here exactly s without the BatchNorm shifts)."""
    x = torch.randn(6, 3, 5, 5, dtype=torch.float64)
    ratios = {}
    for query_norm in ("batch", "rms"):
        layer = make_layer(query_norm=query_norm)
        with torch.no_grad():
            for norm in (layer.norm_q, layer.norm_v):  # no affine shift: pure scaling behaviour
                if isinstance(norm, torch.nn.BatchNorm2d):
                    norm.running_mean.zero_()
                    norm.bias.zero_()
            for bias in (layer.local_bias, layer.slice_bias):
                bias.zero_()
            small, large = layer(x, 3), layer(1000.0 * x, 3)
        # Keys' softmax changes with scale too; compare magnitudes, not values.
        ratios[query_norm] = float(large.abs().max() / small.abs().max())
    assert 1e5 < ratios["batch"] < 1e7
    assert 1e2 < ratios["rms"] < 1e4


def test_unknown_query_norm_is_refused() -> None:
    with pytest.raises(ValueError, match="query_norm must be one of"):
        LambdaPlus(3, 4, key_dim=3, intra_depth=2, value_dim=2, query_norm="layer")


def test_lambda_unet_with_rms_queries_stays_finite_where_batch_norm_queries_overflow() -> None:
    """Eight stacked Lambda+ layers square an out-of-range input's scale eight times with the
    paper's BatchNorm queries (eval mode); with unit-RMS queries the growth is linear."""
    from LambdaSegmentLib.models import create_model

    x = 1e3 * torch.randn(1, 2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    outputs = {}
    for query_norm in ("batch", "rms"):
        torch.manual_seed(0)
        model = create_model("lambda_unet", widths=[8, 16, 16, 16, 16], value_dim=4, query_norm=query_norm).eval()
        with torch.no_grad():
            outputs[query_norm] = model(x)
    assert not torch.isfinite(outputs["batch"]).all()
    assert torch.isfinite(outputs["rms"]).all()


def test_content_norm_is_off_by_default_and_adds_no_tensors() -> None:
    """Every package so far was trained without it: their state dicts must load unchanged."""
    from LambdaSegmentLib.models import create_model

    default = create_model("lambda_unet", widths=[8, 16, 16, 16, 16], value_dim=4)
    assert all(layer.content_norm == "none" and layer.norm_content is None
               for layer in default.modules() if isinstance(layer, LambdaPlus))
    assert not any("norm_content" in key for key in default.state_dict())
    normalised = create_model("lambda_unet", widths=[8, 16, 16, 16, 16], value_dim=4, content_norm="rms")
    added = set(normalised.state_dict()) - set(default.state_dict())
    assert len(added) == 8 and all(key.endswith("norm_content.weight") for key in added)
    assert set(default.state_dict()) <= set(normalised.state_dict())


def test_rms_content_makes_a_slices_global_context_independent_of_its_scale() -> None:
    """With uniform keys (zero key projection), no shifts and no positional lambdas, the global
    term q_n^T lambda^G_t grows linearly with a slice's activations (unit-RMS queries): the
    per-slice loop that lets one slice run away from its neighbours. With a unit-RMS content
    lambda the slice's output does not change at all when its input is scaled."""
    x = torch.randn(3, 3, 5, 5, dtype=torch.float64)
    scaled = x.clone()
    scaled[1] *= 50.0
    outputs = {}
    for content_norm in ("none", "rms"):
        layer = make_layer(query_norm="rms", content_norm=content_norm, local_size=0, slice_context=0)
        with torch.no_grad():
            layer.to_k.weight.zero_()
            layer.norm_v.running_mean.zero_()
            layer.norm_v.bias.zero_()
            for norm in (layer.norm_q, layer.norm_content):
                if norm is not None:
                    norm.eps = 1e-30  # exact scale invariance of the RMS (the default eps bends it at 1e-5)
            outputs[content_norm] = (layer(x, 3), layer(scaled, 3))
    before, after = outputs["none"]
    torch.testing.assert_close(after[1], 50.0 * before[1], atol=1e-9, rtol=1e-9)
    before, after = outputs["rms"]
    torch.testing.assert_close(after[1], before[1], atol=1e-9, rtol=1e-9)
    # The other slices never see slice 1 (global lambdas are per slice): unchanged either way.
    torch.testing.assert_close(after[[0, 2]], before[[0, 2]], atol=0, rtol=0)


def test_gradients_reach_every_parameter_with_rms_content() -> None:
    layer = make_layer(query_norm="rms", content_norm="rms").train()
    layer(torch.randn(6, 3, 5, 5, dtype=torch.float64), 3).square().sum().backward()
    assert layer.norm_content.weight.grad is not None and layer.norm_content.weight.grad.abs().sum() > 0
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters())


def test_unknown_content_norm_is_refused() -> None:
    with pytest.raises(ValueError, match="content_norm must be one of"):
        LambdaPlus(3, 4, key_dim=3, intra_depth=2, value_dim=2, content_norm="batch")
