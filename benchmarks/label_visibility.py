"""Synthetic lesions the image shows and the label leaves out, against the real experts' smallest lesions.

Why (issue 13): the fold networks give many of the real cases' small lesions a probability of
exactly 0, dots of 3-9 voxels that stand out on the DWI as clearly as the lesions they find
(0001: DWI 1.5-1.7 x the brain's median, ADC 0.6-0.8 x). A network learns to ignore what its
training shows unlabelled. The generator labels a voxel when the infarcted share of it
(``SyntheticStudy.lesion_fraction``: point samples in-plane, averaged through the slab) reaches
``label_fraction`` (0.5), while the image shows every share: a small embolus that fills less than
half of every voxel it touches is a bright dot with no label.

Per study, every lesion piece (26-connected component of ``lesion_fraction >= MIN_FRACTION`` in
the brain) gets: its voxels, its peak share, how many of its voxels the label holds, and its
peak DWI contrast: the highest DWI over the component divided by the local background there (the
in-plane median of the brain's DWI over 9 x 9 voxels, as ``bright_dots.py``). A piece is
*visible* when that contrast reaches ``VISIBLE`` (1.25, ``bright_dots.RATIO``). Reported per group:
visible pieces, and of them the unlabelled ones, by peak share and voxel count. The real cases'
expert lesions get the same contrast (every one is labelled): what contrast the experts label.

Studies: ``bright_dots.py``'s (8 skull-stripped embolic showers at 2 mm, seeds 33,000,000+, and 8
default studies made skull-stripped at 2 mm, seeds 33,100,000+); ``--synthesis JSON`` adds
generator options to both groups. Numbers only:

    .venv/bin/python benchmarks/label_visibility.py --output benchmarks/results/label_visibility
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

from bright_dots import BACKGROUND_PX, DEFAULT, DEFAULT_SEEDS, EMBOLIC_SEEDS, RATIO  # noqa: E402
from harness import invocation  # noqa: E402
from real_scan_cv import CASES, ISLES, load_real  # noqa: E402
from small_lesion_detection import EMBOLIC  # noqa: E402

from LambdaSegmentLib.cli import json_object  # noqa: E402
from LambdaSegmentLib.metrics import label_lesions  # noqa: E402
from LambdaSegmentLib.synthesis import generate  # noqa: E402
from LambdaSegmentLib.synthesis.generator import LESION_PIECE_FRACTION  # noqa: E402

MIN_FRACTION = LESION_PIECE_FRACTION  # a voxel holds some lesion (the generator's piece)
VISIBLE = RATIO  # peak DWI over the local background that makes a piece a visible dot
SHARE_BINS = ((0.05, 0.3), (0.3, 0.5), (0.5, 1.01))
SIZE_BINS = ((1, 3), (3, 10), (10, 30), (30, 10**9))


def local_contrast(dwi: np.ndarray, brain: np.ndarray) -> np.ndarray:
    """float32 (nk, nj, ni): DWI over the in-plane median of the brain's DWI around each voxel
    (``BACKGROUND_PX`` square, never across slices; outside the brain the brain's median)."""
    median = float(np.median(dwi[brain]))
    background = ndimage.median_filter(np.where(brain, dwi, median), size=(1, BACKGROUND_PX, BACKGROUND_PX))
    return (dwi / np.maximum(background, 1e-6)).astype(np.float32)


def synthetic_pieces(seed: int, ranges: dict[str, Any]) -> list[dict[str, Any]]:
    """Every lesion piece of one synthetic study (module docstring)."""
    made = generate(seed, **ranges)
    dwi = np.asarray(made.dwi.array, dtype=np.float32)
    brain = dwi > 0
    share = np.where(brain, np.asarray(made.lesion_fraction.array), 0.0)
    label = np.asarray(made.mask.array) != 0
    contrast = local_contrast(dwi, brain)
    pieces, count = ndimage.label(share >= MIN_FRACTION, structure=np.ones((3, 3, 3)))
    rows = []
    for index, box in enumerate(ndimage.find_objects(pieces), start=1):
        piece = pieces[box] == index
        rows.append({"voxels": int(piece.sum()), "peak_share": round(float(share[box][piece].max()), 3),
                     "labelled_voxels": int(label[box][piece].sum()),
                     "contrast": round(float(contrast[box][piece].max()), 3)})
    return rows


def real_lesions(case: str) -> list[dict[str, Any]]:
    """The expert lesions of one ISLES'22 case, natively, with the same contrast."""
    study, truth = load_real(case, False)
    dwi = np.asarray(study.dwi.array, dtype=np.float32)
    brain = dwi > 0
    contrast = local_contrast(dwi, brain)
    lesions, _ = label_lesions(truth)
    return [{"voxels": int((lesions[box] == index).sum()),
             "contrast": round(float(contrast[box][lesions[box] == index].max()), 3)}
            for index, box in enumerate(ndimage.find_objects(lesions), start=1)]


def summarise(pieces: list[dict[str, Any]]) -> dict[str, Any]:
    visible = [p for p in pieces if p["contrast"] >= VISIBLE]
    unlabelled = [p for p in visible if p["labelled_voxels"] == 0]
    by_share = {f"{lo:g}-{min(hi, 1.0):g}": [sum(1 for p in visible if lo <= p["peak_share"] < hi),
                                            sum(1 for p in unlabelled if lo <= p["peak_share"] < hi)]
                for lo, hi in SHARE_BINS}
    by_size = {f"{lo}-{hi - 1}" if hi < 10**9 else f">={lo}": [sum(1 for p in visible if lo <= p["voxels"] < hi),
                                                              sum(1 for p in unlabelled if lo <= p["voxels"] < hi)]
               for lo, hi in SIZE_BINS}
    return {"pieces": len(pieces), "visible": len(visible), "visible_unlabelled": len(unlabelled),
            "visible_by_peak_share": by_share, "visible_by_voxels": by_size,
            "unlabelled_visible_contrast_quartiles": [round(float(q), 2) for q in np.quantile(
                [p["contrast"] for p in unlabelled], [0.25, 0.5, 0.75])] if unlabelled else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthesis", type=json_object, default={}, metavar="JSON",
                        help="generator options added to both synthetic groups")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "label_visibility",
                        help="output stem: STEM.json and STEM.md are written")
    args = parser.parse_args()
    groups = {"embolic": ({**EMBOLIC, **args.synthesis}, EMBOLIC_SEEDS), "default": ({**DEFAULT, **args.synthesis}, DEFAULT_SEEDS)}
    result: dict[str, Any] = {"command": invocation(), "visible_contrast": VISIBLE, "min_fraction": MIN_FRACTION,
                              "groups": {}, "real": {}}
    lines = [f"# Lesion pieces visible on DWI (peak contrast >= {VISIBLE}) and left unlabelled", "",
             f"Command: `{result['command']}`", "",
             "Each cell: visible pieces / of them unlabelled. Real rows: expert lesions (all labelled).", "",
             "| group | pieces | visible / unlabelled | by peak share " + " ".join(f"{lo:g}-{min(hi, 1.0):g}" for lo, hi in SHARE_BINS)
             + " | by voxels " + " ".join(f"{lo}-{hi - 1}" if hi < 10**9 else f">={lo}" for lo, hi in SIZE_BINS)
             + " | unlabelled contrast quartiles |", "|---|---|---|---|---|---|"]
    for name, (ranges, seeds) in groups.items():
        pieces = [dict(row, seed=seed) for seed in seeds for row in synthetic_pieces(seed, ranges)]
        summary = summarise(pieces)
        result["groups"][name] = {"ranges": ranges, "seeds": [seeds.start, seeds.stop], "summary": summary, "pieces": pieces}
        lines.append(f"| synthetic {name} | {summary['pieces']} | {summary['visible']} / {summary['visible_unlabelled']} | "
                     + " ".join(f"{a}/{b}" for a, b in summary["visible_by_peak_share"].values()) + " | "
                     + " ".join(f"{a}/{b}" for a, b in summary["visible_by_voxels"].values()) + f" | "
                     f"{summary['unlabelled_visible_contrast_quartiles']} |")
        print(lines[-1], flush=True)
    if ISLES.is_dir():
        for case in CASES:
            lesions = real_lesions(case)
            result["real"][case] = lesions
            contrasts = [p["contrast"] for p in lesions]
            small = [p["contrast"] for p in lesions if p["voxels"] < 10]
            lines.append(f"| real {case} (expert) | {len(lesions)} lesions | {sum(c >= VISIBLE for c in contrasts)} visible; "
                         f"contrast quartiles {[round(float(q), 2) for q in np.quantile(contrasts, [0.25, 0.5, 0.75])]} | "
                         f"under 10 voxels: {len(small)}, contrast quartiles "
                         f"{[round(float(q), 2) for q in np.quantile(small, [0.25, 0.5, 0.75])] if small else None} | | |")
            print(lines[-1], flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    # the output is a stem (it may hold a dot, as "..._0.25"): the suffixes are appended
    Path(f"{args.output}.json").write_text(json.dumps(result, indent=1) + "\n")
    Path(f"{args.output}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output}.json and .md")


if __name__ == "__main__":
    main()
