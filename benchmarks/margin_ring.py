"""What lies just outside the lesions a fold network keeps: expert voxels against others, by DWI.

    .venv/bin/python benchmarks/margin_ring.py --results benchmarks/results/real_scan_cv/LABEL.json \
        [--output benchmarks/results/margin_ring_LABEL.json]

Issue 13's rule 109: most of what the folds lose is a margin of moderately bright tissue around
the lesions they find. For each fold of a ``real_scan_cv.py`` result, its package segments the
held-out case natively and cuts the mask at the fold's chosen post-processing *without* the
margin step; then for two rings around the kept lesions, inside the brain,

- ``ring 1``: the tissue within the margin step's reach (``postprocess.margin_footprint``,
  3.5 mm) of the kept lesions;
- ``ring 2``: the tissue within that reach of ring 1, outside both;

it counts the expert voxels and the other voxels whose DWI is at least each of ``RATIOS`` times
the brain's median DWI (``postprocess.relative_dwi``). Read for nothing: a diagnostic of where
the margin's expert voxels lie, not a score. Writes one JSON; no image.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from LambdaSegmentLib.inference.package import load_model_package  # noqa: E402
from LambdaSegmentLib.inference.postprocess import PostProcessing, margin_footprint  # noqa: E402
from real_scan_cv import load_real, prepare  # noqa: E402

RATIOS = (1.2, 1.3, 1.4, 1.5, 1.7)


def ring_counts(mask: np.ndarray, truth: np.ndarray, dwi_ratio: np.ndarray, brain: np.ndarray,
                spacing_mm: tuple[float, float, float]) -> list[dict[str, Any]]:
    """Two rings around ``mask`` (see the module): per ring and ratio, the expert and other voxels.

    Args:
        mask, truth, brain: bool (nk, nj, ni).
        dwi_ratio: float (nk, nj, ni), DWI / the brain's median DWI.
        spacing_mm: (i, j, k) voxel spacing.
    """
    footprint = margin_footprint(spacing_mm)
    inside = np.asarray(mask, dtype=bool)
    rows = []
    for ring_index in (1, 2):
        ring = ndimage.binary_dilation(inside, structure=footprint) & brain & ~inside
        rows.append({"ring": ring_index, "by_ratio": [
            {"dwi_ratio_at_least": ratio, "expert_voxels": int((ring & truth & (dwi_ratio >= ratio)).sum()),
             "other_voxels": int((ring & ~truth & (dwi_ratio >= ratio)).sum())} for ratio in RATIOS]})
        inside = inside | ring
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="a real_scan_cv.py result JSON")
    parser.add_argument("--output", type=Path, help="default: benchmarks/results/margin_ring_<its label>.json")
    args = parser.parse_args()
    result = json.loads(args.results.read_text())
    output = args.output or REPO / "benchmarks" / "results" / f"margin_ring_{result['label']}.json"
    folds = {}
    for fold, entry in result["folds"].items():
        package = load_model_package(REPO / entry["package_dir"])
        settings = replace(PostProcessing(**entry["postprocessing"]), margin_dwi_ratio=None, margin_lesion_fraction=None,
                           margin_mirror_ratio=None)
        study, truth = load_real(entry["held_out_case"], False)
        prepared = prepare(entry["held_out_case"], study, truth, package, regions=False)
        mask = prepared.mask(settings) != 0
        folds[fold] = {
            "held_out_case": entry["held_out_case"], "package_dir": entry["package_dir"], "postprocessing": settings.as_dict(),
            "kept_voxels": int(mask.sum()), "expert_voxels": int(prepared.truth.sum()),
            "covered_expert_voxels": int((mask & prepared.truth).sum()),
            "rings": ring_counts(mask, prepared.truth, prepared.dwi_ratio, prepared.brain, study.dwi.spacing_mm),
        }
        print(fold, entry["held_out_case"], json.dumps(folds[fold]["rings"]), flush=True)
    output.write_text(json.dumps({"label": result["label"], "results": str(args.results), "folds": folds}, indent=1) + "\n")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
