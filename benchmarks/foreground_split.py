"""When does Otsu's two-class split of a DWI put the tissue in its dark class?

    .venv/bin/python benchmarks/foreground_split.py   # -> benchmarks/results/foreground_split.json
    .venv/bin/python benchmarks/foreground_split.py --training-seeds 51000005 51000020 \
        --synthesis '{"in_plane_spacing_mm": [1.2, 2.0], ...}' --output benchmarks/results/foreground_split_training_X.json

``io.foreground.brain_foreground`` is the statistics mask behind the ADC unit check, the
DWI normalisation and the brain mask. Its two Otsu classes should be background and tissue;
a whole-territory infarct at ~3× the brain's DWI can take the bright class for itself.
For the two real ISLES'22 cases (native and 6 mm), the 16 default synthetic test studies of
``real_scan_cv.py`` and its 6 whole-territory infarcts, and the two real skull-on clinical
series of ``../shared/data/clinical-dwi-dicom`` (no label), and the 16 wide-field studies of
``network_field.py --synthetic`` (issue 13's rule 122), this prints Otsu's and the final
foreground's volume (mL) and the foreground's before rule 123, the voxels between the
three-class lower threshold and Otsu's threshold relative to Otsu's foreground, the same for
the band's contiguous voxels (what ``brain_foreground`` compares since issue 13's rule 123),
whether the foreground changed from plain Otsu, whether it is the one the check gave when it
counted every band voxel (before rule 123), and the infarct's DWI over the foreground median
before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import SYNTHETIC_LARGE_SEEDS, SYNTHETIC_TEST_SEEDS, load_real, synthetic  # noqa: E402

from LambdaSegmentLib.cli import json_object  # noqa: E402
from LambdaSegmentLib.io import read_volume  # noqa: E402
from LambdaSegmentLib.io.foreground import brain_foreground, otsu_split  # noqa: E402

CLINICAL_DIR = REPO.parent / "shared" / "data" / "clinical-dwi-dicom"
CLINICAL = ("ge-0226308", "siemens-0019983")
WIDE_SEEDS = range(35_000_000, 35_000_016)  # benchmarks/network_field.py --synthetic's studies
WIDE_RANGES = {"fov_mm": (384.0, 512.0), "in_plane_spacing_mm": 2.0}
LARGE = {"lesion_kind": "territorial", "lesion_volume_ml": (100.0, 300.0), "massive_infarct_probability": 1.0, "lesymap_probability": 0.0}


def foreground_counting_every_band_voxel(dwi: Any, split: Any) -> np.ndarray:
    """``brain_foreground`` as it was until issue 13's rule 123: every band voxel counted, speckle too."""
    foreground = split.above_lower if np.count_nonzero(split.left_out_tissue) > np.count_nonzero(split.above_otsu) else split.above_otsu
    return np.asarray(dwi.array) > 0 if foreground.sum() < 0.001 * foreground.size else foreground


def training_study_changed(seed: int, ranges: dict[str, Any]) -> bool:
    """Whether generator study ``seed`` (``ranges``), loaded as training loads it, gets another
    foreground than the check counting every band voxel gave it."""
    from LambdaSegmentLib.io import load_study
    from LambdaSegmentLib.synthesis import generate

    made = generate(seed, **ranges)
    study = load_study(dwi=made.dwi, adc=made.adc, adc_unit=made.adc_unit, b_value=made.b_value)
    return not np.array_equal(study.foreground, foreground_counting_every_band_voxel(study.dwi, otsu_split(study.dwi)))


def training_check(first: int, last: int, ranges: dict[str, Any], output: Path, workers: int) -> None:
    """``--training-seeds``: every study of a recipe's synthetic training seeds, checked."""
    from concurrent.futures import ProcessPoolExecutor

    seeds = list(range(first, last + 1))
    with ProcessPoolExecutor(workers) as pool:
        changed = [seed for seed, moved in zip(seeds, pool.map(training_study_changed, seeds, [ranges] * len(seeds), chunksize=16)) if moved]
    result = {"seeds": [first, last], "ranges": ranges, "studies": len(seeds), "changed_seeds": changed}
    output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{len(changed)} of {len(seeds)} studies get another foreground; written {output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--training-seeds", type=int, nargs=2, metavar=("FIRST", "LAST"), default=None,
                        help="instead: whether any of these generator studies (a recipe's training seeds) gets another "
                             "foreground than before rule 123")
    parser.add_argument("--synthesis", type=json_object, default={}, metavar="JSON", help="the recipe's generator ranges (JSON object)")
    parser.add_argument("--output", type=Path, default=None, help="--training-seeds' JSON file")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.training_seeds is not None:
        if args.output is None:
            parser.error("--training-seeds needs --output")
        training_check(*args.training_seeds, args.synthesis, args.output, args.workers)
        return
    studies = [(f"isles {case} {'6mm' if thick else 'native'}", *load_real(case, thick)) for case in ("0001", "0003") for thick in (False, True)]
    studies += [(f"synthetic {seed}", *synthetic(seed)) for seed in SYNTHETIC_TEST_SEEDS]
    studies += [(f"whole-territory {seed}", *synthetic(seed, **LARGE)) for seed in SYNTHETIC_LARGE_SEEDS]
    dwis = [(name, study.dwi, truth) for name, study, truth in studies]
    for seed in WIDE_SEEDS:  # issue 13's rule 122: a 384-512 mm field of view, where noise speckle fills the band
        wide, wide_truth = synthetic(seed, **WIDE_RANGES)
        dwis.append((f"wide {seed}", wide.dwi, wide_truth))
    for name in CLINICAL:  # real skull-on series without a label (issue 13's rule 123)
        if (CLINICAL_DIR / name).is_dir():
            dwis.append((f"clinical {name}", read_volume(CLINICAL_DIR / name), None))
    rows = []
    for name, dwi, truth in dwis:
        values = np.asarray(dwi.array, dtype=np.float64)
        split = otsu_split(dwi)
        before = split.above_otsu  # plain two-class Otsu, the foreground until this check
        after = brain_foreground(dwi)
        band = np.count_nonzero(split.left_out_tissue)
        contiguous = np.count_nonzero(split.contiguous_left_out_tissue)
        counting_every_voxel = foreground_counting_every_band_voxel(dwi, split)
        lesion = np.zeros(values.shape, bool) if truth is None else np.asarray(truth, bool)
        voxel_ml = dwi.voxel_volume_mm3 / 1000.0
        row = {"study": name, "otsu_ml": round(float(np.count_nonzero(before)) * voxel_ml, 1),
               "foreground_ml": round(float(np.count_nonzero(after)) * voxel_ml, 1),
               "foreground_ml_counting_every_band_voxel": round(float(np.count_nonzero(counting_every_voxel)) * voxel_ml, 1),
               "band_over_foreground": round(band / max(np.count_nonzero(before), 1), 3),
               "contiguous_band_over_foreground": round(contiguous / max(np.count_nonzero(before), 1), 3),
               "changed": bool(not np.array_equal(before, after)),
               "same_as_counting_every_band_voxel": bool(np.array_equal(after, counting_every_voxel)),
               "lesion_dwi_over_median_before": round(float(np.median(values[lesion]) / np.median(values[before])), 2) if lesion.any() else None,
               "lesion_dwi_over_median_after": round(float(np.median(values[lesion]) / np.median(values[after])), 2) if lesion.any() else None}
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = REPO / "benchmarks" / "results" / "foreground_split.json"
    out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
