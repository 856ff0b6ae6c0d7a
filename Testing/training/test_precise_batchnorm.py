"""Precise BatchNorm statistics (``--precise-batchnorm N``): re-estimated after training as an
equal-weight average over fresh batches, every learned weight untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from LambdaSegmentLib.cli import main
from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.models import batch_norms
from LambdaSegmentLib.training import SegmentationModule
from LambdaSegmentLib.training.precise_batchnorm import reestimate_batchnorm, training_batch_norms

from lambdasegment_training_helpers import TINY_MODEL
from test_cli import train_args


def noise_batches(count: int, offset: float) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(2, 2, 4, 32, 32, generator=generator) * (1.0 + index) + offset for index in range(count)]


def test_statistics_are_the_equal_weight_average_of_the_batches_and_weights_stay() -> None:
    """The stem's first BatchNorm ends with the plain mean over the batches of each batch's
    mean and unbiased variance (what it saw, captured by a hook), not a moving average; the
    learned tensors are bit-identical and the model ends in eval mode."""
    module = SegmentationModule("lambda_unet", TINY_MODEL)
    module.train()
    first = batch_norms(module.model)[0]
    seen: list[torch.Tensor] = []
    handle = first.register_forward_pre_hook(lambda _, inputs: seen.append(inputs[0].detach().clone()))
    before = {name: tensor.clone() for name, tensor in module.model.state_dict().items()}
    batches = noise_batches(3, offset=2.0)

    count = reestimate_batchnorm(module, batches, batches=3)
    handle.remove()

    assert count == len(batch_norms(module.model)) > 0
    assert len(seen) == 3 and not module.training and first.momentum == 0.1
    dims = [d for d in range(seen[0].dim()) if d != 1]
    mean = torch.stack([x.mean(dim=dims) for x in seen]).mean(0)
    var = torch.stack([x.var(dim=dims, unbiased=True) for x in seen]).mean(0)
    torch.testing.assert_close(first.running_mean, mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(first.running_var, var, rtol=1e-4, atol=1e-6)
    after = module.model.state_dict()
    learned = [name for name in before if not name.endswith(("running_mean", "running_var", "num_batches_tracked"))]
    assert learned and all(torch.equal(before[name], after[name]) for name in learned)


def test_frozen_modules_keep_their_statistics_and_too_few_batches_are_refused() -> None:
    """With the encoder frozen (``frozen_statistics="keep"``, eval mode) only the decoder's
    BatchNorms are re-estimated; a data source that runs out is an error, not a silent average."""
    module = SegmentationModule("lambda_unet", TINY_MODEL, frozen_modules=("inc", "downs"))
    module.train()
    encoder = {name: t.clone() for name, t in module.model.state_dict().items() if name.startswith(("inc.", "downs."))}
    trained = training_batch_norms(module.model)
    assert trained and len(trained) < len(batch_norms(module.model))
    reestimate_batchnorm(module, noise_batches(2, offset=3.0), batches=2)
    state = module.model.state_dict()
    assert all(torch.equal(encoder[name], state[name]) for name in encoder)
    decoder = [name for name in state if name.startswith("ups.") and name.endswith("running_mean")]
    assert decoder and any(not torch.allclose(state[name], torch.zeros_like(state[name])) for name in decoder)

    module.train()
    with pytest.raises(ValueError, match="asked for 5 batches but the data gave 2"):
        reestimate_batchnorm(module, noise_batches(2, offset=3.0), batches=5)
    with pytest.raises(ValueError, match="at least one batch"):
        reestimate_batchnorm(module, [], batches=0)
    assert all(norm.momentum == 0.1 for norm in batch_norms(module.model))


@pytest.mark.needs_atlas
def test_train_records_precise_statistics_and_changes_only_them(tmp_path: Path) -> None:
    """The same seeded run with and without ``--precise-batchnorm 3``: identical learned weights,
    other running statistics, and the manifest says how they were made (the epochs after the
    last trained one); a negative count is refused before anything is written."""
    plain, precise = tmp_path / "plain", tmp_path / "precise"
    assert main(train_args(plain, "--devices", "1", "--seed", "5")) == 0
    assert main(train_args(precise, "--devices", "1", "--seed", "5", "--precise-batchnorm", "3")) == 0
    record = json.loads((precise / "manifest.json").read_text(encoding="utf-8"))["training"]["precise_batchnorm"]
    assert record["batches"] == 3 and record["batch_norms"] > 0 and record["epochs"] == [2, 3]  # 2 batches an epoch, none drawn beyond
    assert "precise_batchnorm" not in load_model_package(plain).manifest["training"]
    a, b = load_model_package(plain).model.state_dict(), load_model_package(precise).model.state_dict()
    statistics = [name for name in a if name.endswith(("running_mean", "running_var"))]
    learned = [name for name in a if name not in statistics and not name.endswith("num_batches_tracked")]
    assert all(torch.equal(a[name], b[name]) for name in learned)
    assert any(not torch.equal(a[name], b[name]) for name in statistics)
    assert main(train_args(tmp_path / "never", "--devices", "1", "--precise-batchnorm", "-1")) == 2
    assert not (tmp_path / "never").exists()
