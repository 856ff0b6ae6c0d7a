"""Where the bundled model errs on the real ISLES'22 case, and what it does on the demo study.

The numbers behind "Known limits" in ``docs/MODEL_CARD.md``:

- real case: predicted, true-positive and false-positive mL, and how much of the false
  positive lies in the skull-base band (slices 19-25 as stored, where the susceptibility
  pile-up is); DWI (/ brain median) and ADC percentiles of the bright voxels (> 2.5x the
  median) in that band and of the expert mask; the brain's ADC median (ADC < 2, CSF left out);
- the embedded demo study: the bundled model's volume Dice and mL against its mask.

    .venv/bin/python benchmarks/bundled_model_errors.py      # -> benchmarks/results/bundled_model_errors.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.cli.demo import DEMO_STUDY_DIR  # noqa: E402
from LambdaSegmentLib.inference import load_model_package, segment_study  # noqa: E402
from LambdaSegmentLib.io import Study, load_study, read_volume  # noqa: E402
from LambdaSegmentLib.metrics import volume_dice  # noqa: E402

CASE = REPO.parent / "shared" / "data" / "isles22" / "sub-strokecase0001"
SKULL_BASE_SLICES = slice(19, 26)  # stored slices 19-25 of the real case
OUT = REPO / "benchmarks" / "results" / "bundled_model_errors.json"


def percentiles(values: np.ndarray, qs: tuple[int, ...]) -> list[float]:
    return [round(float(v), 3) for v in np.percentile(values, qs)]


def predicted_mask(study: Study, package) -> np.ndarray:  # noqa: ANN001
    return np.asarray(segment_study(study, package, device="cpu").mask.array) > 0


def real_case(package) -> dict:  # noqa: ANN001
    prefix = str(CASE / "sub-strokecase0001_ses-0001_")
    study = load_study(dwi=prefix + "dwi.nii.gz", adc=prefix + "adc.nii.gz")
    truth = np.asarray(read_volume(prefix + "msk.nii.gz").array) > 0
    predicted = predicted_mask(study, package)
    ml = study.dwi.voxel_volume_mm3 / 1000
    dwi, adc = np.asarray(study.dwi.array, float), np.asarray(study.adc.array, float)
    brain = adc > 0
    median = float(np.median(dwi[brain]))
    false_positive = predicted & ~truth
    band = np.zeros_like(brain)
    band[SKULL_BASE_SLICES] = True
    bright = band & brain & (dwi > 2.5 * median)
    return {
        "predicted_ml": round(float(predicted.sum() * ml), 2),
        "true_positive_ml": round(float((predicted & truth).sum() * ml), 2),
        "false_positive_ml": round(float(false_positive.sum() * ml), 2),
        "false_positive_ml_in_skull_base_slices_19_25": round(float((false_positive & band).sum() * ml), 2),
        "brain_adc_median_below_2": round(float(np.median(adc[brain & (adc < 2)])), 3),
        "expert_mask_adc_p10_p50_p90": percentiles(adc[truth], (10, 50, 90)),
        "expert_mask_dwi_over_median_p10_p50_p90": percentiles(dwi[truth] / median, (10, 50, 90)),
        "skull_base_bright_voxels": int(bright.sum()),
        "skull_base_bright_dwi_over_median_p10_p50_p90_p99": percentiles(dwi[bright] / median, (10, 50, 90, 99)),
        "skull_base_bright_adc_p10_p50_p90": percentiles(adc[bright], (10, 50, 90)),
    }


def demo_study(package) -> dict:  # noqa: ANN001
    folder = next(DEMO_STUDY_DIR.rglob("*_dwi.nii.gz")).parent
    (dwi,) = folder.glob("*_dwi.nii.gz")
    (adc,) = folder.glob("*_adc.nii.gz")
    (mask,) = folder.glob("*_msk.nii.gz")
    study = load_study(dwi=dwi, adc=adc)
    truth = np.asarray(read_volume(mask).array) > 0
    predicted = predicted_mask(study, package)
    ml = study.dwi.voxel_volume_mm3 / 1000
    return {"volume_dice": round(volume_dice(predicted, truth), 3),
            "predicted_ml": round(float(predicted.sum() * ml), 2), "true_ml": round(float(truth.sum() * ml), 2)}


def main() -> None:
    package = load_model_package()
    results = {"package": f"{package.name} {package.version}", "weights_sha256": package.sha256, "demo_study": demo_study(package)}
    if CASE.is_dir():
        results["real_case"] = {"case": CASE.name, **real_case(package)}
    OUT.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
