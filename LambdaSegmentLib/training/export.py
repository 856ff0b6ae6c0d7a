"""From a trained ``SegmentationModule`` to a model package (weights + manifest).

``ExportBestPackage`` rewrites the package every time the monitored validation metric
improves, so a usable package exists whenever training is stopped.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

import lightning as L
import torch

from LambdaSegmentLib.inference import save_model_package
from LambdaSegmentLib.models import create_model

from . import recipe
from .clock import TrainingClock
from .module import SegmentationModule


#: Libraries whose versions a package records beside torch and Lightning: the same command on
#: the same revision can train other weights under other library releases (issue 13's rule 119:
#: 2.5.0's release command on its own revision, rebuilt three days later under newer libraries,
#: gave other weights; which release moved them was not recorded).
RECORDED_LIBRARIES = ("numpy", "scipy", "SimpleITK", "einops", "torchmetrics", "nilearn")


def library_versions() -> dict[str, str | None]:
    """The installed version of each of :data:`RECORDED_LIBRARIES` (None where not installed)."""
    versions: dict[str, str | None] = {}
    for name in RECORDED_LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def source_revision() -> str | None:
    """The git commit of the library's checkout (with "+dirty" when modified), if any."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=10)
        if commit.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "LambdaSegmentLib"], capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=10
        )
        return commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def hardware_description() -> str:
    """e.g. "cpu: x86_64, 2 threads" or "cuda: NVIDIA H100 80GB HBM3 x1"."""
    if torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    return f"cpu: {platform.machine()} {platform.processor() or ''}".strip() + f", {torch.get_num_threads()} threads"


def build_manifest(
    module: SegmentationModule,
    preprocessing: dict[str, Any],
    *,
    name: str,
    version: str,
    training_data: dict[str, Any],
    training: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest ``save_model_package`` completes (weights file, SHA-256, created)."""
    hp = module.hparams
    return {
        "name": name,
        "version": version,
        "architecture": module.architecture(),
        "preprocessing": dict(preprocessing),
        "slice_context": getattr(module.model, "slice_context", None),
        "threshold": float(hp.threshold),
        "training_data": training_data,
        "training": {
            "loss": hp.loss,
            "optimizer": (
                {"name": "AdamW", "lr": hp.learning_rate, "weight_decay": hp.weight_decay}
                if hp.get("optimizer", "rmsprop") == "adamw"
                else {"name": "RMSprop", "lr": hp.learning_rate, "momentum": hp.momentum, "weight_decay": hp.weight_decay}
            ),
            "schedule": f"lr constant for {hp.constant_epochs} epochs, then linear to 0 at epoch {hp.decay_end_epoch}",
            "activation_checkpointing": bool(hp.activation_checkpointing),
            "library_revision": source_revision(),
            "torch": torch.__version__,
            "lightning": L.__version__,
            "libraries": library_versions(),
            "hardware": hardware_description(),
            **(training or {}),
        },
    }


def export_package(module: SegmentationModule, manifest: dict[str, Any], directory: str | Path, *, fp16: bool = False) -> Path:
    """Write ``module``'s network as a package in ``directory``, replacing it as a whole.

    The package is written beside the target first and then moved into place, so a reader
    never sees half a package.
    """
    directory = Path(directory)
    network = create_model(module.model_name, **module.model_config)
    network.load_state_dict(module.plain_state_dict(), strict=True)
    staging = directory.with_name(directory.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)
    save_model_package(network, manifest, staging, fp16=fp16)
    previous = directory.with_name(directory.name + ".previous")
    if directory.exists():
        if previous.exists():
            shutil.rmtree(previous)
        directory.rename(previous)
    staging.rename(directory)
    if previous.exists():
        shutil.rmtree(previous)
    return directory


class ExportBestPackage(L.Callback):
    """Export the model package whenever ``monitor`` reaches a new best (rank zero only).

    Args:
        directory: the package directory (replaced as a whole on each export).
        manifest_factory: returns the manifest for the current state (called at export).
        monitor, mode: the validation metric and whether higher ("max") is better.
        fp16: store the weights in half precision.
        clock: the run's :class:`.clock.TrainingClock`, whose seconds (resumed runs included) the
            exported manifest records; a clock of its own if not given.
    """

    def __init__(
        self,
        directory: str | Path,
        manifest_factory: Callable[[SegmentationModule, dict[str, Any]], dict[str, Any]],
        *,
        monitor: str = recipe.MONITOR,
        mode: str = "max",
        fp16: bool = False,
        clock: TrainingClock | None = None,
    ) -> None:
        self.directory, self.manifest_factory = Path(directory), manifest_factory
        self.monitor, self.mode, self.fp16 = monitor, mode, fp16
        self.best: float | None = None
        self.clock = clock or TrainingClock()

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            return
        value = float(value)
        better = self.best is None or (value > self.best if self.mode == "max" else value < self.best)
        if not better:
            return
        self.best = value
        state = {
            "epoch": trainer.current_epoch,
            "global_step": trainer.global_step,
            "seconds": self.clock.seconds(),
            self.monitor: value,
        }
        export_package(module, self.manifest_factory(module, state), self.directory, fp16=self.fp16)
        print(f"exported package to {self.directory} ({self.monitor}={value:.4f}, step {trainer.global_step})", flush=True)

    def state_dict(self) -> dict[str, Any]:
        """Saved in Lightning checkpoints, so a resumed run only exports what beats the best so far."""
        return {"best": self.best}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best = state_dict.get("best")
