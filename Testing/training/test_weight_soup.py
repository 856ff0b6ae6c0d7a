"""Uniform weight soups: the mean of every float tensor, one network, refuses what is not one model."""

from __future__ import annotations

import json

import pytest
import torch

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.inference.package import read_manifest, save_model_package
from LambdaSegmentLib.inference.untrained import SMALL_LAMBDA_UNET, save_untrained_package
from LambdaSegmentLib.training.weight_interpolation import interpolate_packages
from LambdaSegmentLib.training.weight_soup import average_states, soup_packages


def _draw(start, directory, seed: int, seconds: float):
    """A package of ``start``'s model whose every float tensor differs (BatchNorm statistics too)."""
    model = load_model_package(start).model
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("running_var"):
                tensor.mul_(torch.empty(tensor.shape).uniform_(0.5, 2.0, generator=generator))
            elif tensor.is_floating_point():
                tensor.add_(0.1 * torch.randn(tensor.shape, generator=generator))
            elif name.endswith("num_batches_tracked"):
                tensor.fill_(seed)
    manifest = {**read_manifest(start), "threshold": 0.4, "training": {"seconds": seconds},
                "postprocessing": {"min_lesion_ml": 0.0, "min_edge_depth_mm": 6.0}, "postprocessing_choice": {"objective": 0.5}}
    manifest.pop("weights_sha256"), manifest.pop("created")
    return save_model_package(model, manifest, directory)


@pytest.fixture()
def draws(tmp_path):
    start = save_untrained_package(tmp_path / "start", seed=1)
    return [_draw(start, tmp_path / f"draw{seed}", seed, 100.0 * seed) for seed in (1, 2, 3)]


def test_every_float_tensor_is_the_mean_and_the_counters_are_the_first_draws(tmp_path, draws):
    out = soup_packages(draws, tmp_path / "soup")
    states = [load_model_package(path).model.state_dict() for path in draws]
    soup = load_model_package(out).model.state_dict()
    averaged_statistics = 0
    for key, value in soup.items():
        if value.is_floating_point():
            torch.testing.assert_close(value, sum(state[key] for state in states) / 3, rtol=0, atol=1e-6)
            averaged_statistics += key.endswith("running_var")
        else:
            assert torch.equal(value, states[0][key])
    assert averaged_statistics > 0
    volume = torch.rand(1, 2, 8, 32, 32)
    with torch.no_grad():
        outputs = [load_model_package(path).model.eval()(volume) for path in (*draws, out)]
    assert all(torch.isfinite(output).all() for output in outputs)
    assert not any(torch.allclose(outputs[-1], output) for output in outputs[:-1])  # a network of its own


def test_a_soup_of_identical_models_is_that_model_exactly():
    state = {"w": torch.randn(5, 3), "count": torch.tensor(7)}
    averaged = average_states([state, {key: value.clone() for key, value in state.items()}, state])
    assert torch.equal(averaged["w"], state["w"]) and torch.equal(averaged["count"], state["count"])


def test_two_draws_soup_to_their_half_way_interpolation(tmp_path, draws):
    soup = load_model_package(soup_packages(draws[:2], tmp_path / "soup")).model.state_dict()
    half = load_model_package(interpolate_packages(draws[0], draws[1], 0.5, tmp_path / "half")).model.state_dict()
    for key, value in soup.items():
        if value.is_floating_point():
            torch.testing.assert_close(value, half[key], rtol=0, atol=1e-6)


def test_the_manifest_records_every_ingredient_and_drops_what_was_chosen_for_one(tmp_path, draws):
    out = soup_packages(draws, tmp_path / "soup")
    manifest = json.loads((out / "manifest.json").read_text())
    ingredients = manifest["training"]["weight_soup"]["ingredients"]
    assert [item["weights_sha256"] for item in ingredients] == [read_manifest(path)["weights_sha256"] for path in draws]
    assert manifest["training"]["seconds"] == 600.0  # the time all three draws took
    assert "postprocessing" not in manifest and "postprocessing_choice" not in manifest
    assert manifest["threshold"] == 0.5  # the training threshold, not the first draw's chosen 0.4
    assert manifest["weights_sha256"] not in {read_manifest(path)["weights_sha256"] for path in draws}


def test_other_models_one_package_twice_and_overwriting_an_ingredient_are_refused(tmp_path, draws):
    other = save_untrained_package(tmp_path / "other", seed=1, config={**SMALL_LAMBDA_UNET, "widths": [8, 16, 64]})
    with pytest.raises(BadInputError, match="other.*architecture differs"):
        soup_packages([draws[0], other], tmp_path / "out")
    with pytest.raises(BadInputError, match="named twice"):
        soup_packages([draws[0], draws[1], draws[0]], tmp_path / "out")
    before = (draws[1] / "weights.pt").read_bytes()
    with pytest.raises(BadInputError, match="overwrite one of its ingredients"):
        soup_packages(draws, draws[1])
    assert (draws[1] / "weights.pt").read_bytes() == before and not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="at least two"):
        soup_packages(draws[:1], tmp_path / "out")


def test_the_script_writes_a_soup_and_refuses_an_existing_package_without_overwrite(tmp_path, draws, load_script, capsys):
    script = load_script("scripts/soup_weights.py")
    assert script.main([*map(str, draws), "--output", str(tmp_path / "out")]) == 0
    written = (tmp_path / "out" / "weights.pt").read_bytes()
    assert script.main([*map(str, draws[:2]), "--output", str(tmp_path / "out")]) == 2
    assert "already there" in capsys.readouterr().err
    assert (tmp_path / "out" / "weights.pt").read_bytes() == written
    assert script.main([str(draws[0]), str(tmp_path / "missing"), "--output", str(tmp_path / "new")]) == 2
    assert "soup_weights.py:" in capsys.readouterr().err and not (tmp_path / "new").exists()
