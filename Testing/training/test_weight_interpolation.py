"""WiSE-FT weight interpolation: exact at its ends, the mean in between, refuses what is not one model."""

from __future__ import annotations

import json

import pytest
import torch

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.inference.package import read_manifest, save_model_package
from LambdaSegmentLib.inference.untrained import SMALL_LAMBDA_UNET, save_untrained_package
from LambdaSegmentLib.training.weight_interpolation import interpolate_packages, interpolate_states


@pytest.fixture()
def start_and_finetuned(tmp_path):
    """Two packages of one architecture whose every tensor differs, BatchNorm statistics included."""
    start = save_untrained_package(tmp_path / "start", seed=1)
    model = load_model_package(start).model
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("running_var"):
                tensor.mul_(torch.empty_like(tensor).uniform_(0.5, 2.0))
            elif tensor.is_floating_point():
                tensor.add_(0.1 * torch.randn_like(tensor))
            elif name.endswith("num_batches_tracked"):
                tensor.fill_(96)
    manifest = {
        **read_manifest(start), "name": "tuned", "threshold": 0.4,  # as the ship step chooses them
        "postprocessing": {"min_lesion_ml": 0.1, "min_edge_depth_mm": 6.0, "contralateral_ratio": 1.15, "test_time_flips": False},
        "postprocessing_choice": {"objective": 0.5}, "low_confidence_mean_probability": 0.6,
    }
    manifest.pop("weights_sha256"), manifest.pop("created")
    finetuned = save_model_package(model, manifest, tmp_path / "tuned")
    return start, finetuned


def _outputs(package_dir, volume):
    model = load_model_package(package_dir).model.eval()
    with torch.no_grad():
        output = model(volume)
    assert torch.isfinite(output).all()
    return output


def test_alpha_0_is_the_start_and_alpha_1_the_finetune_exactly(tmp_path, start_and_finetuned):
    start, finetuned = start_and_finetuned
    volume = torch.rand(1, 2, 8, 32, 32)
    for alpha, same_as in ((0.0, start), (1.0, finetuned)):
        out = interpolate_packages(start, finetuned, alpha, tmp_path / f"a{alpha}")
        torch.testing.assert_close(_outputs(out, volume), _outputs(same_as, volume), rtol=0, atol=0)


def test_half_way_every_float_tensor_is_the_mean_and_the_counters_are_the_finetunes(tmp_path, start_and_finetuned):
    start, finetuned = start_and_finetuned
    out = interpolate_packages(start, finetuned, 0.5, tmp_path / "half")
    a, b, mid = (load_model_package(p).model.state_dict() for p in (start, finetuned, out))
    checked = 0
    for key, value in mid.items():
        if value.is_floating_point():
            torch.testing.assert_close(value, (a[key] + b[key]) / 2, rtol=0, atol=1e-6)
            assert not torch.equal(value, a[key]) and not torch.equal(value, b[key])
            checked += key.endswith("running_var")
        else:
            assert torch.equal(value, b[key])
    assert checked > 0  # BatchNorm statistics were averaged too
    # A different function from both ends.
    volume = torch.rand(1, 2, 8, 32, 32)
    assert not torch.allclose(_outputs(out, volume), _outputs(start, volume))
    assert not torch.allclose(_outputs(out, volume), _outputs(finetuned, volume))


def test_the_manifest_records_both_packages_and_drops_what_was_chosen_for_the_finetune(tmp_path, start_and_finetuned):
    start, finetuned = start_and_finetuned
    out = interpolate_packages(start, finetuned, 0.25, tmp_path / "quarter")
    manifest = json.loads((out / "manifest.json").read_text())
    record = manifest["training"]["weight_interpolation"]
    assert record["alpha"] == 0.25
    assert record["start_sha256"] == read_manifest(start)["weights_sha256"]
    assert record["finetuned_sha256"] == read_manifest(finetuned)["weights_sha256"]
    assert manifest["name"] == "tuned" and manifest["weights_sha256"] != read_manifest(finetuned)["weights_sha256"]
    assert "postprocessing" not in manifest and "postprocessing_choice" not in manifest and "low_confidence_mean_probability" not in manifest
    assert manifest["threshold"] == 0.5  # the training threshold: 0.4 was chosen for the fine-tune's outputs
    load_model_package(out)  # SHA-256 verified, weights fit the architecture
    assert manifest["version"] == read_manifest(finetuned)["version"]
    renamed = read_manifest(interpolate_packages(start, finetuned, 0.5, tmp_path / "half", name="averaged", version="0.0.0-half"))
    assert (renamed["name"], renamed["version"]) == ("averaged", "0.0.0-half")  # another model than the fine-tune: its own name


def test_a_finetune_with_a_seed_network_interpolates_to_a_package_without_one(tmp_path, start_and_finetuned):
    from LambdaSegmentLib.inference.package import attach_seed_network

    start, finetuned = start_and_finetuned
    attach_seed_network(finetuned, start, 0.5)
    out = interpolate_packages(start, finetuned, 0.5, tmp_path / "half")
    assert "seed_network" not in json.loads((out / "manifest.json").read_text()) and not (out / "seed").exists()
    assert load_model_package(out).seed is None


def test_packages_of_different_models_are_refused_naming_the_finetune(tmp_path, start_and_finetuned):
    start, _ = start_and_finetuned
    other = save_untrained_package(tmp_path / "other", seed=1, config={**SMALL_LAMBDA_UNET, "widths": [8, 16, 64]})
    with pytest.raises(BadInputError, match="other.*architecture differs"):
        interpolate_packages(start, other, 0.5, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_input_is_never_overwritten_and_alpha_must_lie_in_0_1(tmp_path, start_and_finetuned):
    start, finetuned = start_and_finetuned
    before = (finetuned / "weights.pt").read_bytes()
    with pytest.raises(BadInputError, match="overwrite one of its inputs"):
        interpolate_packages(start, finetuned, 0.5, finetuned)
    assert (finetuned / "weights.pt").read_bytes() == before
    with pytest.raises(ValueError, match=r"alpha must lie in \[0, 1\]"):
        interpolate_states({}, {}, 1.5)


def test_the_script_refuses_an_existing_package_without_overwrite(tmp_path, start_and_finetuned, load_script, capsys):
    start, finetuned = start_and_finetuned
    script = load_script("scripts/interpolate_weights.py")
    assert script.main([str(start), str(finetuned), "--alpha", "0.5", "--output", str(tmp_path / "out")]) == 0
    written = (tmp_path / "out" / "weights.pt").read_bytes()
    assert script.main([str(start), str(finetuned), "--alpha", "0.7", "--output", str(tmp_path / "out")]) == 2
    assert "already there" in capsys.readouterr().err
    assert (tmp_path / "out" / "weights.pt").read_bytes() == written
