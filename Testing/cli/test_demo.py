"""``lambdasegment demo`` writes mask, report and overlay for the embedded study."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from lambdasegment_cli_helpers import lambdasegment

from LambdaSegmentLib.cli.demo import DEMO_STUDY_DIR
from LambdaSegmentLib.inference import BUNDLED_PACKAGE
from LambdaSegmentLib.io import read_volume
from LambdaSegmentLib.metrics import volume_dice


def test_demo_writes_mask_report_and_overlay_and_will_not_overwrite_them(tmp_path: Path) -> None:
    output = tmp_path / "demo"
    result = lambdasegment("demo", output, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    for name in ("demo_mask.nii.gz", "demo_report.json", "demo_report.csv", "demo_report.png"):
        assert (output / name).is_file(), name
    report = json.loads((output / "demo_report.json").read_text(encoding="utf-8"))
    assert "Research use only" in result.stdout
    if not BUNDLED_PACKAGE.is_dir():  # the fallback must say, everywhere, that it means nothing
        assert "UNTRAINED, for plumbing only" in result.stdout
        assert "UNTRAINED" in result.stderr
        assert report["model"]["training_data"] == "UNTRAINED, for plumbing only"
    else:  # the shipped model finds the embedded study's infarct (Dice 0.78 when measured)
        assert "UNTRAINED" not in result.stdout + result.stderr
        embedded = next(DEMO_STUDY_DIR.rglob("*_msk.nii.gz"))
        truth = np.asarray(read_volume(embedded).array) > 0
        predicted = np.asarray(read_volume(output / "demo_mask.nii.gz").array) > 0
        assert volume_dice(predicted, truth) > 0.5

    mask_bytes = (output / "demo_mask.nii.gz").read_bytes()
    again = lambdasegment("demo", output, "--device", "cpu")
    assert again.returncode == 2 and "already exists" in again.stderr and "--overwrite" in again.stderr
    assert (output / "demo_mask.nii.gz").read_bytes() == mask_bytes
