"""Where a fold network's voxel errors lie by signal: found, missed and false voxels by DWI and ADC.

    .venv/bin/python benchmarks/error_signal.py --label NAME --package 0001=runs/x/foldB-wise-0.7/pkg \
        --package 0003=runs/x/foldA-wise-0.7/pkg [--thick]

Issue 13: is what a fold network loses on its held-out case whole lesions it never reaches, or
the margins of lesions it finds? And are the voxels it misses dimmer or brighter than those it
marks outside the expert mask? A threshold or margin rule can only trade the two if they differ.

Each ``--package CASE=DIR`` (a fold package, held out from CASE) segments its held-out ISLES'22
case natively (or as 6 mm slabs with ``--thick``) as the fold rows do (``real_scan_cv.prepare``,
no seed network) and cuts the network's probability at ``--threshold`` alone (no other step):

- voxels: found (expert and marked), missed (expert, not marked), false (marked, not expert),
  each with its count and the quartiles of its DWI and ADC over the brain's medians
  (``postprocess.relative_dwi`` / ``relative_adc``);
- lesions: each expert lesion (26-connected) with its voxels, the voxels marked, the largest
  probability in it, and its median DWI and ADC ratios; "reached" = any voxel marked;
- missed voxels split into those inside reached lesions (their margin) and in lesions never
  reached.

Writes ``benchmarks/results/error_signal_<label>.json``; no image (the fold rows' montages show
the same errors).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from LambdaSegmentLib.metrics import label_lesions  # noqa: E402
from real_scan_cv import CASES, ISLES, fold_package, load_real, prepare, real_cases_used  # noqa: E402

OUT = REPO / "benchmarks" / "results"


def quartiles(values: np.ndarray) -> list[float] | None:
    """[25th, 50th, 75th] percentiles rounded to 0.01; None for no values."""
    return [round(float(q), 2) for q in np.percentile(values, [25, 50, 75])] if values.size else None


def voxel_split(truth: np.ndarray, marked: np.ndarray, dwi_ratio: np.ndarray, adc_ratio: np.ndarray) -> dict[str, Any]:
    """Found, missed and false voxels of ``marked`` against ``truth`` (bool arrays of one shape),
    each ``{"voxels", "dwi_ratio", "adc_ratio"}`` (the ratios' quartiles)."""
    groups = {"found": truth & marked, "missed": truth & ~marked, "false": ~truth & marked}
    return {name: {"voxels": int(where.sum()), "dwi_ratio": quartiles(dwi_ratio[where]), "adc_ratio": quartiles(adc_ratio[where])}
            for name, where in groups.items()}


def lesion_reach(truth: np.ndarray, marked: np.ndarray, probability: np.ndarray, dwi_ratio: np.ndarray,
                 adc_ratio: np.ndarray) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Per expert lesion (26-connected, largest first): voxels, voxels marked, the largest
    probability, median DWI and ADC ratios; and the missed voxels split into those of reached
    lesions (``in_reached``) and of lesions never reached (``in_unreached``)."""
    labels, count = label_lesions(truth)
    rows, split = [], {"in_reached": 0, "in_unreached": 0}
    for index in range(1, count + 1):
        lesion = labels == index
        marked_here = int((lesion & marked).sum())
        split["in_reached" if marked_here else "in_unreached"] += int(lesion.sum()) - marked_here
        rows.append({"voxels": int(lesion.sum()), "marked": marked_here, "max_probability": round(float(probability[lesion].max()), 3),
                     "dwi_ratio": round(float(np.median(dwi_ratio[lesion])), 2),
                     "adc_ratio": round(float(np.median(adc_ratio[lesion])), 2)})
    rows.sort(key=lambda row: -row["voxels"])
    return rows, split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", required=True, help="names the output file")
    parser.add_argument("--package", action="append", required=True, metavar="CASE=DIR",
                        help=f"a fold package and the held-out case it is scored on ({', '.join(CASES)}); repeatable")
    parser.add_argument("--thick", action="store_true", help="the cases as 6 mm slabs (3 slices averaged; slab-majority reference)")
    parser.add_argument("--threshold", type=float, default=0.5, help="the probability cut (default 0.5, the bare threshold)")
    args = parser.parse_args()
    if not ISLES.is_dir():
        raise SystemExit(f"error_signal: {ISLES} is absent; it needs the two ISLES'22 cases")
    if not 0.0 < args.threshold <= 1.0:
        parser.error(f"--threshold must be in (0, 1], not {args.threshold}")
    rows = []
    for spec in args.package:
        case, _, directory = spec.partition("=")
        if case not in CASES or not directory:
            parser.error(f"--package must be CASE=DIR with CASE one of {sorted(CASES)}, not {spec!r}")
        package = fold_package(directory)
        if CASES[case] in real_cases_used(package):
            raise SystemExit(f"error_signal: {directory} was trained on {case}; give the fold package held out from it")
        study, truth = load_real(case, args.thick)
        prepared = prepare(f"{case}-{'6mm' if args.thick else 'native'}", study, truth, package, regions=False)
        truth = prepared.truth & prepared.brain
        marked = (prepared.probability >= args.threshold) & prepared.brain
        lesions, missed = lesion_reach(truth, marked, prepared.probability, prepared.dwi_ratio, prepared.adc_ratio)
        row = {"case": case, "package_dir": directory, "weights_sha256": package.sha256,
               "voxels": voxel_split(truth, marked, prepared.dwi_ratio, prepared.adc_ratio),
               "lesions_reached": sum(1 for lesion in lesions if lesion["marked"]), "lesions": len(lesions),
               "missed_voxels": missed, "per_lesion": lesions}
        rows.append(row)
        split = row["voxels"]
        print(f"{case} {'6mm' if args.thick else 'native'}: reached {row['lesions_reached']}/{row['lesions']} lesions; "
              + "; ".join(f"{name} {g['voxels']} (DWI {g['dwi_ratio']}, ADC {g['adc_ratio']})" for name, g in split.items())
              + f"; missed in reached lesions {missed['in_reached']}, in unreached {missed['in_unreached']}", flush=True)
    out = OUT / f"error_signal_{args.label}.json"
    out.write_text(json.dumps({"label": args.label, "thick": args.thick, "threshold": args.threshold, "rows": rows}, indent=1) + "\n",
                   encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
