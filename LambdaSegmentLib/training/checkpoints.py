"""The Lightning checkpoints a training run keeps: the best so far and the latest."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.callbacks import ModelCheckpoint

from . import recipe


def best_checkpoint(dirpath: Path) -> ModelCheckpoint:
    """``best-{epoch}-{step}.ckpt``: the epoch with the highest validation Dice (``recipe.MONITOR``)."""
    return ModelCheckpoint(dirpath=dirpath, monitor=recipe.MONITOR, mode="max", filename="best-{epoch}-{step}")


def latest_checkpoint(dirpath: Path) -> ModelCheckpoint:
    """``last.ckpt``, rewritten after every epoch (or every validation), for ``--resume``.

    Lightning's own ``save_last`` writes it only when a best checkpoint is saved, so a run
    resumed from it would train again every epoch since the last best.
    """
    return ModelCheckpoint(dirpath=dirpath, filename="last", monitor=None, save_top_k=1, enable_version_counter=False)
