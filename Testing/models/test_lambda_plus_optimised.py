"""The optimised Lambda+ and the inference rewrites compute the paper's maths exactly.

The reference is ``benchmarks/reference_lambda_plus.py``: the paper's Appendix A way of
materialising every per-pixel |k| x |v| lambda (Conv3d over the values for the local
lambda, Conv2d over one tiny image per pixel for the inter-slice lambda). It is itself
checked against the per-pixel loop of equations 1-7 in ``test_lambda_plus.py``.
"""

from __future__ import annotations

import copy
import importlib.util
import random
from pathlib import Path

import pytest
import torch

from LambdaSegmentLib.models import LambdaPlus, create_model
from LambdaSegmentLib.models.fusion import SliceChunkedUNet, fold_batch_norms, optimise_for_inference

from test_lambda_plus import make_layer  # this folder is on sys.path (pytest's prepend mode)
from test_lambda_plus import reference_lambda_plus as per_pixel_reference

REPO_ROOT = Path(__file__).resolve().parents[2]


def _load_reference():
    spec = importlib.util.spec_from_file_location("reference_lambda_plus", REPO_ROOT / "benchmarks" / "reference_lambda_plus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _load_reference()


def random_configuration(seed: int) -> dict:
    """A random Lambda+ configuration (2.5D, or 3D local context for a quarter) and batch
    shape (heads, k, u, v, R, T, b, t, H, W)."""
    rng = random.Random(seed)
    value_dim = rng.randint(1, 4)
    local_3d = rng.random() < 0.25  # LambdaUNet-3D: R x R x T local context, both odd and > 0
    key_dim = rng.randint(1, 5)
    # RMS queries need |k| >= 2: a 1-vector's unit RMS is its sign, whose float32 gradient is noise.
    query_norm = "rms" if key_dim > 1 and seed % 2 else "batch"
    content_norm = "rms" if seed % 3 == 1 else "none"  # decided without drawing, so other seeds keep their draws
    return dict(
        layer=dict(
            in_channels=rng.randint(2, 5),
            out_channels=value_dim * rng.randint(1, 4),
            key_dim=key_dim,
            intra_depth=rng.randint(1, 3),
            value_dim=value_dim,
            local_size=rng.choice([1, 3, 5] if local_3d else [0, 1, 3, 5]),
            slice_context=rng.choice([1, 3, 5] if local_3d else [0, 1, 3, 5]),
            local_3d=local_3d,
            query_norm=query_norm,
            content_norm=content_norm,
        ),
        studies=rng.randint(1, 3),
        slices=rng.randint(1, 5),
        height=rng.randint(2, 7),
        width=rng.randint(2, 7),
    )


def randomise_statistics(layer: LambdaPlus, seed: int) -> None:
    """Non-trivial BatchNorm running statistics and affine, RMS query and content gains, and
    non-zero positional biases."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        if layer.query_norm == "rms":
            layer.norm_q.weight.copy_(torch.randn(layer.norm_q.weight.shape, generator=generator))
        if layer.norm_content is not None:
            layer.norm_content.weight.copy_(torch.randn(layer.norm_content.weight.shape, generator=generator))
        for norm in (n for n in (layer.norm_q, layer.norm_v) if isinstance(n, torch.nn.BatchNorm2d)):
            norm.running_mean.copy_(torch.randn(norm.num_features, generator=generator))
            norm.running_var.copy_(torch.rand(norm.num_features, generator=generator) + 0.5)
            norm.weight.copy_(torch.randn(norm.num_features, generator=generator))
            norm.bias.copy_(torch.randn(norm.num_features, generator=generator))
        for bias in (layer.local_bias, layer.slice_bias):
            if bias is not None:
                bias.copy_(torch.randn(bias.shape, generator=generator))


def values_and_gradients(forward, layer: LambdaPlus, x: torch.Tensor, probe: torch.Tensor) -> list[torch.Tensor]:
    """[output, d<probe, output>/dx, d/dparameter for every parameter]."""
    layer.zero_grad()
    x = x.clone().requires_grad_(True)
    y = forward(x)
    (y * probe).sum().backward()
    return [y.detach(), x.grad] + [p.grad.clone() for p in layer.parameters()]


def assert_all_close(actual: list[torch.Tensor], expected: list[torch.Tensor], tolerance: float) -> None:
    assert len(actual) == len(expected)
    for index, (a, e) in enumerate(zip(actual, expected)):
        scale = max(1.0, e.abs().max().item())
        torch.testing.assert_close(a, e, atol=tolerance * scale, rtol=tolerance, msg=lambda m: f"tensor {index}: {m}")


@pytest.mark.parametrize("path", ["reassociated", "materialised"])
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("seed", range(10))
def test_equals_reference_values_and_gradients_in_float32(seed: int, mode: str, path: str) -> None:
    """Output and every gradient (input, all parameters; train mode uses batch statistics)
    of the float32 layer match the reference maths within 1e-5 (relative to each tensor's
    largest magnitude when above 1), for random heads, |k|, |u|, |v|, R, T, slices and studies."""
    config = random_configuration(seed)
    torch.manual_seed(seed)
    layer = LambdaPlus(**config["layer"])
    randomise_statistics(layer, seed)
    layer.train(mode == "train")
    layer.positional_path = path
    num_slices = config["slices"]
    x = torch.randn(config["studies"] * num_slices, config["layer"]["in_channels"], config["height"], config["width"])
    probe = torch.randn(x.shape[0], config["layer"]["out_channels"], config["height"], config["width"])

    actual = values_and_gradients(lambda t: layer(t, num_slices), layer, x, probe)
    # The reference maths evaluated exactly enough (float64) on the same weights.
    exact = copy.deepcopy(layer).double()
    expected = values_and_gradients(
        lambda t: reference.reference_lambda_plus(exact, t, num_slices), exact, x.double(), probe.double()
    )
    assert_all_close([a.double() for a in actual], expected, 1e-5)


@pytest.mark.parametrize("path", ["reassociated", "materialised"])
@pytest.mark.parametrize("seed", range(10))
def test_inference_equals_reference_for_any_chunking_in_float32(seed: int, path: str) -> None:
    """Without autograd the positional term is added in place, chunk by chunk of pixels
    (rows of one slice, whole slices, several slices) and, with ``inference_slice_chunk``,
    slice by slice: every chunking gives the reference maths within 1e-5."""
    config = random_configuration(seed)
    torch.manual_seed(seed)
    layer = LambdaPlus(**config["layer"]).eval()
    randomise_statistics(layer, seed)
    layer.positional_path = path
    num_slices, height, width = config["slices"], config["height"], config["width"]
    x = torch.randn(config["studies"] * num_slices, config["layer"]["in_channels"], height, width)
    exact = copy.deepcopy(layer).double()
    with torch.no_grad():
        expected = reference.reference_lambda_plus(exact, x.double(), num_slices)
        positional = layer.positional_kernel()
        per_pixel = (positional[0].shape[1] * positional[0].shape[2] if positional is not None else 1) * layer.value_dim
        # Pixels per chunk: 1, part of an image row, two rows, one slice and a half, everything.
        for pixels in (1, max(1, width // 2), 2 * width, 3 * height * width // 2, 10**6):
            for slice_chunk in (None, 1, 2):
                layer.inference_chunk_elements = pixels * per_pixel
                layer.inference_slice_chunk = slice_chunk
                actual = layer(x, num_slices)
                assert_all_close([actual.double()], [expected], 1e-5)


def test_reference_is_the_per_pixel_maths() -> None:
    layer = make_layer(local_size=3, slice_context=3)
    x = torch.randn(2 * 3, 3, 4, 5, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(
            reference.reference_lambda_plus(layer, x, 3), per_pixel_reference(layer, x, 3), atol=1e-10, rtol=1e-10
        )


def test_both_contractions_agree_on_a_lambda_unet_3d_layer() -> None:
    layer = make_layer(local_3d=True)
    x = torch.randn(2 * 4, 3, 5, 4, dtype=torch.float64)
    with torch.no_grad():
        layer.positional_path = "reassociated"
        reassociated = layer(x, 4)
        layer.positional_path = "materialised"
        materialised = layer(x, 4)
    torch.testing.assert_close(reassociated, materialised, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(reassociated, per_pixel_reference(layer, x, 4), atol=1e-10, rtol=1e-10)


def test_inference_in_small_chunks_of_pixels_gives_the_same_output() -> None:
    layer = make_layer()
    x = torch.randn(2 * 3, 3, 5, 6, dtype=torch.float64)
    with torch.no_grad():
        layer.positional_path = "reassociated"
        whole = layer(x, 3)
        layer.inference_chunk_elements = 7 * layer.heads * 11 * layer.intra_depth  # 7 pixels per chunk
        chunked = layer(x, 3)
    torch.testing.assert_close(chunked, whole, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(chunked, per_pixel_reference(layer, x, 3), atol=1e-10, rtol=1e-10)


def test_auto_path_picks_the_contraction_with_fewer_multiply_adds() -> None:
    # Paper level 1: 4 heads -> reassociated (8.4k vs 24.6k MACs per pixel); level 4: 32 heads -> materialised.
    assert LambdaPlus(64, 128).chosen_positional_path() == "reassociated"
    assert LambdaPlus(512, 1024).chosen_positional_path() == "materialised"
    layer = LambdaPlus(8, 8, value_dim=4)
    layer.positional_path = "sideways"
    with pytest.raises(ValueError, match="positional_path"):
        layer.chosen_positional_path()


def test_any_input_memory_format_gives_the_same_output() -> None:
    layer = make_layer().float()
    x = torch.randn(6, 3, 5, 6)
    with torch.no_grad():
        plain = layer(x, 3)
        channels_last = layer(x.contiguous(memory_format=torch.channels_last), 3)
        strided = layer(torch.randn(6, 3, 5, 12)[..., ::2].copy_(x), 3)
    torch.testing.assert_close(channels_last, plain, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(strided, plain, atol=1e-6, rtol=1e-6)


def trained_looking(model: torch.nn.Module, data: torch.Tensor, seed: int = 0) -> torch.nn.Module:
    """Eval-mode model whose BatchNorms have non-trivial affines and running statistics
    gathered from ``data`` (as after training), so that folding them changes the weights.
    (Random-weight Lambda+ stacks are far from linear, so statistics from other inputs can
    make eval-mode activations explode.)"""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.mul_(1 + 0.2 * torch.randn(module.num_features, generator=generator))
                module.bias.add_(0.1 * torch.randn(module.num_features, generator=generator))
                module.momentum = None  # running statistics = the average over the calibration passes
        model.train()(data)
    return model.eval()


SMALL = dict(widths=(8, 16, 32, 64, 128), value_dim=8, key_dim=4)


@pytest.mark.parametrize(
    "name, config",
    [("lambda_unet", SMALL), ("lambda_unet_2d", SMALL), ("lambda_unet_3d", SMALL), ("unet", dict(widths=SMALL["widths"])),
     ("lambda_unet", dict(SMALL, query_norm="rms", content_norm="rms"))],
)
def test_inference_with_every_optimisation_equals_the_plain_path(name: str, config: dict) -> None:
    """BatchNorm folding, channels-last and slice chunking change no output: exactly (float64)
    and, in float32, within float32 rounding of this ill-conditioned random stack (eight
    Lambda+ layers in series amplify rounding: the plain float32 model itself is ~1e-4
    of its output range off the float64 result, and the folded weights round differently)."""
    torch.manual_seed(0)
    x = torch.randn(2, 2, 3, 16, 16)
    model = trained_looking(create_model(name, **config), x)
    before = {key: value.clone() for key, value in model.state_dict().items()}
    optimised = optimise_for_inference(model, slice_chunk=2)
    assert isinstance(optimised, SliceChunkedUNet)
    assert optimised.slice_receptive_radius == model.slice_receptive_radius
    with torch.inference_mode():
        exact = copy.deepcopy(model).double()(x.double())
        torch.testing.assert_close(optimise_for_inference(model.double(), slice_chunk=2)(x.double()), exact,
                                   atol=1e-9, rtol=1e-9)
        model.float()
        plain_error = (model(x).double() - exact).abs().max().item()
        optimised_error = (optimised(x).double() - exact).abs().max().item()
    scale = exact.abs().max().item()
    assert plain_error <= 1e-3 * scale
    assert optimised_error <= max(1e-4, 1e-3 * scale)
    # The caller's model is untouched (still has its BatchNorms, same weights).
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, before[key], atol=0, rtol=0)


def test_batch_norm_folding_removes_every_conv_batch_norm_pair() -> None:
    model = trained_looking(create_model("lambda_unet", **SMALL), torch.randn(1, 2, 3, 16, 16))
    # Stem 2 + decoder 4 levels x 2 convolutions; the BatchNorms after Lambda+ layers stay.
    assert fold_batch_norms(model) == 10
    remaining = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(remaining) == 8 * 3  # per Lambda+: its query and value norms, and the norm after it


def test_folding_refuses_a_training_model() -> None:
    with pytest.raises(ValueError, match="eval-mode"):
        fold_batch_norms(create_model("unet", widths=(4, 8, 16, 32, 64)).train())


def test_activation_checkpointing_gives_the_same_training_step() -> None:
    """create_model(..., checkpoint_activations=True): same loss, gradients and BatchNorm
    running statistics as without it."""
    x = torch.randn(2, 2, 3, 16, 16)
    results = []
    for checkpointed in (False, True):
        torch.manual_seed(0)
        model = create_model("lambda_unet", **SMALL, checkpoint_activations=checkpointed).train()
        loss = model(x).square().mean()
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters()},
                        {n: b.clone() for n, b in model.named_buffers()}))
    (loss_a, grads_a, buffers_a), (loss_b, grads_b, buffers_b) = results
    torch.testing.assert_close(loss_b, loss_a, atol=0, rtol=0)
    for name in grads_a:
        torch.testing.assert_close(grads_b[name], grads_a[name], atol=1e-6, rtol=1e-5, msg=name)
    for name in buffers_a:
        torch.testing.assert_close(buffers_b[name], buffers_a[name], atol=0, rtol=0, msg=name)
