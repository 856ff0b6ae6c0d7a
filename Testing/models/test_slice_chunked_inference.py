"""Inference in chunks of slices gives the one-pass result.

``LambdaPlus.inference_slice_chunk`` runs a Lambda+ layer a few slices of each study at a
time (values of the T//2 neighbouring slices as halo); ``optimise_for_inference(...,
slice_chunk=n)`` runs the 2D stem and decoder of the UNet family and every Lambda+ layer
n slices at a time, with the BatchNorms after Lambda+ layers applied in place. The peak
memory this saves is measured by ``benchmarks/inference_speed.py`` ("chunked" rows).
"""

from __future__ import annotations

import pytest
import torch

from LambdaSegmentLib.models import LambdaPlus, create_model
from LambdaSegmentLib.models.fusion import (
    InPlaceBatchNorm,
    SliceChunkedUNet,
    batch_norms_in_place,
    optimise_for_inference,
)
from LambdaSegmentLib.models.lambda_unet import LambdaDown

from test_lambda_plus_optimised import random_configuration, randomise_statistics  # this folder is on sys.path

SMALL_WIDTHS = (8, 16, 32, 64, 128)


@pytest.mark.parametrize("path", ["reassociated", "materialised"])
@pytest.mark.parametrize("seed", range(12))
def test_lambda_plus_in_chunks_of_slices_equals_the_whole_study(seed: int, path: str) -> None:
    """Every chunk size from 1 slice to the whole study, random heads, |k|, |u|, |v|, R, T
    (2.5D and 3D local context), several studies in a batch: the same output (float64)."""
    config = random_configuration(seed)
    torch.manual_seed(seed)
    layer = LambdaPlus(**config["layer"]).double().eval()
    randomise_statistics(layer, seed)
    layer.positional_path = path
    num_slices = config["slices"] + 2  # at least 3, so that chunks have inner boundaries
    x = torch.randn(config["studies"] * num_slices, config["layer"]["in_channels"], config["height"],
                    config["width"], dtype=torch.float64)
    with torch.inference_mode():
        whole = layer(x, num_slices)
        for chunk in range(1, num_slices + 1):
            layer.inference_slice_chunk = chunk
            torch.testing.assert_close(layer(x, num_slices), whole, atol=1e-12, rtol=1e-12,
                                       msg=lambda m: f"chunk {chunk}: {m}")


def test_lambda_plus_chunks_only_without_autograd_in_eval_mode() -> None:
    """Training (batch statistics over the whole batch) and autograd ignore the setting."""
    torch.manual_seed(0)
    layer = LambdaPlus(3, 8, key_dim=4, intra_depth=2, value_dim=4).double()
    x = torch.randn(2 * 5, 3, 6, 6, dtype=torch.float64)
    whole_train = layer.train()(x, 5)
    layer.inference_slice_chunk = 2
    torch.testing.assert_close(layer(x, 5), whole_train, atol=1e-12, rtol=1e-12)
    layer.eval()
    with_grad = layer(x.clone().requires_grad_(True), 5)
    assert with_grad.requires_grad
    with torch.no_grad():
        torch.testing.assert_close(layer(x, 5), with_grad.detach(), atol=1e-12, rtol=1e-12)
        layer.inference_slice_chunk = 0
        with pytest.raises(ValueError, match="inference_slice_chunk"):
            layer(x, 5)


@pytest.mark.parametrize("slice_chunk", [1, 2, 3, 5])
def test_group_norm_values_in_chunks_of_slices_equal_the_training_computation(slice_chunk: int) -> None:
    """A GroupNorm on the values (statistics of each slice alone) is applied after the
    projection at inference, so the layer runs in chunks of slices like a BatchNorm one.
    With RMS queries the layer has no running statistics: train mode computes the same
    function through nn.GroupNorm on the whole batch, the reference here (float64)."""
    torch.manual_seed(slice_chunk)
    layer = LambdaPlus(5, 16, key_dim=4, intra_depth=2, value_dim=8, query_norm="rms", value_norm="group").double()
    with torch.no_grad():  # non-trivial affine, so that a wrong per-channel order shows
        layer.norm_v.weight.uniform_(0.5, 1.5)
        layer.norm_v.bias.uniform_(-0.5, 0.5)
    x = 3.0 * torch.randn(2 * 5, 5, 6, 7, dtype=torch.float64) + 1.0
    with torch.no_grad():
        reference = layer.train()(x, 5)
    layer.eval()
    calls = []
    chunked_forward = layer._forward_in_slice_chunks
    layer._forward_in_slice_chunks = lambda *args: calls.append(args[2]) or chunked_forward(*args)
    with torch.inference_mode():
        torch.testing.assert_close(layer(x, 5), reference, atol=1e-12, rtol=1e-12)  # one pass
        layer.inference_slice_chunk = slice_chunk
        torch.testing.assert_close(layer(x, 5), reference, atol=1e-12, rtol=1e-12)
    assert calls == ([slice_chunk] if slice_chunk < 5 else [])


