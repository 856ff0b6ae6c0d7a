"""The detached false-positive components a fold network leaves on its held-out case, one by one.

    .venv/bin/python benchmarks/false_positive_components.py --label NAME \\
        --package 0003=runs/x/foldA/pkg --seed-package runs/x/pretrain/pkg

Each ``--package CASE=DIR`` is segmented on its held-out ISLES'22 case (native), seeded by
``--seed-package`` as the fold rows are (``real_scan_cv.prepare``). At the bare probability
threshold 0.5, without the other post-processing steps, every 26-connected component that holds no
expert voxel is listed: voxels, slices, median depth below the brain's edge (mm), median DWI
(× the brain's median) and median ADC (10⁻³ mm²/s). Issue 13's rule 82 reads where the skull-base
marks lie with it. Writes ``benchmarks/results/false_positive_components_<label>.json``; no image.
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

from real_scan_cv import ISLES, fold_package, load_real, prepare, real_cases_used  # noqa: E402

THRESHOLD = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--package", action="append", required=True, metavar="CASE=DIR")
    parser.add_argument("--seed-package", default=None, metavar="DIR")
    args = parser.parse_args()
    if not ISLES.is_dir():
        raise SystemExit(f"false_positive_components: {ISLES} is absent; it needs the two ISLES'22 cases")
    seed = fold_package(args.seed_package) if args.seed_package else None
    rows = []
    for spec in args.package:
        case, directory = spec.split("=", 1)
        package = fold_package(directory)
        if case in real_cases_used(package):
            raise SystemExit(f"false_positive_components: {directory} was trained on {case}; it is not held out")
        study, truth = load_real(case, False)
        prepared = prepare(case, study, truth, package, regions=False, seed_package=seed)
        dwi = np.asarray(study.dwi.array, dtype=np.float64)
        dwi = dwi / np.median(dwi[prepared.brain])
        adc = np.asarray(study.adc.array, dtype=np.float64)
        candidate = (prepared.probability >= THRESHOLD) & prepared.brain
        if prepared.seed is not None:
            from LambdaSegmentLib.inference.postprocess import components_holding

            candidate = components_holding(candidate, prepared.seed)
        labels, count = ndimage.label(candidate, structure=np.ones((3, 3, 3), bool))
        for index in range(1, count + 1):
            component = labels == index
            if (component & prepared.truth).any():
                continue
            slices = np.nonzero(component.any(axis=(1, 2)))[0]
            rows.append({"case": case, "package": directory, "voxels": int(component.sum()),
                         "slices": [int(slices.min()), int(slices.max())],
                         "depth_mm": round(float(np.median(prepared.depth_mm[component])), 1),
                         "dwi": round(float(np.median(dwi[component])), 2),
                         "adc": round(float(np.median(adc[component])), 2)})
            print(json.dumps(rows[-1]), flush=True)
    from LambdaSegmentLib.training.export import source_revision

    out = REPO / "benchmarks" / "results" / f"false_positive_components_{args.label}.json"
    command = (f"benchmarks/false_positive_components.py --label {args.label}" + "".join(f" --package {p}" for p in args.package)
               + (f" --seed-package {args.seed_package}" if args.seed_package else ""))
    out.write_text(json.dumps({"command": command, "revision": source_revision(), "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
