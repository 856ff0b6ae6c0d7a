"""``SegmentationModule``: any registered model, its loss, optimiser, schedule and metrics.

The Trainer owns devices, precision, distribution, checkpoints and logging; this module
only says what one step computes. Batches are dicts:

- training: ``{"image": (b, c, t, h, w) float32, "mask": (b, 1, t, h, w) {0, 1}}``;
- validation: whole studies, one per batch, same keys (t = all slices of the study).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import lightning as L
import torch
from torch import nn

from LambdaSegmentLib.models import batch_norms, create_model

from . import recipe
from .batchnorm_noise import add_statistics_noise
from .distillation import Teachers
from .losses import SOFT_TARGET_LOSSES, make_loss

OPTIMIZERS = ("rmsprop", "adamw")


def apply_activation_checkpointing(model: nn.Module) -> list[str]:
    """Recompute the activations of the encoder and decoder blocks in the backward pass.

    Lambda+ layers are light on parameters but heavy on activations (per-pixel lambdas),
    so this trades compute for memory. Wraps the children of ``model.downs`` and
    ``model.ups`` (every UNet-style model of the registry); the state-dict keys do not
    change. Returns the wrapped module names.
    """
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        checkpoint_wrapper,
    )

    wrapped = []
    for container_name in ("downs", "ups"):
        container = getattr(model, container_name, None)
        if not isinstance(container, nn.ModuleList):
            continue
        for index, block in enumerate(container):
            container[index] = checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
            wrapped.append(f"{container_name}.{index}")
    if not wrapped:
        raise ValueError(f"{type(model).__name__} has no downs/ups blocks to checkpoint")
    return wrapped


def unwrapped_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's state dict with the keys of the unwrapped architecture."""
    prefix = "_checkpoint_wrapped_module."
    return {key.replace(prefix, ""): value for key, value in model.state_dict().items()}


