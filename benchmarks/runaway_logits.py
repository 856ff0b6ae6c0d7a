"""Runaway activations of Lambda+ stacks, and the weakest slice of each infarct.

The numbers behind the model card's "Architecture" (why the queries are RMS-normalised) and
"A dropped slice" notes. For each model package and study:

- the largest |activation| of the deepest Lambda+ layer and the largest |logit| of one
  plain forward pass (``package.model`` in eval mode, the study as ``prepare_input`` gives
  it), and how many voxels exceed ``inference.engine.RUNAWAY_LOGIT`` (the engine refuses
  such a study);
- where the package is not refused: per slice holding ≥ 100 infarct voxels, the mean
  probability over the infarct (``segment_study``), the weakest such slice with its
  neighbours, and the same slice with the test-time flips (``tta=True``) and their
  disagreement.

Studies: the 226 mL synthetic whole-territory infarct of ``real_scan_cv.py``'s large group
(seed 31,100,003) and, when ``../shared`` is present, the two ISLES'22 cases natively.

    .venv/bin/python benchmarks/runaway_logits.py --packages bundled runs/cv-rms/foldA/pkg runs/cv/foldA/pkg
        # -> benchmarks/results/runaway_logits.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import real_scan_cv  # noqa: E402  (its studies and packages, one definition)

from LambdaSegmentLib.inference import ModelPackage, segment_study  # noqa: E402
from LambdaSegmentLib.inference.engine import RUNAWAY_LOGIT  # noqa: E402
from LambdaSegmentLib.io import Study  # noqa: E402
from LambdaSegmentLib.models import LambdaPlus  # noqa: E402
from LambdaSegmentLib.preprocessing import prepare_input  # noqa: E402
from LambdaSegmentLib.training.export import source_revision  # noqa: E402

LARGE_SEED = 31_100_003
MIN_SLICE_VOXELS = 100


def forward_extremes(package: ModelPackage, study: Study) -> dict[str, float | int]:
    """Largest |activation| of the deepest Lambda+ layer and |logit| over the study, and the
    voxels (model grid) whose |logit| exceeds ``RUNAWAY_LOGIT``."""
    model = package.model.eval()
    deepest = [m for m in model.modules() if isinstance(m, LambdaPlus)][-1]
    seen: dict[str, float] = {}
    hook = deepest.register_forward_hook(lambda _m, _i, out: seen.__setitem__("deepest", float(out.abs().max())))
    channels = torch.from_numpy(np.asarray(prepare_input(study, package.manifest["preprocessing"]).channels, dtype=np.float32))
    try:
        with torch.inference_mode():
            logits = model(channels.unsqueeze(0))
    finally:
        hook.remove()
    finite = torch.isfinite(logits)
    return {"deepest_lambda_abs_max": seen["deepest"],
            "logit_abs_max": float(logits[finite].abs().max()) if finite.any() else float("nan"),
            "non_finite_voxels": int((~finite).sum()),
            "runaway_voxels": int((logits.abs() > RUNAWAY_LOGIT).sum())}


def slice_means(probability: np.ndarray, truth: np.ndarray) -> dict[int, float]:
    """Mean probability over the infarct of every slice holding ≥ MIN_SLICE_VOXELS of it."""
    return {k: round(float(probability[k][truth[k]].mean()), 3)
            for k in range(truth.shape[0]) if truth[k].sum() >= MIN_SLICE_VOXELS}


def weakest_slice(package: ModelPackage, study: Study, truth: np.ndarray) -> dict[str, Any]:
    plain = segment_study(study, package, device="cpu")
    means = slice_means(np.asarray(plain.probability.array), truth)
    if not means:
        return {}
    k = min(means, key=means.get)
    flips = segment_study(study, package, device="cpu", tta=True, uncertainty=True)
    probability, disagreement = np.asarray(flips.probability.array), np.asarray(flips.disagreement.array)
    return {"slice": k, "infarct_voxels": int(truth[k].sum()),
            "mean_probability": means[k],
            "neighbours": {str(n): means[n] for n in (k - 2, k - 1, k + 1, k + 2) if n in means},
            "with_flips_mean_probability": round(float(probability[k][truth[k]].mean()), 3),
            "flip_disagreement": round(float(disagreement[k][truth[k]].mean()), 3)}


def studies() -> list[tuple[str, Study, np.ndarray]]:
    found = [(f"synthetic-{LARGE_SEED}", *real_scan_cv.synthetic(LARGE_SEED, **real_scan_cv.SYNTHETIC_LARGE_RANGES))]
    if real_scan_cv.ISLES.is_dir():
        found += [(real_scan_cv.CASES[case], *real_scan_cv.load_real(case, thick=False)) for case in real_scan_cv.CASES]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", nargs="+", default=["bundled"], metavar="PKG", help="package folders, or bundled")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "runaway_logits.json")
    args = parser.parse_args()
    rows = []
    cases = studies()
    for spec in args.packages:
        package = real_scan_cv.fold_package(spec)
        for name, study, truth in cases:
            row: dict[str, Any] = {"package": spec, "model": f"{package.name} {package.version}",
                                   "query_norm": package.manifest["architecture"]["config"].get("query_norm", "batch"),
                                   "study": name, **forward_extremes(package, study)}
            refused = row["runaway_voxels"] > 0 or row["non_finite_voxels"] > 0
            row["refused_by_segment_study"] = refused
            if not refused:
                row["weakest_infarct_slice"] = weakest_slice(package, study, truth)
            print(json.dumps(row), flush=True)
            rows.append(row)
    args.output.write_text(json.dumps({"command": " ".join(sys.argv), "runaway_logit": RUNAWAY_LOGIT,
                                       "revision": source_revision(), "rows": rows}, indent=1) + "\n")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
