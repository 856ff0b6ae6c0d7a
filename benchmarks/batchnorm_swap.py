"""Diagnostic: which BatchNorms' statistics decide whether a stage-2 model finds whole-territory
infarcts? (issue 13, ``--precise-batchnorm``)

Two packages with the same learned weights and different running statistics, e.g. the moving
averages training left (``first``) and statistics re-estimated on fresh batches (``second``).
Each hybrid takes ``second``'s statistics in one group of BatchNorms and ``first``'s everywhere
else; every hybrid is scored on ``real_scan_cv.py``'s six whole-territory synthetic studies
(seeds 31,100,000+) and, with ``--real``, on real cases: volume Dice of probability ≥ 0.5 inside
the brain mask, no post-processing (the network alone). A diagnostic, not a held-out claim.

    .venv/bin/python benchmarks/batchnorm_swap.py runs/cv-rms/foldA/pkg runs/cv-rms-pbn/foldA/pkg \\
        --real 0003 --output benchmarks/results/batchnorm_swap_cv-rms_foldA.json
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from batchnorm_shift import require_same_weights  # noqa: E402
from real_scan_cv import SYNTHETIC_LARGE_RANGES, SYNTHETIC_LARGE_SEEDS, load_real, synthetic  # noqa: E402

from LambdaSegmentLib.inference import ModelPackage, load_model_package, segment_study  # noqa: E402
from LambdaSegmentLib.metrics import volume_dice  # noqa: E402

# name prefixes of the LambdaUNet's BatchNorms (models.lambda_unet): the stem, the four Lambda+
# down levels, the four up levels
GROUPS: dict[str, tuple[str, ...]] = {
    "none": (),
    "all": ("",),
    "encoder": ("inc.", "downs."),
    "decoder": ("ups.",),
    "stem": ("inc.",),
    **{f"down{level}": (f"downs.{level}.",) for level in range(4)},
    **{f"up{level}": (f"ups.{level}.",) for level in range(4)},
}
STATISTICS = ("running_mean", "running_var")


def hybrid(first: ModelPackage, second: ModelPackage, prefixes: tuple[str, ...]) -> tuple[ModelPackage, int]:
    """``first`` with the running statistics of ``second``'s BatchNorms whose names start with one of
    ``prefixes``; how many BatchNorms were swapped (the learned tensors are checked identical in ``main``)."""
    model = copy.deepcopy(first.model)
    theirs = dict(second.model.named_modules())
    swapped = 0
    for name, module in model.named_modules():
        if isinstance(module, nn.BatchNorm2d) and any(name.startswith(prefix) for prefix in prefixes):
            other = theirs[name]
            for statistic in STATISTICS:
                getattr(module, statistic).copy_(getattr(other, statistic))
            swapped += 1
    return dataclasses.replace(first, model=model), swapped


def network_dice(package: ModelPackage, study, truth: np.ndarray) -> float:
    """Volume Dice of the network's probability ≥ 0.5 inside the brain mask (no post-processing)."""
    segmentation = segment_study(study, package, device="cpu", tta=False)
    probability = np.asarray(segmentation.probability.array)
    return volume_dice(probability >= 0.5, np.asarray(truth) != 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path, help="the package whose statistics are kept outside the swapped group")
    parser.add_argument("second", type=Path, help="the package whose statistics are swapped in")
    parser.add_argument("--groups", nargs="+", default=["none", "all", "encoder", "decoder"], choices=list(GROUPS))
    parser.add_argument("--real", nargs="*", default=[], metavar="CASE", help="ISLES'22 cases to score natively too (e.g. 0003)")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    first, second = load_model_package(args.first), load_model_package(args.second)
    require_same_weights(first.model.state_dict(), second.model.state_dict(), "batchnorm_swap")
    studies = [(f"synth-{seed}", *synthetic(seed, **SYNTHETIC_LARGE_RANGES)) for seed in SYNTHETIC_LARGE_SEEDS]
    studies += [(f"{case}-native", *load_real(case, thick=False)) for case in args.real]
    rows: dict[str, dict[str, float | int]] = {}
    start = time.perf_counter()
    for group in args.groups:
        package, swapped = hybrid(first, second, GROUPS[group])
        dice = {name: network_dice(package, study, truth) for name, study, truth in studies}
        synthetic_dice = [value for name, value in dice.items() if name.startswith("synth-")]
        rows[group] = {"batch_norms_swapped": swapped, "large_synthetic_mean_dice": float(np.mean(synthetic_dice)), **dice}
        print(f"{group:8s} ({swapped:2d} BatchNorms from second): large synthetic {np.mean(synthetic_dice):.3f}  "
              + "  ".join(f"{name} {value:.3f}" for name, value in dice.items()), flush=True)
    if args.output:
        args.output.write_text(json.dumps({"first": str(args.first), "second": str(args.second),
                                           "threshold": 0.5, "seconds": round(time.perf_counter() - start, 1),
                                           "hybrids": rows}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
