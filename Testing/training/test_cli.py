"""``lambdasegment train`` (single process and DDP with 2 CPU processes) and ``lambdasegment evaluate``."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from LambdaSegmentLib.cli import main
from LambdaSegmentLib.inference import load_model_package

from lambdasegment_training_helpers import TINY_MODEL, TINY_PREPROCESSING, TINY_RANGES

REPO = Path(__file__).resolve().parents[2]


def train_args(output: Path, *extra: str) -> list[str]:
    return [
        "train", "--model", "lambda_unet", "--model-config", json.dumps(TINY_MODEL),
        "--preprocessing", json.dumps(TINY_PREPROCESSING), "--synthesis", json.dumps(TINY_RANGES),
        "--synthetic", "2", "--windows-per-study", "2", "--batch-size", "2", "--window-size", "32", "32",
        "--max-epochs", "2", "--accelerator", "cpu", "--output", str(output), *extra,
    ]


@pytest.mark.needs_atlas
def test_train_exports_the_best_package_with_its_training_data(labelled_folders: tuple[Path, Path], tmp_path: Path) -> None:
    output = tmp_path / "pkg"
    assert main(train_args(output, "--data", str(labelled_folders[0]), "--val-data", str(labelled_folders[1]), "--devices", "1")) == 0
    package = load_model_package(output)
    manifest = package.manifest
    assert manifest["architecture"]["name"] == "lambda_unet" and manifest["threshold"] == 0.5
    data = manifest["training_data"]
    assert data["real_training_cases"] == ["sub-train01_ses-0001"]  # a mix: real and synthetic
    assert data["synthetic"]["seeds"] == [0, 3] and data["synthetic"]["studies_per_epoch"] == 2
    assert manifest["training"]["epochs"] == 2 and "val_dice" in manifest["training"]
    # the libraries that decide the weights bit for bit beside torch and Lightning (rule 119)
    import numpy
    import SimpleITK

    libraries = manifest["training"]["libraries"]
    assert libraries["numpy"] == numpy.__version__ and libraries["SimpleITK"] == SimpleITK.Version_VersionString()
    # last.ckpt is the latest epoch whether or not it was the best, so --resume loses nothing.
    last = torch.load(tmp_path / "pkg.training" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["epoch"] == 1 and last["global_step"] == manifest["training"]["global_step"]
    # Never overwrite a package silently.
    assert main(train_args(output, "--devices", "1")) == 2


@pytest.mark.needs_atlas
def test_train_runs_ddp_with_two_cpu_processes(tmp_path: Path) -> None:
    output = tmp_path / "pkg"
    args = train_args(output, "--devices", "2", "--strategy", "ddp", "--val-synthetic", "1")
    args[args.index("--max-epochs") + 1] = "1"
    command = [sys.executable, "-m", "LambdaSegmentLib", *args]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PL_DISABLE_FORK": "1"}
    result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=400)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert "distributed_backend=gloo" in log and "MEMBER: 2/2" in log
    manifest = load_model_package(output).manifest
    assert manifest["training"]["devices"] == "2" and manifest["training"]["strategy"] == "ddp"


@pytest.mark.needs_atlas
def test_evaluate_prints_table_one_and_writes_csv(labelled_folders: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from LambdaSegmentLib.inference.untrained import save_untrained_package

    package = save_untrained_package(tmp_path / "untrained", preprocessing=TINY_PREPROCESSING)
    table = tmp_path / "table.csv"
    cases = tmp_path / "cases.csv"
    assert main(["evaluate", "--models", str(package), "--data", str(labelled_folders[1]), "--csv", str(table), "--per-case-csv", str(cases), "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert "Method" in printed and "Recall/Precision" in printed and "LesF1" in printed
    rows = list(csv.DictReader(table.open()))
    assert [row["method"] for row in rows] == ["untrained-lambda_unet 0.0.0+seed0", "ADC rule (ADC<0.62, DWI>1.2x median)"]
    assert rows[0]["dims"] == "2.5D" and rows[0]["cases"] == "1"
    for key in ("dsc", "recall", "precision", "f1", "volume_dice", "lesion_f1", "abs_volume_difference_ml", "abs_lesion_count_difference"):
        assert 0 <= float(rows[0][key])
    assert len(list(csv.DictReader(cases.open()))) == 2
    # The CSV is never overwritten silently; the thick-slice setting has its own table.
    assert main(["evaluate", "--models", str(package), "--data", str(labelled_folders[1]), "--csv", str(table)]) == 2
    assert main(["evaluate", "--models", str(package), "--data", str(labelled_folders[1]), "--csv", str(table), "--overwrite", "--thick-slab", "2", "--no-rule"]) == 0
    assert "2 slices averaged per slab" in capsys.readouterr().out
    # Two packages with the same name and version: every row names its package's path, the first too.
    twin = tmp_path / "twin"
    shutil.copytree(package, twin)
    assert main(["evaluate", "--models", str(package), str(twin), "--data", str(labelled_folders[1]), "--csv", str(table), "--overwrite", "--no-rule"]) == 0
    assert [row["method"] for row in csv.DictReader(table.open())] == [
        f"untrained-lambda_unet 0.0.0+seed0 ({package})", f"untrained-lambda_unet 0.0.0+seed0 ({twin})"]


def test_evaluate_writes_its_csv_in_utf8_whatever_the_locale(tmp_path: Path, c_locale: None) -> None:
    """A row naming a non-ASCII package path (``ü``) or a ``≥`` is written with the locale at C,
    and reads back as UTF-8."""
    from LambdaSegmentLib.cli.evaluate import write_csv

    path = tmp_path / "table.csv"
    write_csv(path, [{"method": "lambdaunet (/data/Modelle/über)", "dims": "2.5D", "note": "DWI ≥ 1.2×"}])
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert rows == [{"method": "lambdaunet (/data/Modelle/über)", "dims": "2.5D", "note": "DWI ≥ 1.2×"}]


def test_train_refuses_an_unknown_frozen_module_naming_the_option_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    output = tmp_path / "pkg"
    assert main(train_args(output, "--freeze-modules", "encoder", "--devices", "1")) == 2
    error = capsys.readouterr().err
    assert "--freeze-modules" in error and "cannot freeze ['encoder']" in error and "inc" in error and "Traceback" not in error
    assert not output.exists()


def trained_weights(output: Path, *extra: str) -> str:
    """The SHA-256 of the weights of a ``lambdasegment train`` run on synthetic studies alone
    (AdamW, a synthesis worker as in the card's stage-1 commands), written to ``output``."""
    args = train_args(output, "--devices", "1", "--optimizer", "adamw", "--lr", "1e-3", "--constant-epochs", "1",
                      "--decay-end-epoch", "3", "--workers", "1", *extra)
    assert main(args) == 0
    return load_model_package(output).sha256


@pytest.mark.needs_atlas
def test_a_training_run_repeats_bit_for_bit_and_a_resumed_run_matches_an_uninterrupted_one(tmp_path: Path) -> None:
    """Issue 13's paired rules compare a changed stage 1 with its base drawn on the same studies:
    that reads the change only if the same command gives the same weights, including a run that a
    session's end stopped and the next one resumed from ``last.ckpt`` at an epoch's end."""
    once = trained_weights(tmp_path / "once")
    assert trained_weights(tmp_path / "again") == once
    # The check is not vacuous: another seed (other studies and window order) trains other weights.
    assert trained_weights(tmp_path / "other-seed", "--seed", "7") != once
    # Stopped after the first of two epochs, then resumed to the second from its last.ckpt.
    work = tmp_path / "stopped.training"
    trained_weights(tmp_path / "stopped", "--work-dir", str(work), "--max-epochs", "1")  # the later --max-epochs wins
    resumed = trained_weights(tmp_path / "stopped", "--work-dir", str(work), "--resume", str(work / "checkpoints" / "last.ckpt"), "--overwrite")
    assert resumed == once
