"""Diagnostic: would a contralateral search radius separate a fold's false-positive components
from its true ones? (issue 13; the montages show one-sided inferior temporal crescents whose
brighter mirror partner lies a few millimetres more lateral, kept by the voxel-wise check.)

For each fold of a ``real_scan_cv.py`` result file, the fold model (seeded as in that file)
is run on its held-out case with the post-processing that fold chose, but without the
contralateral check; every kept component is then listed with its volume, whether it touches
the expert mask, and its mean DWI over the registered contralateral DWI at each search radius
(``postprocess.PostProcessing.contralateral_search_mm``: 0 = the mirror voxel itself).

This looks at the held-out cases to understand an error, so nothing it prints may choose a
setting that is then scored on them.

    .venv/bin/python benchmarks/contralateral_partner.py cv-rms-temporal-frozen-encoder-stats-gentle-seed51000001-seeded
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
from scipy import ndimage

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_scan_cv import FOLDS, OUT, PostProcessing, fold_package, load_real, prepare  # noqa: E402

RADII_MM = (0.0, 3.0, 6.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("label", help="a real_scan_cv.py result (benchmarks/results/real_scan_cv/LABEL.json)")
    parser.add_argument("--output", type=Path, default=None, help="JSON (default: benchmarks/results/contralateral_partner_LABEL.json)")
    args = parser.parse_args()
    result = json.loads((OUT / f"{args.label}.json").read_text(encoding="utf-8"))
    rows = []
    for fold, entry in result["folds"].items():
        held_out = FOLDS[fold][1]
        package = fold_package(entry["package_dir"])
        seed = fold_package(entry["seed_package_dir"]) if entry.get("seed_package_dir") else None
        chosen = PostProcessing(**entry["postprocessing"])
        without_check = dataclasses.replace(chosen, contralateral_ratio=None)
        for thick in (False, True):
            prepared = prepare(f"{held_out}-{'6mm' if thick else 'native'}", *load_real(held_out, thick), package,
                               regions=False, seed_package=seed)
            components = prepared.components(chosen.threshold)
            kept = components.keep(without_check)
            ratios = {radius: prepared.components(chosen.threshold, search_mm=radius).contralateral_ratio for radius in RADII_MM}
            overlap = ndimage.maximum(prepared.truth, components.labels, np.arange(1, len(kept) + 1)) if len(kept) else []
            for index in np.flatnonzero(kept):
                rows.append({"fold": fold, "case": held_out, "setting": "6mm" if thick else "native",
                             "volume_ml": round(float(components.volume_ml[index]), 3),
                             "true_positive": bool(overlap[index]),
                             "edge_depth_mm": round(float(components.edge_depth_mm[index]), 1),
                             **{f"ratio_{radius:g}mm": round(float(ratios[radius][index]), 3) for radius in RADII_MM},
                             "kept_by_chosen_check": bool(components.keep(chosen)[index])})
                print(json.dumps(rows[-1]), flush=True)
    output = args.output or OUT.parent / f"contralateral_partner_{args.label}.json"
    output.write_text(json.dumps({"label": args.label, "radii_mm": RADII_MM, "components": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"written {output}")


if __name__ == "__main__":
    main()
