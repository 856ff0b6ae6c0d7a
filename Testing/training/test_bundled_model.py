"""The shipped model package: it loads, matches its SHA-256, and beats the ADC-threshold rule
on the real ISLES'22 case (which it was validated on, never trained on)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from LambdaSegmentLib.inference import BUNDLED_PACKAGE, load_model_package, segment_study
from LambdaSegmentLib.io import load_study, read_volume
from LambdaSegmentLib.metrics import adc_threshold_rule, volume_dice


def test_bundled_package_loads_and_its_weights_match_the_manifest_sha256() -> None:
    manifest = json.loads((BUNDLED_PACKAGE / "manifest.json").read_text(encoding="utf-8"))
    weights = (BUNDLED_PACKAGE / manifest["weights_file"]).read_bytes()
    assert hashlib.sha256(weights).hexdigest() == manifest["weights_sha256"]
    package = load_model_package()
    assert package.sha256 == manifest["weights_sha256"]
    assert package.manifest["architecture"]["name"] == "lambda_unet"
    assert "synthetic" in package.manifest["training_data"]
    assert package.manifest["training_data"]["real_training_cases"] == []  # synthetic only


def test_bundled_model_segments_the_real_case_better_than_the_adc_rule(isles_case: Path) -> None:
    prefix = isles_case / "sub-strokecase0001_ses-0001_"
    study = load_study(dwi=f"{prefix}dwi.nii.gz", adc=f"{prefix}adc.nii.gz")
    truth = read_volume(f"{prefix}msk.nii.gz").array
    segmentation = segment_study(study, load_model_package(), device="cpu")
    model_dice = volume_dice(segmentation.mask.array, truth)
    rule_dice = volume_dice(adc_threshold_rule(study).array, truth)
    assert model_dice > rule_dice, (model_dice, rule_dice)
