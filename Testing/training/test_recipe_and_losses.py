"""The paper's recipe as defaults: schedule, optimiser, loss."""

from __future__ import annotations

import pytest
import torch

from LambdaSegmentLib.training import SegmentationModule, make_loss, recipe
from LambdaSegmentLib.training.losses import bce_loss, dice_bce_loss, soft_dice_loss, soft_tversky_loss, tversky_bce_loss

from lambdasegment_training_helpers import TINY_MODEL


@pytest.mark.parametrize(
    ("epoch", "factor"), [(0, 1.0), (19, 1.0), (20, 1.0), (21, 79 / 80), (60, 0.5), (99, 1 / 80), (100, 0.0), (150, 0.0)]
)
def test_learning_rate_is_constant_for_20_epochs_then_decays_linearly_to_zero_at_100(epoch: int, factor: float) -> None:
    assert recipe.paper_lr_factor(epoch) == pytest.approx(factor)


def test_default_optimiser_is_rmsprop_with_the_papers_settings_and_schedule() -> None:
    module = SegmentationModule("lambda_unet", TINY_MODEL)
    config = module.configure_optimizers()
    optimizer, schedule = config["optimizer"], config["lr_scheduler"]["scheduler"]
    assert isinstance(optimizer, torch.optim.RMSprop)
    group = optimizer.param_groups[0]
    assert (group["lr"], group["momentum"], group["weight_decay"]) == (1e-4, 0.9, 1e-8)
    assert isinstance(schedule, torch.optim.lr_scheduler.LambdaLR)
    assert config["lr_scheduler"]["interval"] == "epoch"
    assert module.hparams.loss == "bce"
    assert (recipe.WINDOW_SLICES, recipe.WINDOWS_PER_BATCH) == (8, 12)


def test_bce_is_the_default_and_dice_bce_adds_a_soft_dice_term() -> None:
    logits = torch.tensor([[-2.0, 3.0], [0.5, -1.0]]).reshape(1, 1, 1, 2, 2)
    target = torch.tensor([[0.0, 1.0], [1.0, 0.0]]).reshape(1, 1, 1, 2, 2)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, target)
    assert make_loss("bce")(logits, target) == pytest.approx(float(bce))
    p = logits.sigmoid()
    dice = (2 * (p * target).sum() + 1) / (p.sum() + target.sum() + 1)
    assert dice_bce_loss(logits, target) == pytest.approx(float(bce + 1 - dice))
    assert bce_loss is make_loss("bce")
    with pytest.raises(ValueError, match="unknown loss"):
        make_loss("focal")


def test_tversky_is_soft_dice_at_equal_weights_and_weighs_a_miss_over_a_false_mark() -> None:
    logits = torch.tensor([[-2.0, 3.0], [0.5, -1.0]]).reshape(1, 1, 1, 2, 2)
    target = torch.tensor([[0.0, 1.0], [1.0, 0.0]]).reshape(1, 1, 1, 2, 2)
    # (TP + s/2) / (TP + FP/2 + FN/2 + s/2) is (2 TP + s) / (2 TP + FP + FN + s)
    assert soft_tversky_loss(logits, target, 0.5, 0.5, smooth=0.5) == pytest.approx(float(soft_dice_loss(logits, target)))
    # one lesion of 20 voxels in 100: missing 5 of them costs more than marking 5 extra
    target = torch.zeros(1, 1, 1, 10, 10)
    target[..., :2, :] = 1.0
    missed, extra = target.clone(), target.clone()
    missed[..., 0, :5] = 0.0
    extra[..., 2, :5] = 1.0
    as_logits = lambda mask: (mask * 2.0 - 1.0) * 20.0  # noqa: E731 - a near-binary prediction
    tversky_ratio = soft_tversky_loss(as_logits(missed), target) / soft_tversky_loss(as_logits(extra), target)
    dice_ratio = soft_dice_loss(as_logits(missed), target) / soft_dice_loss(as_logits(extra), target)
    assert float(tversky_ratio) == pytest.approx((1 - 16 / 19.5) / (1 - 21 / 22.5), rel=1e-4)  # TP 15, FN 5 against TP 20, FP 5
    assert float(tversky_ratio) > 2.0 * float(dice_ratio)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(as_logits(missed), target)
    assert make_loss("tversky_bce") is tversky_bce_loss
    assert tversky_bce_loss(as_logits(missed), target) == pytest.approx(float(bce + soft_tversky_loss(as_logits(missed), target)))


def test_any_registry_model_can_be_trained_by_name() -> None:
    module = SegmentationModule("unet", {"widths": [4, 8]})
    logits = module(torch.zeros(1, 2, 3, 16, 16))
    assert logits.shape == (1, 1, 3, 16, 16)
    assert module.architecture() == {"name": "unet", "config": {"widths": [4, 8]}}


def test_activation_checkpointing_keeps_weights_keys_and_gradients() -> None:
    torch.manual_seed(1)
    plain = SegmentationModule("lambda_unet", TINY_MODEL)
    checkpointed = SegmentationModule("lambda_unet", TINY_MODEL, activation_checkpointing=True)
    checkpointed.model.load_state_dict(plain.plain_state_dict())  # wrappers keep the keys
    assert list(checkpointed.plain_state_dict()) == list(plain.plain_state_dict())
    x = torch.randn(1, 2, 4, 32, 32)
    y = (torch.rand(1, 1, 4, 32, 32) > 0.8).float()
    for module in (plain, checkpointed):
        module.train()
        module.loss_fn(module(x), y).backward()
    for (name, a), (_, b) in zip(plain.model.named_parameters(), checkpointed.model.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)


def test_adamw_is_an_option_for_short_budgets() -> None:
    module = SegmentationModule("lambda_unet", TINY_MODEL, optimizer="adamw", learning_rate=2e-3, weight_decay=1e-4)
    optimizer = module.configure_optimizers()["optimizer"]
    assert isinstance(optimizer, torch.optim.AdamW)
    assert (optimizer.param_groups[0]["lr"], optimizer.param_groups[0]["weight_decay"]) == (2e-3, 1e-4)
    with pytest.raises(ValueError, match="unknown optimizer"):
        SegmentationModule("lambda_unet", TINY_MODEL, optimizer="sgd")
