"""Distillation (``lambdasegment train --teacher``): the teachers' mean probability as a second target."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from LambdaSegmentLib.cli import main
from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.inference.package import attach_partner_network, sha256_of_file
from LambdaSegmentLib.inference.untrained import DEFAULT_PREPROCESSING, SMALL_LAMBDA_UNET, save_untrained_package
from LambdaSegmentLib.training import SegmentationModule
from LambdaSegmentLib.training.distillation import load_teachers
from LambdaSegmentLib.training.losses import dice_bce_loss

from lambdasegment_training_helpers import TINY_MODEL
from test_cli import train_args


def with_running_statistics(package_dir: Path, seed: int) -> Path:
    """The package with non-trivial BatchNorm statistics, so that eval mode is what is tested."""
    package = load_model_package(package_dir)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, buffer in package.model.named_buffers():
            if name.endswith("running_mean"):
                buffer.copy_(0.3 * torch.randn(buffer.shape, generator=generator))
            elif name.endswith("running_var"):
                buffer.copy_(0.5 + 1.5 * torch.rand(buffer.shape, generator=generator))
    from LambdaSegmentLib.inference.package import save_model_package

    shutil.rmtree(package_dir)
    return save_model_package(package.model, package.manifest, package_dir)


def test_the_teachers_probability_is_the_mean_over_every_network_in_eval_mode(tmp_path: Path) -> None:
    """Two teacher packages, the first with a partner network: three networks' sigmoids averaged,
    each as inference computes it (eval mode: running statistics, whatever the batch holds)."""
    first = with_running_statistics(save_untrained_package(tmp_path / "first", seed=1), 1)
    partner = with_running_statistics(save_untrained_package(tmp_path / "partner", seed=2), 2)
    second = with_running_statistics(save_untrained_package(tmp_path / "second", seed=3), 3)
    attach_partner_network(first, partner)
    teachers = load_teachers([first, second], DEFAULT_PREPROCESSING)

    image = torch.rand(2, 2, 8, 32, 32)
    expected = torch.stack([load_model_package(directory, seed_network=False).model(image).sigmoid()
                            for directory in (first, partner, second)]).mean(0)
    for network in teachers.networks:
        network.train()  # a teacher is put in eval mode whatever state it was left in
    torch.testing.assert_close(teachers.probability(image), expected, rtol=0, atol=1e-6)
    assert [record["weights_sha256"] for record in teachers.packages] == [
        sha256_of_file(first / "weights.pt"), sha256_of_file(second / "weights.pt")]
    assert teachers.packages[0]["partner_weights_sha256"] == sha256_of_file(partner / "weights.pt")
    assert "partner_weights_sha256" not in teachers.packages[1]


def test_a_teacher_that_sees_other_inputs_is_refused_by_name(tmp_path: Path) -> None:
    other = save_untrained_package(tmp_path / "other", seed=1, preprocessing={**DEFAULT_PREPROCESSING, "in_plane_spacing_mm": 1.0})
    with pytest.raises(BadInputError, match="preprocessing differs") as raised:
        load_teachers([other], DEFAULT_PREPROCESSING)
    assert str(other) in str(raised.value)


def test_the_training_loss_weighs_the_masks_and_the_teachers_probability(tmp_path: Path) -> None:
    teachers = load_teachers([save_untrained_package(tmp_path / "teacher", seed=4)], DEFAULT_PREPROCESSING)
    student = SegmentationModule("lambda_unet", SMALL_LAMBDA_UNET, loss="dice_bce", teachers=teachers, distill_weight=0.25)
    plain = SegmentationModule("lambda_unet", SMALL_LAMBDA_UNET, loss="dice_bce")
    plain.model.load_state_dict(student.model.state_dict())
    batch = {"image": torch.rand(2, 2, 8, 32, 32), "mask": (torch.rand(2, 1, 8, 32, 32) > 0.9).float()}

    student.eval(), plain.eval()  # the same deterministic forward pass for both
    with torch.no_grad(), pytest.warns(Warning):  # self.log outside a Trainer only warns
        logits = student(batch["image"])
        expected = 0.75 * dice_bce_loss(logits, batch["mask"]) + 0.25 * dice_bce_loss(logits, teachers.probability(batch["image"]))
        torch.testing.assert_close(student.training_step(batch, 0), expected)
        torch.testing.assert_close(plain.training_step(batch, 0), dice_bce_loss(logits, batch["mask"]))
    # the teachers are no part of the student
    assert set(student.state_dict()) == set(plain.state_dict())
    assert all(parameter.requires_grad is False for network in teachers.networks for parameter in network.parameters())


@pytest.mark.parametrize("arguments", [{"distill_weight": 0.5}, {"distill_weight": 1.5, "teachers": "yes"},
                                       {"distill_weight": 0.5, "teachers": "yes", "loss": "blob_dice_bce"}])
def test_inconsistent_distillation_settings_are_refused(tmp_path: Path, arguments: dict) -> None:
    if "teachers" in arguments:
        arguments = {**arguments, "teachers": load_teachers([save_untrained_package(tmp_path / "t", seed=1)], DEFAULT_PREPROCESSING)}
    with pytest.raises(ValueError):
        SegmentationModule("lambda_unet", SMALL_LAMBDA_UNET, **arguments)


@pytest.mark.needs_atlas
def test_train_with_a_teacher_records_it_leaves_it_untouched_and_refuses_bad_settings(tmp_path: Path) -> None:
    """A seeded run with ``--teacher`` trains to other weights than the same run without, its
    manifest names the teacher (SHA-256, weight), the teacher's files are unchanged, and the
    student's package holds the student's tensors only; a weight outside (0, 1], a loss not
    defined for soft targets, a missing teacher or a weight without a teacher is refused before
    anything is written."""
    teacher, plain, distilled = tmp_path / "teacher", tmp_path / "plain", tmp_path / "distilled"
    assert main(train_args(teacher, "--devices", "1", "--seed", "9")) == 0
    teacher_sha = sha256_of_file(teacher / "weights.pt")
    assert main(train_args(plain, "--devices", "1", "--seed", "5", "--loss", "dice_bce")) == 0
    assert main(train_args(distilled, "--devices", "1", "--seed", "5", "--loss", "dice_bce",
                           "--teacher", str(teacher), "--distill-weight", "0.5")) == 0

    record = json.loads((distilled / "manifest.json").read_text(encoding="utf-8"))["training"]["distillation"]
    assert record["weight"] == 0.5
    assert [(entry["directory"], entry["weights_sha256"]) for entry in record["teachers"]] == [(str(teacher), teacher_sha)]
    assert "distillation" not in load_model_package(plain).manifest["training"]
    assert sha256_of_file(teacher / "weights.pt") == teacher_sha
    student, baseline = load_model_package(distilled).model.state_dict(), load_model_package(plain).model.state_dict()
    assert set(student) == set(baseline)
    assert any(not torch.equal(student[name], baseline[name]) for name in student if not name.endswith("num_batches_tracked"))
    assert json.loads((distilled / "manifest.json").read_text(encoding="utf-8"))["architecture"]["config"] == TINY_MODEL

    assert main(train_args(tmp_path / "never1", "--devices", "1", "--teacher", str(teacher), "--distill-weight", "0")) == 2
    assert main(train_args(tmp_path / "never2", "--devices", "1", "--teacher", str(teacher), "--loss", "blob_dice_bce")) == 2
    assert main(train_args(tmp_path / "never3", "--devices", "1", "--teacher", str(tmp_path / "missing"))) == 2
    assert main(train_args(tmp_path / "never4", "--devices", "1", "--distill-weight", "0.5")) == 2  # no teacher
    assert not any((tmp_path / name).exists() for name in ("never1", "never2", "never3", "never4"))
