"""LambdaUNet with ``norm="group"``: every slice normalised by its own statistics, the same in
training and at inference (no running statistics to differ between windows and whole studies)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from LambdaSegmentLib.models import batch_norms, create_model
from LambdaSegmentLib.models.fusion import optimise_for_inference

SMALL = dict(widths=[8, 16, 16, 16, 16], value_dim=4, query_norm="rms")


def group_norm_model() -> nn.Module:
    torch.manual_seed(0)
    model = create_model("lambda_unet", norm="group", **SMALL)
    with torch.no_grad():  # non-trivial affine parameters, so that a wrong normalisation shows
        for module in model.modules():
            if isinstance(module, nn.GroupNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    return model


def test_group_norm_model_has_no_batch_norm_and_the_paper_default_is_unchanged() -> None:
    model = group_norm_model()
    assert batch_norms(model) == []
    groups = [m for m in model.modules() if isinstance(m, nn.GroupNorm)]
    # every block normalises: stem 2, 4 down blocks x (2 after Lambda+ + 2 values), 4 up blocks x 2
    assert len(groups) == 2 + 4 * 4 + 4 * 2
    assert all(m.num_channels % m.num_groups == 0 for m in groups)
    default = create_model("lambda_unet", **SMALL)
    assert not any(isinstance(m, nn.GroupNorm) for m in default.modules())
    # same parameter count: GroupNorm has the same affine weights as BatchNorm
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in default.parameters())


def test_training_and_inference_normalise_identically() -> None:
    model = group_norm_model()
    x = torch.randn(2, 2, 5, 32, 32)
    with torch.no_grad():
        trained = model.train()(x)
        inferred = model.eval()(x)
    torch.testing.assert_close(trained, inferred)


def test_a_study_does_not_depend_on_the_others_in_its_batch_during_training() -> None:
    model = group_norm_model().train()
    x = torch.randn(2, 2, 5, 32, 32)
    with torch.no_grad():
        together = model(x)
        alone = model(x[:1])
        other = model(torch.cat([x[:1], 10.0 * torch.randn(1, 2, 5, 32, 32)]))
    torch.testing.assert_close(together[:1], alone, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(other[:1], alone, atol=1e-5, rtol=1e-4)


def test_inference_copy_matches_the_eval_model() -> None:
    model = group_norm_model().eval()
    x = torch.randn(1, 2, 6, 48, 32)
    with torch.no_grad():
        expected = model(x)
        actual = optimise_for_inference(model)(x)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def test_unknown_norm_is_refused() -> None:
    with pytest.raises(ValueError, match="norm must be one of"):
        create_model("lambda_unet", norm="layer", **SMALL)


def test_stem_norm_puts_group_norm_in_the_stem_and_first_encoder_block_only() -> None:
    model = create_model("lambda_unet", stem_norm="group", **SMALL)
    groups = {name for name, m in model.named_modules() if isinstance(m, nn.GroupNorm)}
    assert groups == {"inc.1", "inc.4", "downs.0.norm1", "downs.0.norm2", "downs.0.lambda1.norm_v", "downs.0.lambda2.norm_v"}
    assert not any(name.startswith(("inc", "downs.0.")) for name, m in model.named_modules() if isinstance(m, nn.BatchNorm2d))
    assert len(batch_norms(model)) == len(batch_norms(create_model("lambda_unet", **SMALL))) - len(groups)
    # None keeps the model exactly as before (every package up to 2.1.0)
    torch.manual_seed(0)
    plain = create_model("lambda_unet", **SMALL).state_dict()
    torch.manual_seed(0)
    unset = create_model("lambda_unet", stem_norm=None, **SMALL).state_dict()
    assert plain.keys() == unset.keys() and all(torch.equal(plain[k], unset[k]) for k in plain)


@pytest.mark.parametrize("slice_chunk", [None, 2])
def test_stem_norm_model_optimised_for_inference_matches_the_eval_model(slice_chunk: int | None) -> None:
    """One pass, and the engine's copy (``slice_chunk``: stem, decoder and every Lambda+ layer,
    the GroupNorm-valued ones included, a few slices at a time)."""
    torch.manual_seed(0)
    model = create_model("lambda_unet", stem_norm="group", **SMALL)
    with torch.no_grad():  # non-trivial statistics and affines in both kinds of layer
        for module in model.modules():
            if isinstance(module, (nn.GroupNorm, nn.BatchNorm2d)):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.normal_(0.0, 0.3)
                module.running_var.uniform_(0.5, 2.0)
    model.eval()
    x = torch.randn(1, 2, 6, 48, 32)
    with torch.no_grad():
        torch.testing.assert_close(optimise_for_inference(model, slice_chunk=slice_chunk)(x), model(x), atol=1e-4, rtol=1e-4)
