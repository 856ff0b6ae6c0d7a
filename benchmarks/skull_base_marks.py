"""How much of the real cases' skull base a model marks (issue 13: where the rim false positives come from).

    .venv/bin/python benchmarks/skull_base_marks.py --label NAME --package 0001,0003=runs/x/pretrain/pkg \\
        --package 0003=runs/x/foldA/pkg --package 0001=runs/x/foldB/pkg

Each ``--package CASES=DIR`` is segmented on the listed ISLES'22 cases, which must be held out
for it (a stage-1 package saw no real case: both; fold A's: 0003; fold B's: 0001). With the
bare probability (threshold 0.5, no post-processing), in the skull-base zone: the inferior
35 % of the brain's slices (by the slices' superior coordinate), within 8 mm of the brain
mask's edge, the expert lesion dilated by 2 voxels left out. Reported per case and package:

- ``zone_ml`` and ``marked_ml``: the zone's volume and what the model marks in it;
- ``bright_ml``: zone voxels brighter than 2 × the brain's median DWI (the rims), and
  ``bright_marked_fraction``: how much of them is marked;
- median DWI (× brain median) and ADC (10⁻³ mm²/s) of the marked voxels and of the bright
  unmarked ones, beside the median ADC of the expert lesion (what the marks resemble).

Writes ``benchmarks/results/skull_base_marks_<label>.json``; no image of the cases (ISLES'22
may not be redistributed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import CASES, ISLES, fold_package, load_real, prepare, real_cases_used  # noqa: E402

INFERIOR_SHARE = 0.35  # the skull-base zone: this share of the brain's slices, the lowest ones


def _median(values: np.ndarray) -> float | None:
    return float(np.median(values)) if values.size else None


def inferior_slices(dwi, brain: np.ndarray, share: float = INFERIOR_SHARE) -> np.ndarray:  # noqa: ANN001 (a Volume)
    """bool (nk,): the inferior ``share`` of the slices that hold brain (bool (nk, nj, ni)), by each
    slice's superior (LPS z) coordinate, whichever way the slice index runs."""
    slices = [k for k in range(brain.shape[0]) if brain[k].any()]
    superior = dwi.index_to_lps(np.array([[0.0, 0.0, float(k)] for k in slices]))[:, 2]
    inferior = np.zeros(brain.shape[0], dtype=bool)
    inferior[[slices[i] for i in np.argsort(superior)[: int(len(slices) * share)]]] = True
    return inferior


def skull_base_marks(prepared, threshold: float = 0.5) -> dict[str, float | None]:
    """The measures above for one prepared study (``real_scan_cv.Prepared``)."""
    study = prepared.study
    dwi = np.asarray(study.dwi.array, dtype=np.float64)
    dwi = dwi / np.median(dwi[prepared.brain])
    adc = np.asarray(study.adc.array, dtype=np.float64)  # load_study: 1e-3 mm^2/s
    inferior = inferior_slices(study.dwi, prepared.brain)
    zone = (prepared.brain & inferior[:, None, None] & (prepared.depth_mm <= 8.0)
            & ~ndimage.binary_dilation(prepared.truth, iterations=2))
    marked = zone & (prepared.probability >= threshold)
    bright = zone & (dwi > 2.0)
    ml = study.dwi.voxel_volume_mm3 / 1000.0
    return {
        "zone_ml": float(zone.sum() * ml),
        "marked_ml": float(marked.sum() * ml),
        "bright_ml": float(bright.sum() * ml),
        "bright_marked_fraction": float(np.mean(prepared.probability[bright] >= threshold)) if bright.any() else None,
        "marked_dwi_median": _median(dwi[marked]),
        "marked_adc_median": _median(adc[marked]),
        "bright_unmarked_dwi_median": _median(dwi[bright & ~marked]),
        "bright_unmarked_adc_median": _median(adc[bright & ~marked]),
        "lesion_adc_median": _median(adc[prepared.truth]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--package", action="append", required=True, metavar="CASES=DIR",
                        help="comma-separated held-out cases (0001, 0003) = model package directory")
    args = parser.parse_args()
    if not ISLES.is_dir():
        raise SystemExit(f"skull_base_marks: {ISLES} is absent; it needs the two ISLES'22 cases")
    rows = []
    for spec in args.package:
        cases, directory = spec.split("=", 1)
        package = fold_package(directory)
        for case in cases.split(","):
            if case not in CASES:
                raise SystemExit(f"skull_base_marks: unknown case {case!r}; known: {sorted(CASES)}")
            if case in real_cases_used(package):
                raise SystemExit(f"skull_base_marks: {directory} was trained on {case}; it is not held out")
            prepared = prepare(case, *load_real(case, False), package, regions=False)
            row = {"case": case, "package": directory, "weights_sha256": package.sha256, **skull_base_marks(prepared)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    from LambdaSegmentLib.training.export import source_revision

    out = REPO / "benchmarks" / "results" / f"skull_base_marks_{args.label}.json"
    command = "benchmarks/skull_base_marks.py --label " + args.label + "".join(f" --package {p}" for p in args.package)
    out.write_text(json.dumps({"command": command, "revision": source_revision(), "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
