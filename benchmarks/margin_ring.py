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
the margin's expert voxels lie, not a score.

Where the fold's chosen settings include the margin step (rules 109-111, 137), each fold also gets
``growth``: per lesion kept without the margin, its voxels (in the expert mask), its median DWI
ratio, the voxels the margin adds to it (in the expert mask) with their median and largest DWI
ratio, and with ``--seed-package`` (e.g. the fold's stage 1) that network's largest probability
in the lesion; and ``added``: the DWI and ADC ratios' quartiles of the added voxels inside and
outside the expert mask (rule 137's look: is a margin right or wrong by its tissue or by the
lesion it grows?). Writes one JSON; no image.
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
from LambdaSegmentLib.inference.engine import segment_study  # noqa: E402
from LambdaSegmentLib.metrics import label_lesions  # noqa: E402
from error_signal import quartiles  # noqa: E402
from real_scan_cv import load_real, network_probability, prepare  # noqa: E402

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


def lesion_growth(kept: np.ndarray, grown: np.ndarray, truth: np.ndarray, dwi_ratio: np.ndarray, adc_ratio: np.ndarray,
                  seed_probability: np.ndarray | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per lesion of ``kept`` (26-connected, largest first) what the margin step added to it in
    ``grown`` (a voxel next to two lesions counts for both), and the added voxels' DWI and ADC
    quartiles inside and outside ``truth`` (see the module). All arrays (nk, nj, ni); bool masks."""
    added = grown & ~kept
    labels, count = label_lesions(kept)
    near = np.ones((3, 3, 3), dtype=bool)
    rows = []
    for index in range(1, count + 1):
        lesion = labels == index
        taken = added & ndimage.binary_dilation(lesion, structure=near, iterations=2)
        row = {"voxels": int(lesion.sum()), "in_expert": int((lesion & truth).sum()),
               "dwi_ratio": round(float(np.median(dwi_ratio[lesion])), 2),
               "added": int(taken.sum()), "added_in_expert": int((taken & truth).sum()),
               "added_dwi_ratio": round(float(np.median(dwi_ratio[taken])), 2) if taken.any() else None,
               "added_dwi_ratio_max": round(float(dwi_ratio[taken].max()), 2) if taken.any() else None,
               "slice": int(round(ndimage.center_of_mass(lesion)[0]))}
        if seed_probability is not None:
            row["seed_max_probability"] = round(float(seed_probability[lesion].max()), 2)
        rows.append(row)
    rows.sort(key=lambda row: -row["voxels"])
    summary = {name: {"voxels": int(where.sum()), "dwi_ratio": quartiles(dwi_ratio[where]), "adc_ratio": quartiles(adc_ratio[where])}
               for name, where in (("in_expert", added & truth), ("outside", added & ~truth))}
    return rows, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="a real_scan_cv.py result JSON")
    parser.add_argument("--output", type=Path, help="default: benchmarks/results/margin_ring_<its label>.json")
    parser.add_argument("--seed-package", type=Path, default=None, metavar="PKG",
                        help="a second package (e.g. the folds' stage 1) whose largest probability in each kept lesion is reported")
    args = parser.parse_args()
    result = json.loads(args.results.read_text())
    output = args.output or REPO / "benchmarks" / "results" / f"margin_ring_{result['label']}.json"
    seed_package = None if args.seed_package is None else load_model_package(args.seed_package)
    folds = {}
    for fold, entry in result["folds"].items():
        package = load_model_package(REPO / entry["package_dir"])
        chosen = PostProcessing(**entry["postprocessing"])
        settings = replace(chosen, margin_dwi_ratio=None, margin_lesion_fraction=None, margin_mirror_ratio=None,
                           margin_capped=False)
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
        if chosen.margin_dwi_ratio is not None:
            seed = (None if seed_package is None else
                    network_probability(segment_study(study, seed_package, device="cpu", tta=False)))
            growth, added = lesion_growth(mask, prepared.mask(chosen) != 0, prepared.truth, prepared.dwi_ratio,
                                          prepared.adc_ratio, seed)
            folds[fold].update({"chosen_postprocessing": chosen.as_dict(), "seed_package": None if seed is None else str(args.seed_package),
                                "growth": growth, "added": added})
            print(fold, "added", json.dumps(added), flush=True)
            for row in growth:
                print("   ", json.dumps(row), flush=True)
    output.write_text(json.dumps({"label": result["label"], "results": str(args.results), "folds": folds}, indent=1) + "\n")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
