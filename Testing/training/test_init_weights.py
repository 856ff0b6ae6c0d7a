"""--init-weights: starting from a package, as it is or with input channels appended (zero stem weights)."""

from __future__ import annotations

import json

import pytest
import torch

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.inference.package import read_manifest, save_model_package
from LambdaSegmentLib.inference.untrained import DEFAULT_PREPROCESSING, SMALL_LAMBDA_UNET, save_untrained_package
from LambdaSegmentLib.models import create_model
from LambdaSegmentLib.training.init_weights import drop_converted_statistics, initialise_from_package, widen_input_channels

CONTRA = {**DEFAULT_PREPROCESSING, "channels": ["eadc", "dwi", "dwi_asymmetry"]}
SMALL_UNET = {"widths": [8, 16, 32]}


@pytest.mark.parametrize("architecture, config", [("lambda_unet", SMALL_LAMBDA_UNET), ("unet", SMALL_UNET)])
def test_a_widened_model_computes_exactly_the_package_model_whatever_its_new_channel_holds(tmp_path, architecture, config):
    untrained = save_untrained_package(tmp_path / "untrained", seed=3, architecture=architecture, config=config)
    source = load_model_package(untrained).model
    with torch.no_grad():  # non-trivial BatchNorm statistics, so eval mode is tested with them
        for name, buffer in source.named_buffers():
            if name.endswith("running_mean"):
                buffer.normal_(0.0, 0.3)
            elif name.endswith("running_var"):
                buffer.uniform_(0.5, 2.0)
    package_dir = save_model_package(source, read_manifest(untrained), tmp_path / "pkg")
    widened = create_model(architecture, **config, in_channels=3)

    message = initialise_from_package(widened, package_dir, architecture, {**config, "in_channels": 3}, CONTRA)

    assert "widened to ['eadc', 'dwi', 'dwi_asymmetry']" in message and "zero weights for ['dwi_asymmetry']" in message
    two_channels = torch.rand(2, 2, 8, 32, 32)
    noise = 4.0 * torch.randn(2, 1, 8, 32, 32)  # arbitrary values in the new channel
    three_channels = torch.cat([two_channels, noise], dim=1)
    source.eval(), widened.eval()
    with torch.no_grad():
        torch.testing.assert_close(widened(three_channels), source(two_channels), rtol=0, atol=1e-5)
    source.train(), widened.train()  # batch statistics: the same stem output, the same network
    with torch.no_grad():
        torch.testing.assert_close(widened(three_channels), source(two_channels), rtol=0, atol=1e-5)


def test_the_same_model_loads_as_it_is(tmp_path):
    package_dir = save_untrained_package(tmp_path / "pkg", seed=1)
    model = create_model("lambda_unet", **SMALL_LAMBDA_UNET)
    message = initialise_from_package(model, package_dir, "lambda_unet", SMALL_LAMBDA_UNET, DEFAULT_PREPROCESSING)
    assert "widened" not in message
    for key, value in load_model_package(package_dir).model.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value, rtol=0, atol=0)


@pytest.mark.parametrize(
    "config, preprocessing, message",
    [
        ({**SMALL_LAMBDA_UNET, "widths": [8, 16, 64], "in_channels": 3}, CONTRA, "only the same model"),
        ({**SMALL_LAMBDA_UNET, "in_channels": 3}, {**CONTRA, "channels": ["dwi", "eadc", "dwi_asymmetry"]}, "only the same model"),
        ({**SMALL_LAMBDA_UNET, "in_channels": 2}, {**CONTRA, "channels": ["eadc", "dwi"]}, "only the same model"),
        ({**SMALL_LAMBDA_UNET, "in_channels": 3}, {**CONTRA, "in_plane_spacing_mm": 1.5}, "beyond the appended channels"),
        ({**SMALL_LAMBDA_UNET, "in_channels": 3}, {**CONTRA, "normalization": {"dwi": "brain_median_clip4", "eadc": "clip01"}}, "beyond the appended channels"),
        ({**SMALL_LAMBDA_UNET, "in_channels": 4}, CONTRA, "needs exactly one tensor"),
    ],
    ids=["other-widths", "reordered-channels", "same-channels-other-config", "other-spacing", "other-normalisation", "stem-not-matching-channels"],
)
def test_any_other_mismatch_is_refused_naming_the_package(tmp_path, config, preprocessing, message):
    package_dir = save_untrained_package(tmp_path / "pkg", seed=2)
    model = create_model("lambda_unet", **config)
    with pytest.raises(BadInputError, match=message) as refused:
        initialise_from_package(model, package_dir, "lambda_unet", config, preprocessing)
    assert str(package_dir) in str(refused.value)


