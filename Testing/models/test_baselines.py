"""The paper's baselines: Attention UNet, 3D UNet (in-plane pooling), TransUNet.

Shapes, gradients and batch independence of every registered model are checked in
test_registry.py; this file checks what is specific to each baseline.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_registry import SMALL

from LambdaSegmentLib.models import create_model
from LambdaSegmentLib.models.attention_unet import AttentionGate
from LambdaSegmentLib.models.unet_3d import UNet3d

# Computed once with `sum(p.numel() for p in create_model(name).parameters())`.
DEFAULT_PARAMETER_COUNTS = {
    "attention_unet": 32_088_389,  # the conv UNet's 31,042,945 + four gates (1,045,444)
    "unet_3d": 21_807_937,  # widths 32..512, kernel depths (1, 3, 3, 3, 3)
    "transunet": 7_374_769,  # CNN 32..256, hidden 256, 4 layers, 8 heads, MLP 1024
}


@pytest.mark.parametrize(("name", "expected"), sorted(DEFAULT_PARAMETER_COUNTS.items()))
def test_default_parameter_counts(name: str, expected: int) -> None:
    assert sum(p.numel() for p in create_model(name).parameters()) == expected


def test_attention_unet_is_the_conv_unet_plus_gates() -> None:
    model = create_model("attention_unet")
    gate_parameters = sum(p.numel() for up in model.ups for p in up.gate.parameters())
    total = sum(p.numel() for p in model.parameters())
    assert total - gate_parameters == sum(p.numel() for p in create_model("unet").parameters())


# --- slice receptive radius -------------------------------------------------------------


def perturbation_changes_slice(model: torch.nn.Module, num_slices: int, target: int, perturbed: int) -> bool:
    """Whether changing input slice ``perturbed`` changes output slice ``target`` (eval mode)."""
    x = torch.randn(1, 2, num_slices, 16, 16, dtype=torch.float64)
    x_perturbed = x.clone()
    x_perturbed[:, :, perturbed] += 3.0 * torch.randn_like(x[:, :, perturbed])
    with torch.no_grad():
        change = (model(x_perturbed)[:, :, target] - model(x)[:, :, target]).abs().max()
    return bool(change > 1e-9)


@pytest.mark.parametrize(
    ("kernel_depths", "radius"),
    [((1, 3, 3, 3, 3), 14), ((3, 3, 3, 3, 3), 18), ((1, 1, 1, 1, 3), 2), ((1, 1, 1, 1, 1), 0)],
)
def test_unet_3d_slice_receptive_radius_is_exact(kernel_depths: tuple[int, ...], radius: int) -> None:
    model = UNet3d(widths=(4, 4, 8, 8, 8), kernel_depths=kernel_depths).double().eval()
    assert model.slice_receptive_radius == radius
    # Output slice in the middle of 2r + 3 slices: the slices at distance r + 1 on either
    # side must not matter, those at distance r do.
    num_slices, target = 2 * radius + 3, radius + 1
    for beyond in (target - radius - 1, target + radius + 1):
        assert not perturbation_changes_slice(model, num_slices, target, beyond)
    for within in (target - radius, target + radius):
        assert perturbation_changes_slice(model, num_slices, target, within)


def test_unet_3d_default_radius() -> None:
    assert create_model("unet_3d").slice_receptive_radius == 14


@pytest.mark.parametrize("name", ["attention_unet", "transunet"])
def test_2d_baselines_have_radius_zero_and_never_mix_slices(name: str) -> None:
    model = create_model(name, **SMALL[name]).double().eval()
    assert model.slice_receptive_radius == 0
    assert not perturbation_changes_slice(model, num_slices=3, target=1, perturbed=0)
    assert not perturbation_changes_slice(model, num_slices=3, target=1, perturbed=2)
    assert perturbation_changes_slice(model, num_slices=3, target=1, perturbed=1)


def test_unet_3d_refuses_invalid_kernel_depths() -> None:
    with pytest.raises(ValueError, match="1 or 3"):
        UNet3d(kernel_depths=(1, 3, 5, 3, 3))
    with pytest.raises(ValueError, match="one kernel depth per level"):
        UNet3d(kernel_depths=(1, 3))


# --- attention gates --------------------------------------------------------------------


def test_attention_gate_coefficients_lie_in_unit_interval_at_skip_resolution() -> None:
    gate = AttentionGate(skip_channels=6, gating_channels=12, inter_channels=3)
    skip, gating = 10.0 * torch.randn(2, 6, 16, 24), 10.0 * torch.randn(2, 12, 8, 12)  # large: saturating
    alpha = gate.coefficients(skip, gating)
    assert alpha.shape == (2, 1, 16, 24)
    assert alpha.min() >= 0.0 and alpha.max() <= 1.0
    torch.testing.assert_close(gate(skip, gating), skip * alpha)


def test_attention_gate_starts_unsaturated() -> None:
    """Deliberate initialisation: coefficients start spread around 0.5, not stuck at 0 or 1."""
    gate = AttentionGate(skip_channels=64, gating_channels=128, inter_channels=32)
    alpha = gate.coefficients(torch.randn(4, 64, 32, 32).relu(), torch.randn(4, 128, 16, 16).relu())
    assert 0.3 < alpha.mean() < 0.7
    assert alpha.std() > 0.02 and (alpha > 0.05).all() and (alpha < 0.95).all()


def test_attention_unet_exposes_gate_maps_in_unit_interval() -> None:
    model = create_model("attention_unet", **SMALL["attention_unet"]).eval()
    x = torch.randn(2, 2, 3, 32, 48)
    with torch.no_grad():
        logits, alphas = model.forward_with_attention(x)
        torch.testing.assert_close(model(x), logits)
    assert [a.shape for a in alphas] == [(2, 1, 3, 32 // 2**level, 48 // 2**level) for level in (3, 2, 1, 0)]
    for alpha in alphas:
        assert alpha.min() >= 0.0 and alpha.max() <= 1.0


# --- TransUNet position embeddings ------------------------------------------------------


def test_transunet_runs_at_two_in_plane_sizes_with_interpolated_position_embeddings() -> None:
    model = create_model("transunet", **SMALL["transunet"], pos_grid=(4, 4))
    for height, width in ((64, 64), (48, 80)):  # 4 x 4 reference tokens, then 3 x 5
        x = torch.randn(1, 2, 2, height, width)
        logits = model(x)
        assert logits.shape == (1, 1, 2, height, width)
        assert torch.isfinite(logits).all()
        model.zero_grad()
        logits.mean().backward()
        # The learned reference grid receives gradient through the interpolation too.
        assert model.net2d.pos_embed.grad.abs().sum() > 0


def test_transunet_position_embeddings_reference_grid_is_used_as_learned() -> None:
    net = create_model("transunet", **SMALL["transunet"], pos_grid=(4, 4)).net2d
    hidden = net.pos_embed.shape[1]
    torch.testing.assert_close(net.position_embeddings(4, 4), net.pos_embed.reshape(1, hidden, 16).transpose(1, 2))


def test_transunet_interpolated_position_embeddings_keep_token_order() -> None:
    """Tokens are flattened row-major ("(h w)"); embeddings that vary along rows only must stay
    constant within each row of the resampled grid and keep their row ordering."""
    net = create_model("transunet", **SMALL["transunet"], pos_grid=(4, 4)).net2d
    with torch.no_grad():
        rows = torch.arange(4, dtype=torch.float32)
        net.pos_embed.copy_(rows[None, None, :, None].expand_as(net.pos_embed))
        pos = net.position_embeddings(6, 10).reshape(6, 10, -1)  # (h, w, hidden)
    torch.testing.assert_close(pos, pos[:, :1].expand_as(pos))
    assert (pos[1:, 0, 0] > pos[:-1, 0, 0]).all()
    expected = F.interpolate(net.pos_embed, size=(6, 10), mode="bicubic", align_corners=False)
    torch.testing.assert_close(pos, expected[0].permute(1, 2, 0))


def test_transunet_transformer_layers_start_different() -> None:
    """nn.TransformerEncoder clones one layer; each must be re-initialised on its own."""
    net = create_model("transunet").net2d
    first, second = net.transformer.layers[0], net.transformer.layers[1]
    assert not torch.equal(first.self_attn.in_proj_weight, second.self_attn.in_proj_weight)
    assert not torch.equal(first.linear1.weight, second.linear1.weight)


def test_transunet_refuses_hidden_not_divisible_by_heads() -> None:
    with pytest.raises(ValueError, match="multiple of heads"):
        create_model("transunet", hidden=100, heads=8)
