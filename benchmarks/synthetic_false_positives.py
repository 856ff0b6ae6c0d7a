"""What a package marks outside the lesion on labelled synthetic studies, and what those voxels look like.

    .venv/bin/python benchmarks/synthetic_false_positives.py --label NAME --data /tmp/heldout-synth \\
        --packages LambdaSegmentLib/resources/models/lambdaunet-dwi runs/x/pretrain/pkg [--skull-on-only] \\
        [--montages]

Issue 13, rules 68-71: where packages mark skull-on (and other) synthetic studies, and whether
those marks look like the lesions they were taught, per study and package, with the package as
the product runs it (``segment_study``: its threshold, post-processing and brain mask):

- ``volume_dice``: against the whole true mask (1 when both are empty, as ``lambdasegment evaluate``);
- ``fp_ml`` / ``fp_components``: marked voxels farther than 2 voxels from the true lesion;
- ``fp_inferior_fraction``: how much of them lies in the inferior 35 % of the brain's slices
  (by each slice's superior coordinate: the skull base);
- ``fp_depth_mm``: their median depth below the brain mask's edge;
- ``fp_dwi``: their median DWI × the brain's median DWI; ``fp_adc``: their median ADC × the
  brain's median ADC (:func:`relative_adc`); the same two for the true lesion (``lesion_dwi``,
  ``lesion_adc``), which is what the package was asked to find.

Writes ``benchmarks/results/synthetic_false_positives_<label>.json`` and, with ``--montages``,
one false-positive montage per study and package under
``benchmarks/results/synthetic_false_positives/`` (not kept in git: look at them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from LambdaSegmentLib.inference import load_model_package, segment_study  # noqa: E402
from LambdaSegmentLib.inference.postprocess import edge_depth_mm, relative_adc  # noqa: E402
from LambdaSegmentLib.io import Study, load_study, read_volume  # noqa: E402
from LambdaSegmentLib.metrics import volume_dice  # noqa: E402
from LambdaSegmentLib.training import find_labelled_cases  # noqa: E402
from skull_base_marks import inferior_slices  # noqa: E402
from synthetic_release_gate import skull_on  # noqa: E402

OUT = REPO / "benchmarks" / "results"


def _median(values: np.ndarray) -> float | None:
    return round(float(np.median(values)), 3) if values.size else None


def false_positive_signal(study: Study, truth: np.ndarray, mask: np.ndarray, brain: np.ndarray) -> dict[str, Any]:
    """The measures of the module docstring for one study; arrays (nk, nj, ni) on the DWI grid."""
    dwi = np.asarray(study.dwi.array, dtype=np.float64)
    dwi = dwi / np.median(dwi[brain])
    adc = relative_adc(np.asarray(study.adc.array, dtype=np.float32), brain)
    fp = mask & brain & ~ndimage.binary_dilation(truth, iterations=2)
    ml = study.dwi.voxel_volume_mm3 / 1000.0
    depth = edge_depth_mm(brain, study.dwi.spacing_mm)
    inferior = inferior_slices(study.dwi, brain)[:, None, None]
    return {
        "volume_dice": round(volume_dice(mask, truth), 4),
        "truth_ml": round(float(truth.sum() * ml), 3),
        "marked_ml": round(float(mask.sum() * ml), 3),
        "fp_ml": round(float(fp.sum() * ml), 3),
        "fp_components": int(ndimage.label(fp)[1]),
        "fp_inferior_fraction": round(float((fp & inferior).sum() / fp.sum()), 3) if fp.any() else None,
        "fp_depth_mm": _median(depth[fp]),
        "fp_dwi": _median(dwi[fp]),
        "fp_adc": _median(adc[fp]),
        "lesion_dwi": _median(dwi[truth]),
        "lesion_adc": _median(adc[truth]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", required=True)
    parser.add_argument("--data", type=Path, required=True, help="labelled synthetic folder (lambdasegment synthesize)")
    parser.add_argument("--packages", nargs="+", required=True, help="model package directories")
    parser.add_argument("--skull-on-only", action="store_true", help="only the skull-on studies")
    parser.add_argument("--montages", action="store_true", help="also render each study's false positives")
    args = parser.parse_args()

    from real_scan_cv import montage  # noqa: PLC0415 (imports matplotlib's users: only here)

    packages = [(spec, load_model_package(spec)) for spec in args.packages]
    rows: list[dict[str, Any]] = []
    for case in find_labelled_cases(args.data):
        on = skull_on(args.data, case.name)
        if args.skull_on_only and not on:
            continue
        study = load_study(dwi=case.dwi, adc=case.adc, eadc=case.eadc)
        truth = np.asarray(read_volume(case.mask).array) > 0
        for spec, package in packages:
            segmentation = segment_study(study, package, device="cpu")
            mask = np.asarray(segmentation.mask.array) > 0
            brain = np.asarray(segmentation.brain.array) > 0
            row = {"case": case.name, "skull_on": on, "package": spec, **false_positive_signal(study, truth, mask, brain)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.montages:
                prepared = SimpleNamespace(study=study, brain=brain, truth=truth)  # all that montage() reads
                name = spec.strip("/").replace("/", "_")
                montage(prepared, mask.astype(np.uint8), OUT / "synthetic_false_positives" / args.label / f"{case.name}_{name}.png",
                        f"{case.name} ({'skull-on' if on else 'skull-stripped'}): {spec}")
    summary = {}
    for spec, _package in packages:
        own = [row for row in rows if row["package"] == spec]
        fp = [row for row in own if row["fp_ml"] > 0]
        summary[spec] = {
            "studies": len(own),
            "mean_volume_dice": round(float(np.mean([row["volume_dice"] for row in own])), 4) if own else None,
            "mean_fp_ml": round(float(np.mean([row["fp_ml"] for row in own])), 3) if own else None,
            "median_fp_ml": round(float(np.median([row["fp_ml"] for row in own])), 3) if own else None,
            "fp_weighted_inferior_fraction": round(float(
                sum(row["fp_ml"] * row["fp_inferior_fraction"] for row in fp) / sum(row["fp_ml"] for row in fp)), 3) if fp else None,
            "median_fp_adc": _median(np.array([row["fp_adc"] for row in fp])),
            "median_fp_dwi": _median(np.array([row["fp_dwi"] for row in fp])),
        }
    out = OUT / f"synthetic_false_positives_{args.label}.json"
    out.write_text(json.dumps({"data": str(args.data), "skull_on_only": args.skull_on_only, "summary": summary, "rows": rows},
                              indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=1))
    print(f"written: {out}")


if __name__ == "__main__":
    main()