def test_widening_refuses_state_dicts_that_differ_in_more_than_the_stem():
    source = create_model("unet", widths=[8, 16, 32]).state_dict()
    target = create_model("unet", widths=[8, 16, 64], in_channels=3).state_dict()
    with pytest.raises(BadInputError, match="needs exactly one tensor"):
        widen_input_channels(source, target, 2, 3)


def test_the_train_command_refuses_a_mismatched_package_before_training(tmp_path, capsys):
    from LambdaSegmentLib.cli import main

    package_dir = save_untrained_package(tmp_path / "pkg", seed=2)
    reordered = {**CONTRA, "channels": ["dwi", "eadc", "dwi_asymmetry"]}
    code = main(["train", "--model", "lambda_unet", "--model-config", json.dumps({**SMALL_LAMBDA_UNET, "in_channels": 3}),
                 "--preprocessing", json.dumps(reordered), "--synthetic", "1", "--accelerator", "cpu",
                 "--init-weights", str(package_dir), "--output", str(tmp_path / "out")])
    assert code == 2
    error = capsys.readouterr().err
    assert "lambdasegment: error:" in error and "only the same model" in error and str(package_dir) in error


def test_batch_norms_converted_to_group_norms_keep_every_weight(tmp_path):
    package_dir = save_untrained_package(tmp_path / "pkg", seed=4)
    source = load_model_package(package_dir).model.state_dict()
    config = {**SMALL_LAMBDA_UNET, "stem_norm": "group"}
    model = create_model("lambda_unet", **config)

    message = initialise_from_package(model, package_dir, "lambda_unet", config, DEFAULT_PREPROCESSING)

    assert "stem_norm None → group" in message and "BatchNorm statistics tensors dropped" in message
    loaded = model.state_dict()
    for key, value in loaded.items():  # the GroupNorms' affines are the BatchNorms'
        torch.testing.assert_close(value, source[key], rtol=0, atol=0)
    dropped = set(source) - set(loaded)
    assert dropped and all(key.startswith(("inc.", "downs.0.")) and key.rsplit(".", 1)[-1] in
                           ("running_mean", "running_var", "num_batches_tracked") for key in dropped)


@pytest.mark.parametrize(
    "config, preprocessing, message",
    [
        ({**SMALL_LAMBDA_UNET, "stem_norm": "group"}, {**DEFAULT_PREPROCESSING, "in_plane_spacing_mm": 1.5}, "converting normalisations keeps"),
        ({**SMALL_LAMBDA_UNET, "stem_norm": "group", "widths": [8, 16, 64]}, DEFAULT_PREPROCESSING, "only the same model"),
    ],
    ids=["other-spacing", "other-widths"],
)
def test_a_conversion_with_anything_else_changed_is_refused(tmp_path, config, preprocessing, message):
    package_dir = save_untrained_package(tmp_path / "pkg", seed=4)
    with pytest.raises(BadInputError, match=message) as refused:
        initialise_from_package(create_model("lambda_unet", **config), package_dir, "lambda_unet", config, preprocessing)
    assert str(package_dir) in str(refused.value)


def test_converting_refuses_to_drop_anything_but_running_statistics():
    source = create_model("lambda_unet", **SMALL_LAMBDA_UNET).state_dict()
    target = create_model("lambda_unet", **{**SMALL_LAMBDA_UNET, "stem_norm": "group"}).state_dict()
    state, dropped = drop_converted_statistics(source, target)
    assert state.keys() == target.keys() and dropped
    with pytest.raises(BadInputError, match="may only drop running statistics"):
        drop_converted_statistics(source, {key: value for key, value in target.items() if key != "outc.weight"} | {"extra.weight": torch.zeros(1)})
    with pytest.raises(BadInputError, match="may only drop running statistics"):
        drop_converted_statistics({key: value for key, value in source.items() if key != "outc.bias"}, target)


WIDER = {**SMALL_LAMBDA_UNET, "widths": [16, 24, 64]}


