"""bfloat16 autocast vs float32 on a CUDA GPU: do the masks agree?

Run on a machine with a GPU:  .venv/bin/python benchmarks/inference_precision.py [MODEL_DIR]
(default: the bundled package). Segments phantom studies (and the ISLES'22 case in
../shared when present) with --precision auto (bf16 on CUDA) and fp32 and prints the
largest probability difference and the voxels whose mask differs. Writes
benchmarks/results/inference_precision.json. Exits 0 without a GPU, saying so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from LambdaSegmentLib.inference import load_model_package, segment_study
from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.io import load_study

ISLES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "isles22" / "sub-strokecase0001"
RESULTS = Path(__file__).resolve().parent / "results" / "inference_precision.json"


def studies() -> dict:
    cases = {}
    for seed, tilt in ((0, (0.0, 0.0, 0.0)), (1, (10.0, -5.0, 15.0))):
        phantom = make_phantom(seed=seed, tilt_deg=tilt, size_ijk=(96, 112, 24), spacing_mm=(2.0, 2.0, 5.0))
        cases[f"phantom{seed}"] = load_study(dwi=phantom.dwi, adc=phantom.adc)
    if (ISLES / "sub-strokecase0001_ses-0001_dwi.nii.gz").exists():
        cases["isles22-0001"] = load_study(dwi=str(ISLES / "sub-strokecase0001_ses-0001_dwi.nii.gz"),
                                           adc=str(ISLES / "sub-strokecase0001_ses-0001_adc.nii.gz"))
    return cases


def main() -> None:
    if not torch.cuda.is_available():
        print("no CUDA GPU here; nothing to compare (CPU always runs float32)")
        return
    package = load_model_package(sys.argv[1] if len(sys.argv) > 1 else None)
    results = {"model": f"{package.name} {package.version}", "device": torch.cuda.get_device_name(0), "cases": {}}
    for name, study in studies().items():
        bf16 = segment_study(study, package, device="cuda", precision="auto")
        fp32 = segment_study(study, package, device="cuda", precision="fp32")
        differ = int((bf16.mask.array != fp32.mask.array).sum())
        results["cases"][name] = {
            "max_abs_probability_difference": float(np.abs(bf16.probability.array - fp32.probability.array).max()),
            "mask_voxels_differing": differ,
            "mask_voxels_fp32": int(fp32.mask.array.sum()),
            "seconds_bf16": round(bf16.seconds, 3),
            "seconds_fp32": round(fp32.seconds, 3),
        }
        print(name, results["cases"][name], flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
