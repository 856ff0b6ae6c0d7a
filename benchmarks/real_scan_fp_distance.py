"""Where the cross-validated false positives lie relative to the expert lesion.

    .venv/bin/python benchmarks/real_scan_fp_distance.py [--label cv-recipe-pp-contralateral]

For each fold of a ``real_scan_cv.py`` result (its fold packages and the post-processing each
fold chose), the held-out case is segmented again, natively and as 6 mm slabs, and its
false-positive volume (predicted voxels outside the expert mask) is split by the distance to
the nearest expert-lesion voxel: within 4 mm (where the border is a matter of judgement: a
voxel or two at 2 mm), 4-10 mm, and beyond 10 mm (spots away from any lesion). Writes
``benchmarks/results/real_scan_cv/fp_distance/<label>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import OUT, fold_package, load_real, prepare  # noqa: E402

from LambdaSegmentLib.inference.postprocess import PostProcessing  # noqa: E402

BANDS_MM = ((0.0, 4.0), (4.0, 10.0), (10.0, np.inf))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="cv-recipe-pp-contralateral", help="a real_scan_cv.py result (its --label)")
    args = parser.parse_args()
    result = json.loads((OUT / f"{args.label}.json").read_text(encoding="utf-8"))
    rows = []
    for fold, entry in result["folds"].items():
        package = fold_package(entry["package_dir"])
        settings = PostProcessing(**entry["postprocessing"])
        for thick in (False, True):
            study, truth = load_real(entry["held_out_case"], thick)
            prepared = prepare(entry["held_out_case"], study, truth, package, regions=False, flips=settings.test_time_flips)
            false_positive = prepared.mask(settings) & ~prepared.truth
            distance = ndimage.distance_transform_edt(~prepared.truth, sampling=study.dwi.spacing_mm[::-1])
            voxel_ml = study.dwi.voxel_volume_mm3 / 1000.0
            row = {"fold": fold, "held_out_case": entry["held_out_case"], "setting": "6mm" if thick else "native",
                   "fp_ml": float(false_positive.sum() * voxel_ml)}
            for low, high in BANDS_MM:
                band = false_positive & (distance > low if low else distance >= 0) & (distance <= high)
                row[f"fp_ml_{low:g}_to_{high:g}_mm"] = float(band.sum() * voxel_ml)
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = OUT / "fp_distance" / f"{args.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"label": args.label, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