# RMS queries, as every package since 2.0; with BatchNorm queries the eight quadratic Lambda+ layers
# amplify the rounding of differently sized GEMMs (0.6 % here on randomly perturbed weights).
@pytest.mark.parametrize("query_norm", ["rms"])
def test_a_wider_lambda_unet_starts_as_the_package_model_and_learns_through_its_new_channels(tmp_path, query_norm):
    narrow_config, wide_config = {**SMALL_LAMBDA_UNET, "query_norm": query_norm}, {**WIDER, "query_norm": query_norm}
    untrained = save_untrained_package(tmp_path / "untrained", seed=5, config=narrow_config)
    source = load_model_package(untrained).model
    with torch.no_grad():  # non-trivial statistics and affines, so nothing is tested at its identity
        for name, buffer in source.named_buffers():
            if name.endswith("running_mean"):
                buffer.normal_(0.0, 0.3)
            elif name.endswith("running_var"):
                buffer.uniform_(0.5, 2.0)
        for name, parameter in source.named_parameters():
            if parameter.dim() == 1:
                parameter.add_(0.2 * torch.randn_like(parameter))
    package_dir = save_model_package(source, read_manifest(untrained), tmp_path / "pkg")
    torch.manual_seed(6)
    wide = create_model("lambda_unet", **wide_config)

    message = initialise_from_package(wide, package_dir, "lambda_unet", wide_config, DEFAULT_PREPROCESSING)

    assert "widths [8, 16, 32] widened to [16, 24, 64]" in message and "training starts as the package's model" in message
    narrow_state = source.state_dict()
    for key, value in wide.state_dict().items():  # the package's tensors sit in the leading channels
        if value.shape != narrow_state[key].shape and not (key.startswith("ups.") and key.endswith("conv.0.weight")):  # concatenations: below
            torch.testing.assert_close(value[tuple(slice(0, n) for n in narrow_state[key].shape)], narrow_state[key], rtol=0, atol=0)
    study = torch.rand(2, 2, 6, 32, 32)
    for mode in ("eval", "train"):  # running statistics, then batch statistics
        getattr(source, mode)(), getattr(wide, mode)()
        with torch.no_grad():
            torch.testing.assert_close(wide(study), source(study), rtol=1e-4, atol=1e-5)  # GEMM sizes change the rounding
    wide.train()
    loss = wide(study).sigmoid().mean()
    loss.backward()
    bridge = wide.inc[3].weight.grad  # the stem's second conv: old outputs reading new inputs
    assert bridge[:8, 8:].abs().sum() > 0, "the zero bridge from the new channels must get a gradient"


def test_the_decoder_concatenation_is_mapped_part_by_part(tmp_path):
    package_dir = save_untrained_package(tmp_path / "pkg", seed=7)
    narrow = load_model_package(package_dir).model.state_dict()["ups.1.conv.0.weight"]  # (8, 16 = [skip 8, up 8], 3, 3)
    wide = create_model("lambda_unet", **WIDER)
    initialise_from_package(wide, package_dir, "lambda_unet", WIDER, DEFAULT_PREPROCESSING)
    weight = wide.state_dict()["ups.1.conv.0.weight"]  # (16, 32 = [skip 16, up 16], 3, 3)
    torch.testing.assert_close(weight[:8, :8], narrow[:, :8], rtol=0, atol=0)
    torch.testing.assert_close(weight[:8, 16:24], narrow[:, 8:], rtol=0, atol=0)
    assert weight[:8, 8:16].abs().sum() == 0 and weight[:8, 24:].abs().sum() == 0
    assert weight[8:].abs().sum() > 0  # new outputs keep their initialisation


@pytest.mark.parametrize(
    "config, preprocessing, message",
    [
        ({**SMALL_LAMBDA_UNET, "widths": [8, 16, 24]}, DEFAULT_PREPROCESSING, "only the same model"),
        ({**WIDER, "value_dim": 4}, DEFAULT_PREPROCESSING, "only the same model"),
        (WIDER, {**DEFAULT_PREPROCESSING, "in_plane_spacing_mm": 1.5}, "widening keeps the package's preprocessing"),
    ],
    ids=["narrower", "widths-and-more", "other-spacing"],
)
def test_widening_with_anything_else_changed_or_narrower_is_refused(tmp_path, config, preprocessing, message):
    package_dir = save_untrained_package(tmp_path / "pkg", seed=8)
    with pytest.raises(BadInputError, match=message) as refused:
        initialise_from_package(create_model("lambda_unet", **config), package_dir, "lambda_unet", config, preprocessing)
    assert str(package_dir) in str(refused.value)
