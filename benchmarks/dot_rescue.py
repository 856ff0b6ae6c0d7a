"""What a fold's mask would gain by adding the image's lesion-sized dots its network ranks highest.

    .venv/bin/python benchmarks/dot_rescue.py --settings-from benchmarks/results/real_scan_cv/ROW.json \
        --fold-packages A=runs/x/foldA-wise-0.7/pkg B=runs/x/foldB-wise-0.7/pkg --label NAME

Issue 13, measured before anything is built. ``bright_dots.py --package`` showed that the fold
networks rank the real emboli above the real brains' other lesion-sized dots (ROC areas 0.82-0.91)
far better than any image measure, yet give most emboli a probability far under the folds'
thresholds. A candidate post-processing step would add, to the mask a fold's search chose, every
*dot* of the image (``bright_dots.find_dots``: 5-25 voxels at 1.25 x the local in-plane DWI
background, at least 6 mm deep) whose highest network probability reaches a low threshold ``p``:
the low threshold acts only where the image itself shows a lesion-sized bright dot, never on the
edge rims or the margins of found lesions.

Per held-out score (native and 6 mm) of a committed row (the row's networks and post-processing,
rebuilt and checked as ``lesion_census.py`` does) and per ``p`` in :data:`DOT_THRESHOLDS`: the dots
added (not already touched by the mask), how many of them touch the expert mask, and the volume
Dice, lesion-wise F1 and false-positive mL of the mask with them. Every ``p`` is reported: none is
chosen here, and no number of it is a held-out result of a step, since the step's ``p`` would have
to come from each fold's own search. Only numbers are written:
``benchmarks/results/dot_rescue_<label>.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bright_dots import find_dots  # noqa: E402
from lesion_census import reproduced_folds, row_arguments, write_row_result  # noqa: E402
from real_scan_cv import Prepared, score  # noqa: E402

DOT_THRESHOLDS = (0.1, 0.03, 0.01, 0.003, 0.001)  # highest network probability on a dot


def scores(prepared: Prepared, mask: np.ndarray) -> dict[str, float]:
    """Volume Dice, lesion-wise F1 and false-positive mL of bool (nk, nj, ni) ``mask``, as
    ``real_scan_cv.py`` scores a row (its ``score``)."""
    row = score(prepared, mask)
    return {"volume_dice": round(row["volume_dice"], 4), "lesion_f1": round(row["lesion_f1"], 4),
            "false_positive_ml": round(row["fp_ml"], 3)}


def rescued(prepared: Prepared, mask: np.ndarray, labels: np.ndarray, dots: list[int]) -> dict[str, Any]:
    """The mask alone, then with the dots (``labels`` == each of ``dots``) it does not touch added
    at each of :data:`DOT_THRESHOLDS`."""
    truth = prepared.truth != 0
    dots_array = np.asarray(dots, dtype=np.int64)
    highest = np.asarray(ndimage.maximum(prepared.probability, labels, dots_array), dtype=np.float64).reshape(-1)
    touched = np.isin(dots_array, np.unique(labels[mask]))
    on_lesion = np.isin(dots_array, np.unique(labels[truth]))
    out: dict[str, Any] = {"dots": len(dots), "dots_on_lesions": int(on_lesion.sum()), "already_in_mask": int(touched.sum()),
                           "mask": scores(prepared, mask), "added": {}}
    for p in DOT_THRESHOLDS:
        chosen = (highest >= p) & ~touched
        grown = mask | np.isin(labels, dots_array[chosen])
        out["added"][f"{p:g}"] = {"dots": int(chosen.sum()), "on_lesions": int((chosen & on_lesion).sum()),
                                  **scores(prepared, grown)}
    return out


def main() -> None:
    args = row_arguments(__doc__.splitlines()[0])
    results: dict[str, Any] = {}
    for scored in reproduced_folds(args.settings_from, args.fold_packages, "dot_rescue"):
        prepared = scored.prepared
        labels, dots, _brain, _deep = find_dots(prepared.study)
        entry = results.setdefault(scored.fold, {"held_out_case": scored.case, "package_dir": scored.directory,
                                                 "weights_sha256": scored.package.sha256})
        entry[scored.setting] = rescued(prepared, scored.mask, labels, dots)
        print(f"fold {scored.fold} {scored.case} {scored.setting}: {json.dumps(entry[scored.setting])}", flush=True)
    write_row_result("dot_rescue", args, {"dot_thresholds": list(DOT_THRESHOLDS), "folds": results})


if __name__ == "__main__":
    main()
