"""Scalp brightness on skull-on DWI: the two real clinical series against synthetic studies.

The ratio is the DWI of the head's signal 8-25 mm outside the brain (scalp, muscle, orbits'
surroundings; voxels above 0.1x the brain median) over the brain's median DWI. Real: the
brain from ``preprocessing.brain_mask``; synthetic: the generator's own tissue labels.

    .venv/bin/python benchmarks/synthesis_scalp.py   # -> benchmarks/results/synthesis_scalp.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.io import Volume, read_volume  # noqa: E402
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask  # noqa: E402
from LambdaSegmentLib.synthesis import generate  # noqa: E402

CLINICAL = REPO.parent / "shared" / "data" / "clinical-dwi-dicom"
SEEDS = range(3000, 3012)


def scalp_ratio(dwi: Volume, brain: np.ndarray) -> dict[str, float]:
    values = np.asarray(dwi.array, dtype=np.float64)
    median = float(np.median(values[brain]))
    distance = ndimage.distance_transform_edt(~brain, sampling=dwi.spacing_mm[::-1])
    shell = (distance > 8) & (distance < 25) & (values > 0.1 * median)
    p50, p90, p99 = np.percentile(values[shell] / median, [50, 90, 99])
    return {"p50": round(float(p50), 3), "p90": round(float(p90), 3), "p99": round(float(p99), 3), "voxels": int(shell.sum())}


def main() -> None:
    results: dict[str, dict] = {"real": {}, "synthetic": {}}
    for series in ("siemens-0019983", "ge-0226308"):
        if (CLINICAL / series).is_dir():
            volume = read_volume(CLINICAL / series)
            results["real"][series] = scalp_ratio(volume, brain_mask(volume))
    for seed in SEEDS:
        study = generate(seed, skull_stripped=False, in_plane_spacing_mm=2.0, slice_thickness_mm=6.0, oblique_probability=0.0)
        results["synthetic"][str(seed)] = scalp_ratio(study.dwi, np.asarray(study.tissue.array) > 0)
    medians = [r["p50"] for r in results["synthetic"].values()]
    results["synthetic_p50_range"] = [min(medians), max(medians)]
    out = REPO / "benchmarks" / "results" / "synthesis_scalp.json"
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
