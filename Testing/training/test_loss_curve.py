"""``benchmarks/loss_curve.py``: a run's per-step loss kept from Lightning's metrics.csv, its epoch
means, and the step-by-step difference from a run on the same batches (issue 13's rule 126)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/loss_curve.py")


def metrics_csv(path: Path, losses: dict[int, float], steps_per_epoch: int) -> Path:
    """A CSVLogger-like file: train_loss rows, plus a validation row that has none."""
    lines = ["epoch,step,train_loss,val_dice"]
    for step, loss in losses.items():
        lines.append(f"{step // steps_per_epoch},{step},{loss},")
    lines.append(f"0,{steps_per_epoch - 1},,0.5")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_epoch_means_and_the_paired_difference(script, tmp_path) -> None:
    run = script.read_curve(metrics_csv(tmp_path / "run.csv", {3: 0.5, 7: 0.7, 11: 0.2, 15: 0.4}, 8))
    reference = script.read_curve(metrics_csv(tmp_path / "ref.csv", {3: 0.6, 7: 0.8, 11: 0.4, 19: 9.0}, 8))
    assert script.epoch_means(run) == {0: (2, pytest.approx(0.6)), 1: (2, pytest.approx(0.3))}
    steps, difference, error = script.paired_difference(run, reference)
    assert steps == 3 and difference == pytest.approx((-0.1 - 0.1 - 0.2) / 3)  # step 15 and 19 are not shared
    assert error > 0


def test_the_command_keeps_the_curve_and_refuses_to_overwrite_its_input(tmp_path) -> None:
    metrics = metrics_csv(tmp_path / "metrics.csv", {3: 0.5, 7: 0.7, 11: 0.2}, 8)
    kept = tmp_path / "kept" / "pretrain_loss.csv"
    command = [sys.executable, str(ROOT / "benchmarks/loss_curve.py"), str(metrics)]
    result = subprocess.run([*command, "--output", str(kept), "--paired", str(metrics)], capture_output=True, text=True, check=True)
    assert kept.read_text().splitlines() == ["epoch,step,train_loss", "0,3,0.5", "0,7,0.7", "1,11,0.2"]
    assert "epoch 0: 2 steps, mean loss 0.6000; paired run 2 steps, 0.6000" in result.stdout
    assert "paired over 3 steps: mean difference +0.0000" in result.stdout
    refused = subprocess.run([*command, "--output", str(metrics)], capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "not overwriting it" in refused.stderr
    assert metrics.read_text().startswith("epoch,step,train_loss,val_dice")
