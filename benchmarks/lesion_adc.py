"""How restricted lesions are against their own brain: lesion ADC / the brain's median ADC.

    nice -n 10 .venv/bin/python benchmarks/lesion_adc.py --output benchmarks/results/lesion_adc.json

For the two real ISLES'22 cases (expert masks) and synthetic skull-stripped studies (the
generator's defaults, and any ``--synthesis`` ranges): the lesion voxels' ADC divided by the
brain's median ADC (:func:`LambdaSegmentLib.inference.postprocess.relative_adc`, the product's
brain mask), as quartiles over voxels, and the per-component medians (what the post-processing's
``max_relative_adc`` check reads) as quartiles over components. Also the brain's median ADC
(10^-3 mm^2/s) and the lesion voxels' DWI / the brain's median DWI. Expert masks at 2 mm hold
partial-volume rims, as the generator's masks do (a voxel is lesion from a 0.5 fraction), so
the two are compared like for like.
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

from LambdaSegmentLib.cli import json_object  # noqa: E402
from LambdaSegmentLib.inference.postprocess import relative_adc  # noqa: E402
from LambdaSegmentLib.io.units import brain_median  # noqa: E402
from LambdaSegmentLib.preprocessing import brain_mask  # noqa: E402
from real_scan_cv import CASES, ISLES, SYNTHETIC_VALIDATION_SEEDS, VALIDATION_RANGES, load_real, synthetic  # noqa: E402

QUARTILES = (25, 50, 75)


def describe(study, truth: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:  # noqa: ANN001
    """The statistics of one study's lesion against its brain (see the module docstring), and
    its lesion voxels' ADC / the brain's median ADC, (n,) float32, for the pooled quartiles."""
    brain = brain_mask(study.dwi, foreground=study.foreground)
    adc, dwi = np.asarray(study.adc.array), np.asarray(study.dwi.array)
    ratio = relative_adc(adc, brain)
    lesion = truth & brain
    labels, count = ndimage.label(lesion, structure=np.ones((3, 3, 3), dtype=bool))
    per_component = np.asarray(ndimage.median(ratio, labels, np.arange(1, count + 1))).reshape(-1) if count else np.zeros(0)
    sizes = np.bincount(labels[lesion], minlength=count + 1)[1:]
    row = {
        "brain_median_adc": round(brain_median(adc, brain), 4),
        "lesion_voxels": int(lesion.sum()),
        "components": int(count),
        "voxel_adc_ratio_quartiles": np.round(np.percentile(ratio[lesion], QUARTILES), 3).tolist() if lesion.any() else None,
        "voxel_dwi_ratio_quartiles": np.round(np.percentile(dwi[lesion] / brain_median(dwi, brain), QUARTILES), 3).tolist()
        if lesion.any() else None,
        "component_adc_ratio_quartiles": np.round(np.percentile(per_component, QUARTILES), 3).tolist() if count else None,
        "voxel_share_in_components_above": {str(cut): round(float(sizes[per_component > cut].sum() / max(sizes.sum(), 1)), 3)
                                            for cut in (0.8, 0.85, 0.9, 0.95)},
    }
    return row, ratio[lesion]


def pooled(rows: list[dict[str, Any]], ratios: list[np.ndarray]) -> dict[str, Any]:
    """Voxel quartiles over every synthetic study's lesion voxels together (``ratios``: each
    study's from :func:`describe`)."""
    values = np.concatenate(ratios)
    return {"studies": len(rows), "lesion_voxels": int(values.size),
            "voxel_adc_ratio_quartiles": np.round(np.percentile(values, QUARTILES), 3).tolist(),
            "brain_median_adc": [row["brain_median_adc"] for row in rows]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12, help="synthetic studies (the search's validation seeds, from the first on)")
    parser.add_argument("--synthesis", type=json_object, default={}, metavar="JSON", help="generator ranges (JSON) under the validation studies' fixed options (skull-stripped)")
    parser.add_argument("--no-real", action="store_true", help="leave the real cases out")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    ranges = {**args.synthesis, **VALIDATION_RANGES}
    result: dict[str, Any] = {"command": " ".join(["benchmarks/lesion_adc.py"] + sys.argv[1:]), "synthesis": ranges}
    if not args.no_real and (ISLES / CASES["0001"]).exists():
        result["real"] = {case: describe(*load_real(case, thick=False))[0] for case in CASES}
    start = SYNTHETIC_VALIDATION_SEEDS.start
    described = [describe(*synthetic(seed, **ranges)) for seed in range(start, start + args.n)]
    rows = [row for row, _ in described]
    result["synthetic"] = {"pooled": pooled(rows, [ratio for _, ratio in described]), "studies": rows}
    text = json.dumps(result, indent=1)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
