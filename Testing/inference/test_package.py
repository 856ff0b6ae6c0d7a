"""Model packages: a manifest beside verified weights; anything altered is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import load_model_package, save_model_package, sha256_of_file
from LambdaSegmentLib.inference.untrained import SMALL_LAMBDA_UNET, save_untrained_package
from LambdaSegmentLib.models import create_model


def test_saved_package_loads_the_same_weights_in_eval_mode(tmp_path: Path) -> None:
    model = create_model("lambda_unet", **SMALL_LAMBDA_UNET)
    manifest = {
        "name": "test-model", "version": "1.2.3",
        "architecture": {"name": "lambda_unet", "config": SMALL_LAMBDA_UNET},
        "preprocessing": {"channels": ["eadc", "dwi"]}, "threshold": 0.4, "training_data": "none",
    }
    save_model_package(model, manifest, tmp_path / "pkg")
    package = load_model_package(tmp_path / "pkg")
    assert not package.model.training
    for (name, expected), actual in zip(model.state_dict().items(), package.model.state_dict().values()):
        assert torch.equal(expected, actual), name
    written = json.loads((tmp_path / "pkg" / "manifest.json").read_text(encoding="utf-8"))
    assert written["weights_sha256"] == sha256_of_file(tmp_path / "pkg" / written["weights_file"]) == package.sha256
    assert (package.name, package.version, package.threshold) == ("test-model", "1.2.3", 0.4)
    assert package.slice_receptive_radius == model.slice_receptive_radius == 4
    assert written["created"] and written["slice_context"] == 3


def test_fp16_package_halves_the_file_and_loads_as_float32(tmp_path: Path) -> None:
    model = create_model("lambda_unet", **SMALL_LAMBDA_UNET)
    manifest = {"name": "m", "version": "1", "architecture": {"name": "lambda_unet", "config": SMALL_LAMBDA_UNET},
                "preprocessing": {}, "threshold": 0.5}
    full = save_model_package(model, manifest, tmp_path / "full")
    half = save_model_package(model, manifest, tmp_path / "half", fp16=True)
    assert (half / "weights.pt").stat().st_size < 0.7 * (full / "weights.pt").stat().st_size
    loaded = load_model_package(half).model
    weight = loaded.outc.weight
    assert weight.dtype == torch.float32
    torch.testing.assert_close(weight, model.outc.weight, rtol=1e-3, atol=1e-3)


def test_manifest_that_does_not_describe_the_model_is_refused_at_save(tmp_path: Path) -> None:
    model = create_model("lambda_unet", **SMALL_LAMBDA_UNET)
    manifest = {"name": "m", "version": "1", "architecture": {"name": "unet", "config": {"widths": [8, 16, 32]}},
                "preprocessing": {}, "threshold": 0.5}
    with pytest.raises(RuntimeError):
        save_model_package(model, manifest, tmp_path / "pkg")


def test_tampered_weights_are_refused_naming_both_hashes(tmp_path: Path) -> None:
    directory = save_untrained_package(tmp_path / "pkg")
    weights = directory / "weights.pt"
    expected = sha256_of_file(weights)
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(BadInputError, match="SHA-256") as error:
        load_model_package(directory)
    assert expected in str(error.value) and sha256_of_file(weights) in str(error.value)
    assert error.value.source == str(weights)


def test_corrupted_weights_with_a_matching_hash_are_refused(tmp_path: Path) -> None:
    directory = save_untrained_package(tmp_path / "pkg")
    weights = directory / "weights.pt"
    weights.write_bytes(b"not a torch file at all")
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    manifest["weights_sha256"] = sha256_of_file(weights)
    (directory / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BadInputError, match="not a loadable weights file"):
        load_model_package(directory)


def test_pickled_code_is_never_executed(tmp_path: Path) -> None:
    """weights_only=True: a file smuggling an arbitrary object is refused, not run."""
    directory = save_untrained_package(tmp_path / "pkg")
    weights = directory / "weights.pt"
    torch.save({"payload": Path("/etc/passwd")}, weights)  # an arbitrary class, not a tensor
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    manifest["weights_sha256"] = sha256_of_file(weights)
    (directory / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BadInputError, match="not a loadable weights file"):
        load_model_package(directory)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: (d / "manifest.json").unlink(), "manifest not found"),
        (lambda d: (d / "manifest.json").write_text("{not json"), "not valid JSON"),
        (lambda d: (d / "manifest.json").write_text('{"name": "x"}'), "lacks"),
        (lambda d: (d / "weights.pt").unlink(), "weights file named by the manifest not found"),
    ],
)
def test_broken_package_is_bad_input(tmp_path: Path, damage, message: str) -> None:
    directory = save_untrained_package(tmp_path / "pkg")
    damage(directory)
    with pytest.raises(BadInputError, match=message):
        load_model_package(directory)


def test_missing_directory_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="not found"):
        load_model_package(tmp_path / "nowhere")
