"""How many bright unlabelled voxels stage 2's real-background windows show, with and without rim windows.

    .venv/bin/python benchmarks/rim_window_exposure.py --case 0001 --rim-windows 0.3

Stage 2's windows (8 slices × 96², lesion probability 0.8, base seed 51000005, epoch 0) of 8
real-background studies made from one ISLES'22 case, as ``RealBackgroundWindows`` serves them
before augmentation, without and with ``rim_probability``. Per window: voxels at least 2 × the
brain's median DWI that are not labelled (issue 13, rule 81). Writes
``benchmarks/results/rim_window_exposure.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import CASES, ISLES  # noqa: E402

from LambdaSegmentLib.inference.untrained import DEFAULT_PREPROCESSING  # noqa: E402
from LambdaSegmentLib.training.cases import find_labelled_cases  # noqa: E402
from LambdaSegmentLib.training.real_backgrounds import RIM_DWI, RealBackgroundWindows, load_background  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="0001", choices=sorted(CASES))
    parser.add_argument("--rim-windows", type=float, default=0.3)
    args = parser.parse_args()
    if not ISLES.is_dir():
        raise SystemExit(f"rim_window_exposure: {ISLES} is absent; it needs the ISLES'22 cases")
    preprocessing = {**DEFAULT_PREPROCESSING, "normalization": {"dwi": "brain_median_clip4", "eadc": "clip01"}}
    backgrounds = [load_background(find_labelled_cases(ISLES / CASES[args.case])[0])]
    common = dict(studies=8, preprocessing=preprocessing, windows_per_study=12, window_slices=8, size_hw=(96, 96),
                  base_seed=51_000_005, epoch=0, lesion_probability=0.8)
    dwi_channel = list(preprocessing["channels"]).index("dwi")
    rows = {}
    for name, rim in (("without", 0.0), ("with", args.rim_windows)):
        windows = RealBackgroundWindows(backgrounds, **common, rim_probability=rim, dwi_channel=dwi_channel)
        counts = np.array([int(((w["image"][dwi_channel] >= RIM_DWI) & (w["mask"][0] == 0)).sum())
                           for w in (windows[i] for i in range(len(windows)))])
        rows[name] = {"rim_probability": rim, "windows": len(counts), "mean_bright_unlabelled": round(float(counts.mean()), 1),
                      "share_with_20_or_more": round(float((counts >= 20).mean()), 3)}
        print(name, json.dumps(rows[name]), flush=True)
    out = REPO / "benchmarks" / "results" / "rim_window_exposure.json"
    command = f"benchmarks/rim_window_exposure.py --case {args.case} --rim-windows {args.rim_windows:g}"
    out.write_text(json.dumps({"command": command, "case": args.case, **rows}, indent=1) + "\n", encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
