"""Every registered model: one calling convention, finite gradients, the authors' sizes."""

from __future__ import annotations

import pytest
import torch

from LambdaSegmentLib.models import available_models, create_model

# Small widths keep the parameterised shape/gradient checks quick; the paper's sizes are
# checked separately below.
SMALL = {
    "lambda_unet": dict(widths=(8, 16, 32, 32, 64), value_dim=8),
    "lambda_unet_2d": dict(widths=(8, 16, 32, 32, 64), value_dim=8),
    "lambda_unet_3d": dict(widths=(8, 16, 32, 32, 64), value_dim=8),
    "unet": dict(widths=(8, 16, 32, 32, 64)),
    "attention_unet": dict(widths=(8, 16, 32, 32, 64)),
    "unet_3d": dict(widths=(4, 8, 16, 16, 32)),
    "transunet": dict(
        cnn_widths=(8, 16, 16, 32), stage_blocks=(1, 1, 1), hidden=32, layers=2, heads=4, mlp=64,
        decoder_widths=(16, 16, 8, 8),
    ),
}


def small_config(name: str) -> dict:
    return SMALL.get(name, {})


def calibrated(model: torch.nn.Module) -> torch.nn.Module:
    """Fill BatchNorm running statistics from one random batch, then switch to eval mode."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.momentum = None  # cumulative average
    with torch.no_grad():
        model.train()(torch.randn(2, 2, 4, 32, 32))
    return model.eval()


@pytest.mark.parametrize("name", available_models())
@pytest.mark.parametrize("num_slices", [1, 5])
def test_forward_shape_and_finite_gradients(name: str, num_slices: int) -> None:
    model = create_model(name, **small_config(name))
    x = torch.randn(2, 2, num_slices, 32, 48, requires_grad=True)
    logits = model(x)
    assert logits.shape == (2, 1, num_slices, 32, 48)
    logits.mean().backward()
    assert torch.isfinite(x.grad).all()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("name", available_models())
def test_in_plane_size_not_divisible_by_16_is_refused(name: str) -> None:
    model = create_model(name, **small_config(name))
    with pytest.raises(ValueError, match="divisible by 16"):
        model(torch.randn(1, 2, 2, 40, 32))


@pytest.mark.parametrize("name", available_models())
def test_studies_in_a_batch_are_independent_in_eval_mode(name: str) -> None:
    model = calibrated(create_model(name, **small_config(name)))
    a, b = torch.randn(1, 2, 4, 32, 32), torch.randn(1, 2, 4, 32, 32)
    with torch.no_grad():
        together = model(torch.cat([a, b]))
        alone = model(b)
    assert torch.isfinite(alone).all() and alone.std() > 1e-3
    torch.testing.assert_close(together[1:], alone, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("lambda_unet", 13_848_193), ("lambda_unet_2d", 13_846_529), ("unet", 31_042_945)],
)
def test_paper_configuration_parameter_counts_equal_the_authors(name: str, expected: int) -> None:
    assert sum(p.numel() for p in create_model(name).parameters()) == expected


def test_unknown_model_name_lists_the_available_ones() -> None:
    with pytest.raises(ValueError, match="available: .*lambda_unet"):
        create_model("lambdaunet")


def test_paper_lambda_unet_runs_on_a_small_study() -> None:
    model = create_model("lambda_unet").eval()
    with torch.no_grad():
        assert model(torch.randn(1, 2, 3, 32, 32)).shape == (1, 1, 3, 32, 32)
