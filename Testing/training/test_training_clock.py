"""A resumed run's training seconds include those of the run it resumed (training/clock.py)."""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from LambdaSegmentLib.training import latest_checkpoint
from LambdaSegmentLib.training.clock import TrainingClock

STEP_SECONDS = 0.05
ROUNDING = 0.05  # the clock reports tenths of a second


class SlowRegression(L.LightningModule):
    """One linear layer whose every step takes at least STEP_SECONDS of wall clock."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: list[torch.Tensor], batch_index: int) -> torch.Tensor:
        time.sleep(STEP_SECONDS)
        inputs, targets = batch
        return torch.nn.functional.mse_loss(self.layer(inputs), targets)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=2)  # 4 steps an epoch


def fit(work: Path, epochs: int, resume: Path | None = None) -> TrainingClock:
    clock = TrainingClock()
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=epochs, callbacks=[clock, latest_checkpoint(work)], logger=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(SlowRegression(), ckpt_path=resume)
    return clock


def test_resumed_run_counts_the_seconds_of_the_epochs_it_resumed(tmp_path: Path) -> None:
    first = fit(tmp_path, epochs=2)  # 8 steps
    recorded = torch.load(tmp_path / "last.ckpt", map_location="cpu", weights_only=True)["callbacks"][first.state_key]["seconds"]
    assert recorded >= 8 * STEP_SECONDS - ROUNDING

    resumed = fit(tmp_path, epochs=3, resume=tmp_path / "last.ckpt")  # 4 more steps in this process
    assert resumed.earlier == recorded
    assert resumed.seconds() >= recorded + 4 * STEP_SECONDS - ROUNDING
    # Without a checkpoint a clock starts at zero.
    assert TrainingClock().seconds() < 8 * STEP_SECONDS