@pytest.mark.parametrize("name", ["lambda_unet", "unet"])
@pytest.mark.parametrize("slice_chunk", [1, 2, 3, 7])
def test_chunked_model_equals_the_one_pass_result(name: str, slice_chunk: int) -> None:
    """Random weights, eval mode, float32, two studies of 7 slices: chunked stem, decoder
    and Lambda+ layers give the one-pass (same BatchNorm folding) logits within 1e-5."""
    torch.manual_seed(0)
    model = create_model(name, widths=SMALL_WIDTHS, **({"value_dim": 8, "key_dim": 4} if name == "lambda_unet" else {}))
    model.eval()
    x = torch.rand(2, 2, 7, 32, 32)
    one_pass = optimise_for_inference(model)
    chunked = optimise_for_inference(model, slice_chunk=slice_chunk)
    assert isinstance(chunked, SliceChunkedUNet)
    lambda_layers = [m for m in chunked.modules() if isinstance(m, LambdaPlus)]
    assert len(lambda_layers) == (8 if name == "lambda_unet" else 0)
    assert all(layer.inference_slice_chunk == slice_chunk for layer in lambda_layers)
    with torch.inference_mode():
        expected = one_pass(x)
        actual = chunked(x)
        plain = model(x)
    assert actual.shape == (2, 1, 7, 32, 32)
    assert (actual - expected).abs().max().item() <= 1e-5
    # And the plain model (BatchNorms unfolded) within float rounding of the logits' scale.
    assert (actual - plain).abs().max().item() <= 1e-5 * max(1.0, plain.abs().max().item())
    assert all(layer.inference_slice_chunk is None for layer in model.modules() if isinstance(layer, LambdaPlus))


def test_batch_norms_after_lambda_plus_are_applied_in_place() -> None:
    model = create_model("lambda_unet", widths=SMALL_WIDTHS, value_dim=8, key_dim=4).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.normal_()
                module.running_var.uniform_(0.5, 2.0)
                module.weight.normal_()
                module.bias.normal_()
    norm = model.downs[0].norm1
    x = torch.randn(3, norm.num_features, 4, 5)
    expected = norm(x)
    assert batch_norms_in_place(model) == 2 * len(model.downs)
    in_place = model.downs[0].norm1
    assert isinstance(in_place, InPlaceBatchNorm)
    result = in_place(x)
    assert result.data_ptr() == x.data_ptr()  # no new tensor
    torch.testing.assert_close(result, expected, atol=1e-6, rtol=1e-6)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for d in model.downs if isinstance(d, LambdaDown)
                   for m in (d.norm1, d.norm2))
    with pytest.raises(ValueError, match="eval-mode"):
        batch_norms_in_place(create_model("lambda_unet", widths=SMALL_WIDTHS, value_dim=8, key_dim=4).train())


def test_a_model_with_its_own_forward_is_not_chunked() -> None:
    """AttentionUNet overrides forward (gates, decoder blocks returning tuples): it gets the
    BatchNorm folding but runs in one pass, with the plain model's result."""
    torch.manual_seed(0)
    model = create_model("attention_unet", widths=SMALL_WIDTHS).eval()
    optimised = optimise_for_inference(model, slice_chunk=2)
    assert not isinstance(optimised, SliceChunkedUNet)
    x = torch.rand(1, 2, 3, 32, 32)
    with torch.inference_mode():
        expected = model(x)
        assert (optimised(x) - expected).abs().max().item() <= 1e-5 * max(1.0, expected.abs().max().item())


def test_chunked_and_one_pass_run_under_bfloat16_autocast() -> None:
    """The engine autocasts to bfloat16 on CUDA; CPU autocast exercises the same dtype
    handling (Lambda+ kernels in float32, values in bfloat16): both paths run, agree with
    each other and with float32 within bfloat16 rounding."""
    torch.manual_seed(0)
    model = create_model("lambda_unet", widths=SMALL_WIDTHS, value_dim=8, key_dim=4).eval()
    x = torch.rand(1, 2, 7, 32, 32)
    one_pass, chunked = optimise_for_inference(model), optimise_for_inference(model, slice_chunk=2)
    with torch.inference_mode():
        exact = one_pass(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low_one_pass, low_chunked = one_pass(x), chunked(x)
    assert low_one_pass.dtype == low_chunked.dtype == torch.bfloat16
    scale = exact.abs().max().item()
    assert (low_chunked.float() - low_one_pass.float()).abs().max().item() <= 1e-2 * scale
    assert (low_chunked.float() - exact).abs().max().item() <= 5e-2 * scale
