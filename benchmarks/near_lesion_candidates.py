"""What a "shower" step could add: weaker candidates near the lesions a fold already finds, on its held-out case.

    .venv/bin/python benchmarks/near_lesion_candidates.py --label dprime-d2prime \\
        benchmarks/results/real_scan_cv/ROW-seed51000005-unseeded-nlbf.json [...]
        # -> benchmarks/results/near_lesion_candidates_dprime-d2prime.json

An embolic shower is many small lesions in one territory; a reader who has found some looks
harder around them. The step this measures (not in the product): after the row's own
post-processing, add every candidate component at a lower threshold (0.1 or 0.2, in the brain)
that lies outside the row's mask and within R mm (3, 10, 20 or 40; Euclidean, in mm, to the
nearest voxel) of a lesion the row kept; with ``--anchor-max-ml V`` only kept lesions smaller
than V mL count as anchors (a shower's emboli, not a large infarct whose margin the candidates
would otherwise follow). Per result file, fold and
(threshold, R): the candidates added (and of them those touching the expert mask), the expert
lesions (26-connected components) the mask reaches before and after, and the expert and false
millilitres added. Every (threshold, R) is reported, none chosen: on the held-out case this is
the step's best case over its settings, an upper bound on what a fold's search could find, not
a held-out score. The native held-out case only; each result's package is checked against the
weights it scored (as ``lesion_attrition.py``). Only numbers are written, never images.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from lesion_attrition import prepared_as_scored  # noqa: E402
from real_scan_cv import FOLDS, Prepared  # noqa: E402

from LambdaSegmentLib.metrics import label_lesions  # noqa: E402

THRESHOLDS = (0.1, 0.2)
REACH_MM = (3.0, 10.0, 20.0, 40.0)


def anchors(mask: np.ndarray, voxel_ml: float, max_ml: float | None) -> np.ndarray:
    """bool: the kept lesions (26-connected components of ``mask``) the candidates are measured
    from: all of them, or those under ``max_ml`` mL."""
    if max_ml is None:
        return mask
    labels, count = ndimage.label(mask, structure=np.ones((3, 3, 3), dtype=bool))
    small = np.flatnonzero(np.bincount(labels.ravel(), minlength=count + 1)[1:] * voxel_ml < max_ml) + 1
    return np.isin(labels, small)


def near_candidates(prepared: Prepared, mask: np.ndarray, anchor_max_ml: float | None = None) -> list[dict[str, Any]]:
    """The step's effect at every (threshold, reach) on one prepared case whose row mask is ``mask``."""
    spacing_kji = tuple(float(s) for s in prepared.study.dwi.spacing_mm[::-1])
    millilitres = prepared.study.dwi.voxel_volume_mm3 / 1000.0
    anchor = anchors(mask, millilitres, anchor_max_ml)
    distance = (ndimage.distance_transform_edt(~anchor, sampling=spacing_kji) if anchor.any()
                else np.full(mask.shape, np.inf))
    labels, experts = label_lesions(prepared.truth)
    reached_before = set(np.unique(labels[mask & prepared.truth]).tolist()) - {0}
    rows = []
    for threshold in THRESHOLDS:
        candidates, count = ndimage.label((prepared.probability >= threshold) & prepared.brain & ~mask,
                                          structure=np.ones((3, 3, 3), dtype=bool))
        index = np.arange(1, count + 1)
        nearest = ndimage.minimum(distance, candidates, index) if count else np.zeros(0)
        true_voxels = ndimage.sum(prepared.truth, candidates, index) if count else np.zeros(0)
        for reach in REACH_MM:
            chosen = index[nearest <= reach]
            added = np.isin(candidates, chosen)
            reached = set(np.unique(labels[(mask | added) & prepared.truth]).tolist()) - {0}
            rows.append({
                "threshold": threshold, "reach_mm": reach, "candidates_added": int(len(chosen)),
                "of_them_touching_expert": int((true_voxels[nearest <= reach] > 0).sum()),
                "expert_lesions_reached_after": len(reached),
                "expert_ml_added": round(float(np.count_nonzero(added & prepared.truth)) * millilitres, 3),
                "false_ml_added": round(float(np.count_nonzero(added & ~prepared.truth)) * millilitres, 3),
            })
    return [{"expert_lesions": int(experts), "expert_lesions_reached_before": len(reached_before)}] + rows


def run(result_path: Path, fold: str, anchor_max_ml: float | None = None) -> dict[str, Any]:
    entry = json.loads(result_path.read_text())["folds"][fold]
    if entry.get("partner_package_dir") or entry.get("seed_package_dir"):
        raise SystemExit(f"near_lesion_candidates: {result_path} fold {fold}: one network, unseeded, only")
    _entry, chosen, prepared = prepared_as_scored(result_path, fold, regions=False, tool="near_lesion_candidates")
    head, *rows = near_candidates(prepared, prepared.mask(chosen) != 0, anchor_max_ml)
    return {"result": str(result_path), "fold": fold, "held_out_case": FOLDS[fold][1], "chosen": chosen.as_dict(),
            "anchor_max_ml": anchor_max_ml, **head, "steps": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="real_scan_cv.py result files (one network, unseeded)")
    parser.add_argument("--label", required=True, help="results file: benchmarks/results/near_lesion_candidates_LABEL.json")
    parser.add_argument("--anchor-max-ml", type=float, default=None, metavar="V",
                        help="only kept lesions under V mL are anchors (default: every kept lesion)")
    args = parser.parse_args()
    out = []
    for path in args.results:
        for fold in FOLDS:
            entry = run(path, fold, args.anchor_max_ml)
            best = max(entry["steps"], key=lambda r: r["expert_lesions_reached_after"])
            print(f"{path.name} fold {fold} ({entry['held_out_case']}): {entry['expert_lesions_reached_before']} of "
                  f"{entry['expert_lesions']} expert lesions reached; the step's most at any setting "
                  f"{best['expert_lesions_reached_after']} (+{best['false_ml_added']} mL false)", flush=True)
            out.append(entry)
    target = REPO / "benchmarks" / "results" / f"near_lesion_candidates_{args.label}.json"
    anchor = "" if args.anchor_max_ml is None else f" --anchor-max-ml {args.anchor_max_ml:g}"
    command = f"benchmarks/near_lesion_candidates.py --label {args.label}{anchor} " + " ".join(str(p) for p in args.results)
    target.write_text(json.dumps({"command": command, "rows": out}, indent=1) + "\n", encoding="utf-8")
    print(f"written {target}")


if __name__ == "__main__":
    main()
