"""How often stage 2's real-background windows show the case's own expert lesions, with and without real-lesion windows.

    .venv/bin/python benchmarks/real_lesion_window_exposure.py --real-lesion-windows 0.3 0.5 1.0

Stage 2's windows as 2.5.0's recipe serves them (8 slices × 96², lesion probability 0.8, rim
windows 0.3, base seed 51000005, epoch 0, 8 real-background studies of 12 windows), before
augmentation, for each ISLES'22 case as the background, without and with each
``real_lesion_probability`` given (issue 13's diagnostic before a rule on it). An expert lesion is a 26-connected component
of the expert mask on the model grid (a thick study's slab majority); a window shows it when at
least one of its voxels is in view. Per case: windows showing any expert lesion, the mean number
of expert lesions a window shows (all, and those of 5-25 voxels: the emboli that
``small_lesion_detection.py`` counts), and how often each lesion is shown over the 96 windows
(median over lesions; the share never shown). Only counts are written, never images. Writes
``benchmarks/results/real_lesion_window_exposure.json``.
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

from real_scan_cv import CASES, ISLES  # noqa: E402

from LambdaSegmentLib.inference.untrained import DEFAULT_PREPROCESSING  # noqa: E402
from LambdaSegmentLib.training.cases import find_labelled_cases  # noqa: E402
from LambdaSegmentLib.training.prepared import PreparedCase  # noqa: E402
from LambdaSegmentLib.training.real_backgrounds import RealBackground, RealBackgroundWindows, load_background  # noqa: E402

SMALL_VOXELS = (5, 25)
FIRST_REAL = 2  # mask value of the first expert lesion in the windows served here (injected voxels: 1)


class NumberedWindows(RealBackgroundWindows):
    """The recipe's windows with each expert lesion's voxels numbered ``FIRST_REAL + k`` in the
    mask (injected ones 1): every draw is the dataset's own, since the windows' choices read only
    ``mask > 0`` and the lesion list. Windows served without the option come from ``make_study``,
    so it is numbered too."""

    def make_study(self, study: int) -> PreparedCase:
        return self.make_study_with_real_lesions(study)[0]

    def make_study_with_real_lesions(self, study: int) -> tuple[PreparedCase, np.ndarray]:
        case, real = super().make_study_with_real_lesions(study)
        labels, _count = ndimage.label(real, structure=np.ones((3, 3, 3), dtype=bool))
        numbered = np.where(labels > 0, labels + (FIRST_REAL - 1), case.mask).astype(np.float32)
        return PreparedCase(case.name, case.channels, numbered), real


def exposure(background: RealBackground, real_lesion_probability: float, dwi_channel: int,
             preprocessing: dict[str, Any]) -> dict[str, Any]:
    """The counts of the module docstring for the 96 windows of one case."""
    windows = NumberedWindows([background], studies=8, preprocessing=preprocessing, windows_per_study=12, window_slices=8,
                              size_hw=(96, 96), base_seed=51_000_005, epoch=0, lesion_probability=0.8, rim_probability=0.3,
                              dwi_channel=dwi_channel, real_lesion_probability=real_lesion_probability)
    per_window, small_per_window, times = [], [], []
    for study in range(windows.studies):
        _case, real = windows.make_study_with_real_lesions(study)
        labels, count = ndimage.label(real, structure=np.ones((3, 3, 3), dtype=bool))
        sizes = np.bincount(labels.ravel(), minlength=count + 1)[1:]
        small = (sizes >= SMALL_VOXELS[0]) & (sizes <= SMALL_VOXELS[1])
        shown = np.zeros(count, dtype=int)
        for window in range(windows.windows_per_study):
            mask = windows[study * windows.windows_per_study + window]["mask"][0].numpy()
            lesions = np.unique(mask[mask >= FIRST_REAL]).astype(int) - FIRST_REAL
            shown[lesions] += 1
            per_window.append(len(lesions))
            small_per_window.append(int(small[lesions].sum()))
        times.extend(shown.tolist())
    per_window_array, times_array = np.asarray(per_window), np.asarray(times)
    return {
        "real_lesion_probability": real_lesion_probability,
        "windows": len(per_window),
        "share_showing_an_expert_lesion": round(float((per_window_array > 0).mean()), 3),
        "mean_expert_lesions_per_window": round(float(per_window_array.mean()), 2),
        "mean_small_expert_lesions_per_window": round(float(np.mean(small_per_window)), 2),
        "median_windows_per_expert_lesion": float(np.median(times_array)) if len(times) else None,
        "share_of_expert_lesions_never_shown": round(float((times_array == 0).mean()), 3) if len(times) else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-lesion-windows", type=float, nargs="+", default=[0.3, 0.5, 1.0], metavar="P")
    args = parser.parse_args()
    if not ISLES.is_dir():
        raise SystemExit(f"real_lesion_window_exposure: {ISLES} is absent; it needs the ISLES'22 cases")
    preprocessing = {**DEFAULT_PREPROCESSING, "normalization": {"dwi": "brain_median_clip4", "eadc": "clip01"}}
    dwi_channel = list(preprocessing["channels"]).index("dwi")
    rows: dict[str, Any] = {}
    for case in sorted(CASES):
        background = load_background(find_labelled_cases(ISLES / CASES[case])[0])
        rows[case] = {}
        for name, share in (("without", 0.0), *((f"with {p:g}", p) for p in args.real_lesion_windows)):
            rows[case][name] = exposure(background, share, dwi_channel, preprocessing)
            print(case, name, json.dumps(rows[case][name]), flush=True)
    out = REPO / "benchmarks" / "results" / "real_lesion_window_exposure.json"
    command = "benchmarks/real_lesion_window_exposure.py --real-lesion-windows " + " ".join(f"{p:g}" for p in args.real_lesion_windows)
    out.write_text(json.dumps({"command": command, "cases": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
