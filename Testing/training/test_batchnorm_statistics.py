"""BatchNorm statistics while training: noise on them (``--batchnorm-noise SD``: the output is
the BatchNorm's with shifted statistics in train mode, untouched in eval mode, and the running
statistics are the noise-free ones), and some of them fixed (``--freeze-batchnorm NAME ...``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from LambdaSegmentLib.cli import main
from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.training import SegmentationModule
from LambdaSegmentLib.training.batchnorm_noise import add_statistics_noise

from lambdasegment_training_helpers import TINY_MODEL
from test_cli import train_args


def affine_norm(channels: int = 3) -> nn.BatchNorm2d:
    norm = nn.BatchNorm2d(channels)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([0.5, 2.0, -1.0]))
        norm.bias.copy_(torch.tensor([0.1, -0.3, 0.7]))
    return norm


def test_train_mode_output_is_the_batchnorm_with_shifted_statistics() -> None:
    """With the generator's draws δ, η known, the output equals γ·(x − μ − δσ)/(σ·e^η) + β
    computed from the batch's own statistics; the running statistics are those a noise-free
    BatchNorm records from the same input."""
    x = torch.randn(4, 3, 5, 6, generator=torch.Generator().manual_seed(1)) * 3 + 2
    noisy, plain = affine_norm(), affine_norm()
    add_statistics_noise(noisy, 0.2)
    torch.manual_seed(11)
    out = noisy(x)
    torch.manual_seed(11)
    delta, eta = torch.randn(3) * 0.2, torch.randn(3) * 0.2
    mean = x.mean(dim=(0, 2, 3)).view(1, 3, 1, 1)
    sd = (x.var(dim=(0, 2, 3), unbiased=False) + noisy.eps).sqrt().view(1, 3, 1, 1)
    expected = noisy.weight.view(1, 3, 1, 1) * (x - mean - delta.view(1, 3, 1, 1) * sd) / (sd * eta.exp().view(1, 3, 1, 1)) \
        + noisy.bias.view(1, 3, 1, 1)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    plain(x)
    torch.testing.assert_close(noisy.running_mean, plain.running_mean)
    torch.testing.assert_close(noisy.running_var, plain.running_var)
    assert not torch.allclose(out, plain(x))  # the noise is not zero


def test_eval_mode_and_removed_hooks_compute_exactly_the_plain_network() -> None:
    """Inference (eval mode) is bit-identical with or without the hooks; every BatchNorm of a
    LambdaUNet gets one; two seeded training passes draw the same noise."""
    torch.manual_seed(0)
    module = SegmentationModule("lambda_unet", TINY_MODEL)
    reference = SegmentationModule("lambda_unet", TINY_MODEL)
    reference.load_state_dict(module.state_dict())
    handles = add_statistics_noise(module.model, 0.1)
    assert len(handles) == sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.model.modules()) > 0
    image = torch.randn(2, 2, 4, 32, 32, generator=torch.Generator().manual_seed(3))
    module.eval(), reference.eval()
    with torch.no_grad():
        assert torch.equal(module(image), reference(image))
        module.train()
        torch.manual_seed(5)
        first = module(image)
        torch.manual_seed(5)
        assert torch.equal(first, module(image))
        for handle in handles:
            handle.remove()
        reference.train()
        assert torch.equal(module(image), reference(image))


def test_bad_standard_deviations_are_refused() -> None:
    for sd in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite number >= 0"):
            SegmentationModule("lambda_unet", TINY_MODEL, batchnorm_noise=sd)
    with pytest.raises(ValueError, match="> 0"):
        add_statistics_noise(nn.BatchNorm2d(2), 0.0)


@pytest.mark.needs_atlas
def test_train_with_noise_records_it_and_a_negative_value_writes_nothing(tmp_path: Path) -> None:
    """A seeded run with ``--batchnorm-noise 0.1`` trains to other weights than without it and
    says so in the manifest; a negative value is refused before anything is written."""
    plain, noisy = tmp_path / "plain", tmp_path / "noisy"
    assert main(train_args(plain, "--devices", "1", "--seed", "5")) == 0
    assert main(train_args(noisy, "--devices", "1", "--seed", "5", "--batchnorm-noise", "0.1")) == 0
    record = json.loads((noisy / "manifest.json").read_text(encoding="utf-8"))["training"]["batchnorm_noise"]
    assert record["sd"] == 0.1
    assert "batchnorm_noise" not in load_model_package(plain).manifest["training"]
    a, b = load_model_package(plain).model.state_dict(), load_model_package(noisy).model.state_dict()
    assert any(not torch.equal(a[name], b[name]) for name in a if not name.endswith("num_batches_tracked"))
    assert main(train_args(tmp_path / "never", "--devices", "1", "--batchnorm-noise", "-0.5")) == 2
    assert not (tmp_path / "never").exists()


@pytest.mark.needs_atlas
def test_freeze_batchnorm_names_reach_the_module_and_unknown_ones_write_nothing(tmp_path: Path) -> None:
    """``--freeze-batchnorm inc downs.0`` trains with those BatchNorms' statistics fixed (the
    package keeps the starting ones: here a fresh network's, mean 0 and variance 1) and the
    others updated; an unknown name is refused with its flag named, before anything is written."""
    frozen = tmp_path / "frozen"
    assert main(train_args(frozen, "--devices", "1", "--seed", "5", "--freeze-batchnorm", "inc", "downs.0")) == 0
    state = load_model_package(frozen).model.state_dict()
    assert torch.equal(state["inc.1.running_mean"], torch.zeros_like(state["inc.1.running_mean"]))
    assert torch.equal(state["downs.0.norm1.running_var"], torch.ones_like(state["downs.0.norm1.running_var"]))
    assert not torch.equal(state["ups.0.conv.1.running_mean"], torch.zeros_like(state["ups.0.conv.1.running_mean"]))
    assert main(train_args(tmp_path / "never", "--devices", "1", "--freeze-batchnorm", "stem")) == 2
    assert not (tmp_path / "never").exists()
