"""The shipped model package (``LambdaSegmentLib/resources/models/lambdaunet-dwi``).

Acceptance of issue 6: the package loads with ``weights_only=True``, its weights match the
SHA-256 of its manifest and of the model card, it is a LambdaUNet in the paper's layout,
and on the real ISLES'22 case in ``../shared`` (skipped when absent) its volume Dice is
above the ADC-threshold rule's on the same case.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from LambdaSegmentLib.inference import BUNDLED_PACKAGE, load_model_package, segment_study, sha256_of_file
from LambdaSegmentLib.io import load_study, read_volume
from LambdaSegmentLib.metrics import adc_threshold_rule, volume_dice

REPO = Path(__file__).resolve().parents[2]
MODEL_CARD = REPO / "docs" / "MODEL_CARD.md"
CASE = REPO.parent / "shared" / "data" / "isles22" / "sub-strokecase0001"


def test_the_bundled_package_loads_and_its_weights_match_the_manifest_and_the_model_card() -> None:
    package = load_model_package()  # verifies the manifest's SHA-256 and loads weights_only
    weights = BUNDLED_PACKAGE / package.manifest["weights_file"]
    assert sha256_of_file(weights) == package.sha256 == package.manifest["weights_sha256"]
    card_hashes = set(re.findall(r"SHA-256 `([0-9a-f]{64})`", MODEL_CARD.read_text(encoding="utf-8")))
    assert card_hashes == {package.sha256}, "docs/MODEL_CARD.md must name the shipped weights' SHA-256"
    assert package.manifest["architecture"]["name"] == "lambda_unet"
    assert package.slice_receptive_radius == 8  # four down blocks of two Lambda+ (T = 3) each
    assert "UNTRAINED" not in str(package.manifest.get("training_data", "")).upper()


@pytest.mark.skipif(not CASE.is_dir(), reason=f"real ISLES'22 case not present at {CASE}")
def test_the_bundled_model_beats_the_adc_rule_on_the_real_case() -> None:
    prefix = CASE / "sub-strokecase0001_ses-0001_"
    study = load_study(dwi=f"{prefix}dwi.nii.gz", adc=f"{prefix}adc.nii.gz")
    truth = np.asarray(read_volume(f"{prefix}msk.nii.gz").array) > 0
    result = segment_study(study, load_model_package(), device="cpu")
    assert result.mask.size_ijk == study.dwi.size_ijk
    np.testing.assert_allclose(result.mask.ijk_to_lps_matrix(), study.dwi.ijk_to_lps_matrix())
    model_dice = volume_dice(np.asarray(result.mask.array) > 0, truth)
    rule_dice = volume_dice(np.asarray(adc_threshold_rule(study).array) > 0, truth)
    assert model_dice > rule_dice, f"bundled model Dice {model_dice:.3f} is not above the ADC rule's {rule_dice:.3f}"
