"""When does Otsu's two-class split of a DWI put the tissue in its dark class?

    .venv/bin/python benchmarks/foreground_split.py   # -> benchmarks/results/foreground_split.json

``io.foreground.brain_foreground`` is the statistics mask behind the ADC unit check, the
DWI normalisation and the brain mask. Its two Otsu classes should be background and tissue;
a whole-territory infarct at ~3× the brain's DWI can take the bright class for itself.
For the two real ISLES'22 cases (native and 6 mm), the 16 default synthetic test studies of
``real_scan_cv.py`` and its 6 whole-territory infarcts, this prints the voxels between the
three-class lower threshold and Otsu's threshold relative to Otsu's foreground (the band
``brain_foreground`` compares), whether the foreground changed from plain Otsu, and the
infarct's DWI over the foreground median before and after.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import SYNTHETIC_LARGE_SEEDS, SYNTHETIC_TEST_SEEDS, load_real, synthetic  # noqa: E402

from LambdaSegmentLib.io.foreground import brain_foreground, otsu_split  # noqa: E402

LARGE = {"lesion_kind": "territorial", "lesion_volume_ml": (100.0, 300.0), "massive_infarct_probability": 1.0, "lesymap_probability": 0.0}


def main() -> None:
    studies = [(f"isles {case} {'6mm' if thick else 'native'}", *load_real(case, thick)) for case in ("0001", "0003") for thick in (False, True)]
    studies += [(f"synthetic {seed}", *synthetic(seed)) for seed in SYNTHETIC_TEST_SEEDS]
    studies += [(f"whole-territory {seed}", *synthetic(seed, **LARGE)) for seed in SYNTHETIC_LARGE_SEEDS]
    rows = []
    for name, study, truth in studies:
        values = np.asarray(study.dwi.array, dtype=np.float64)
        split = otsu_split(study.dwi)
        before = split.above_otsu  # plain two-class Otsu, the foreground until this check
        after = brain_foreground(study.dwi)
        band = np.count_nonzero(split.left_out_tissue)
        lesion = np.asarray(truth, bool)
        row = {"study": name, "band_over_foreground": round(band / max(np.count_nonzero(before), 1), 3),
               "changed": bool(not np.array_equal(before, after)),
               "lesion_dwi_over_median_before": round(float(np.median(values[lesion]) / np.median(values[before])), 2) if lesion.any() else None,
               "lesion_dwi_over_median_after": round(float(np.median(values[lesion]) / np.median(values[after])), 2) if lesion.any() else None}
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = REPO / "benchmarks" / "results" / "foreground_split.json"
    out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