class SegmentationModule(L.LightningModule):
    """A registry model trained with the paper's recipe (the defaults).

    Args:
        model_name: a name from :func:`LambdaSegmentLib.models.available_models`.
        model_config: keyword arguments of the model (e.g. ``{"widths": [16, 32, 64, 128, 256]}``).
        loss: a name of ``training.losses.LOSSES``: "bce" (the paper's), "dice_bce", "tversky_bce" or "blob_dice_bce".
        learning_rate: base learning rate (1e-4).
        momentum, weight_decay: RMSprop's (0.9, 1e-8).
        constant_epochs, decay_end_epoch: lr constant for the first ``constant_epochs``,
            then linear decay to 0 at ``decay_end_epoch`` (20, 100).
        threshold: probability at which validation masks are cut (0.5).
        activation_checkpointing: recompute block activations in the backward pass.
        optimizer: "rmsprop" (the paper's) or "adamw" (momentum unused; for short budgets).
        freeze_batchnorm: keep BatchNorms in eval mode while training: True for every one, or
            names of submodules (as ``frozen_modules``, e.g. ``("inc", "downs.0")``) for those
            inside them. Such a BatchNorm normalises with its running statistics (the
            ``--init-weights`` package's, or e.g. re-estimated on whole studies,
            ``benchmarks/dropped_slice.py recalibrate``) and never updates them, so training
            computes what inference computes there; its scale and shift and every other weight
            still learn. The default (False) is the paper's: batch statistics in training, running
            ones at inference.
        frozen_modules: names of the model's submodules, top-level or dotted paths (e.g.
            ``("inc", "downs")``, LambdaUNet's encoder, or ``("inc", "downs.0")``, its two
            highest-resolution levels) that do not train: their parameters get no gradient and stay
            out of the optimiser, and they stay in eval mode (their BatchNorms normalise with,
            and keep, the ``--init-weights`` package's statistics), so they compute exactly the
            starting package's features. Empty (the default): everything trains.
        frozen_statistics: what ``frozen_modules``' BatchNorms do with their running statistics:
            "keep" (the default: eval mode, as above) or "update" (train mode: they normalise with
            batch statistics and re-estimate their running ones on this run's windows, while every
            weight of the frozen modules stays fixed).
        batchnorm_noise: standard deviation of the noise on every training BatchNorm's
            statistics (``training.batchnorm_noise``: its mean shifted by δ·σ and its standard
            deviation scaled by e^η, δ, η ~ N(0, SD) per channel and pass); 0 (the default): none.
            Training only: inference computes exactly what it would without it.
        teachers: networks whose mean probability the student also learns
            (``training.distillation``); None (the default): none. Held outside the module's
            submodules, so they are in no state dict, checkpoint or package.
        distill_weight: ``w`` of ``(1 - w) · loss(logits, mask) + w · loss(logits, teachers'
            probability)``, in (0, 1] with teachers; 0 (the default) without.

    Logged: ``train_loss`` (per step), ``val_loss``, ``val_dice`` (mean over validation
    studies of the volume Dice at ``threshold``, 0 for a study whose logits are not all
    finite; the checkpoint monitor), ``val_dsc`` (the paper's per-slice DSC) and
    ``val_nonfinite`` (fraction of studies with NaN/inf logits).
    """

    def __init__(
        self,
        model_name: str = "lambda_unet",
        model_config: dict[str, Any] | None = None,
        loss: str = "bce",
        learning_rate: float = recipe.LEARNING_RATE,
        momentum: float = recipe.MOMENTUM,
        weight_decay: float = recipe.WEIGHT_DECAY,
        constant_epochs: int = recipe.CONSTANT_EPOCHS,
        decay_end_epoch: int = recipe.DECAY_END_EPOCH,
        threshold: float = recipe.THRESHOLD,
        activation_checkpointing: bool = False,
        optimizer: str = "rmsprop",
        freeze_batchnorm: bool | Sequence[str] = False,
        frozen_modules: Sequence[str] = (),
        frozen_statistics: str = "keep",
        batchnorm_noise: float = 0.0,
        teachers: Teachers | None = None,
        distill_weight: float = 0.0,
    ) -> None:
        super().__init__()
        # Neither is a hyperparameter of the network: a module loaded from a checkpoint (to export
        # or evaluate it) has no teachers, and the manifest records them (cli.train).
        self.save_hyperparameters(ignore=["teachers", "distill_weight"])
        self.model_name = model_name
        self.model_config = dict(model_config or {})
        self.model = create_model(model_name, **self.model_config)
        self.loss_fn = make_loss(loss)
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {optimizer!r}; available: {', '.join(OPTIMIZERS)}")
        if frozen_statistics not in ("keep", "update"):
            raise ValueError(f"frozen_statistics must be keep or update, not {frozen_statistics!r}")
        submodules = dict(self.model.named_modules())

        def refuse_unknown(names: Sequence[str], what: str) -> None:
            unknown = [name for name in names if not name or name not in submodules]
            if unknown or not names:
                children = [name for name, _ in self.model.named_children()]
                raise ValueError(
                    f"cannot freeze {what}{unknown or 'no submodule'}: {model_name}'s top-level submodules are "
                    f"{children} (a dotted path such as downs.0 names one inside them)"
                )

        if frozen_modules:
            refuse_unknown(frozen_modules, "")
        for name in frozen_modules:
            submodules[name].requires_grad_(False)
        if not isinstance(freeze_batchnorm, bool):
            refuse_unknown(freeze_batchnorm, "the BatchNorms of ")
        if not (math.isfinite(batchnorm_noise) and batchnorm_noise >= 0):
            raise ValueError(f"batchnorm_noise must be a finite number >= 0, not {batchnorm_noise}")
        if (teachers is None) != (distill_weight == 0.0) or not 0.0 <= distill_weight <= 1.0:
            raise ValueError(f"distill_weight must be in (0, 1] with teachers and 0 without, not {distill_weight}")
        if teachers is not None and loss not in SOFT_TARGET_LOSSES:
            raise ValueError(f"distillation needs a loss defined for a probability as target ({', '.join(SOFT_TARGET_LOSSES)}), not {loss}")
        # a dataclass, not a submodule: the teachers never train and are never saved with the student
        self.teachers = teachers
        self.distill_weight = distill_weight
        if batchnorm_noise > 0:
            # the hooks act in train mode only; a checkpointed block's recomputation draws the
            # same noise again (torch.utils.checkpoint restores the generator's state)
            add_statistics_noise(self.model, batchnorm_noise)
        if activation_checkpointing:
            apply_activation_checkpointing(self.model)
        # Lightning records each submodule's mode when fitting starts and restores it after
        # validation, so the BatchNorms must already be in eval mode here, not only in train().
        self.train(self.training)

    def train(self, mode: bool = True) -> "SegmentationModule":
        """Lightning's train/eval switch, with the BatchNorms left in eval mode under ``freeze_batchnorm``."""
        super().train(mode)
        if not mode:
            return self
        submodules = dict(self.model.named_modules())
        frozen_norms = self.hparams.get("freeze_batchnorm", False)
        if frozen_norms:
            for scope in [self.model] if frozen_norms is True else [submodules[name] for name in frozen_norms]:
                for norm in batch_norms(scope):
                    norm.eval()
        if self.hparams.get("frozen_statistics", "keep") == "keep":
            for name in self.hparams.get("frozen_modules", ()):
                submodules[name].eval()
        return self

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters the optimiser updates (all but ``frozen_modules``')."""
        return [parameter for parameter in self.parameters() if parameter.requires_grad]

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        """image (b, c, t, h, w) → logits (b, 1, t, h, w)."""
        return self.model(image)

    def training_step(self, batch: dict[str, torch.Tensor], batch_index: int) -> torch.Tensor:
        logits = self(batch["image"])
        loss = self.loss_fn(logits, batch["mask"])
        if self.teachers is not None:
            weight = self.distill_weight
            distilled = self.loss_fn(logits, self.teachers.probability(batch["image"]))
            self.log("train_distill_loss", distilled, batch_size=batch["image"].shape[0])
            loss = (1.0 - weight) * loss + weight * distilled
        self.log("train_loss", loss, prog_bar=True, batch_size=batch["image"].shape[0])
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_index: int) -> None:
        from LambdaSegmentLib.metrics import per_slice_dice, volume_dice

        logits = self(batch["image"])
        target = batch["mask"]
        loss = self.loss_fn(logits, target)
        predicted = (logits.float().sigmoid() >= self.hparams.threshold)
        # Inference refuses a study whose output holds NaN/inf, so such a study scores 0
        # here: the checkpoint monitor never prefers a model that fails on real data.
        finite = [bool(torch.isfinite(case).all()) for case in logits]
        dice = torch.tensor(
            [volume_dice(p[0].cpu().numpy(), g[0].cpu().numpy()) if ok else 0.0 for p, g, ok in zip(predicted, target, finite)]
        ).mean()
        dsc = torch.tensor([per_slice_dice(p[0], g[0], slice_axis=0) for p, g in zip(predicted, target)]).mean()
        size = batch["image"].shape[0]
        self.log("val_loss", loss, batch_size=size, sync_dist=True)
        self.log(recipe.MONITOR, dice.to(self.device), prog_bar=True, batch_size=size, sync_dist=True)
        self.log("val_dsc", dsc.to(self.device), batch_size=size, sync_dist=True)
        self.log("val_nonfinite", torch.tensor(float(not all(finite)), device=self.device), batch_size=size, sync_dist=True)

    def configure_optimizers(self) -> dict[str, Any]:
        hp = self.hparams
        if hp.get("optimizer", "rmsprop") == "adamw":
            optimizer = torch.optim.AdamW(self.trainable_parameters(), lr=hp.learning_rate, weight_decay=hp.weight_decay)
        else:
            optimizer = torch.optim.RMSprop(
                self.trainable_parameters(), lr=hp.learning_rate, momentum=hp.momentum, weight_decay=hp.weight_decay
            )
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda epoch: recipe.paper_lr_factor(epoch, hp.constant_epochs, hp.decay_end_epoch)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "epoch"}}

    def architecture(self) -> dict[str, Any]:
        """The manifest's ``architecture`` block: how ``create_model`` rebuilds this model."""
        return {"name": self.model_name, "config": self.model_config}

    def plain_state_dict(self) -> dict[str, torch.Tensor]:
        """The network's weights under the architecture's own keys (checkpoint wrappers removed)."""
        return unwrapped_state_dict(self.model)
