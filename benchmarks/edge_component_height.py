"""Where the edge check's dropped components lie: how high in the brain, and whether they are lesions.

    .venv/bin/python benchmarks/edge_component_height.py --label NAME \\
        benchmarks/results/real_scan_cv/ROW.json [...]
        # -> benchmarks/results/edge_component_height_<label>.json

The skull base is where real DWI has its susceptibility pile-ups (temporal poles, orbitofrontal
cortex, inferior cerebellum: issue 13), while an embolus in the cortex of the convexity is just
as near the brain's edge. This lists, per result file and fold, on the fold's held-out case
natively, every candidate component of the fold's own chosen settings (threshold, bilateral
partners as chosen; before the edge, contralateral and bilateral checks) with:

- ``lesion``: whether it holds an expert voxel;
- ``kept``: whether the fold's chosen post-processing keeps it;
- ``voxels``, ``edge_depth_mm`` (median depth below the brain mask's edge) and
  ``contralateral`` (the check's mean DWI over its registered mirror's);
- ``height``: its voxels' median height in the brain (``postprocess.height_fraction``: 0 at the
  brain mask's lowest point along the patient's inferior-superior axis, 1 at its highest;
  physical LPS z, so any slice orientation reads alike), what ``PostProcessing.edge_max_height``
  reads (issue 13's rule 145).

The fold networks are not kept in the repository: each row's own ``package_dir`` (a runs folder
of the machine that trained it, or of one that rebuilt it by the row's recipe) is read. Each package is checked against the held-out volume Dice its row recorded (within
``lesion_census.REPRODUCED_DICE``), so the list is that row's. Numbers only, never images; every
component is listed and nothing is chosen.

``--summary LABEL [--depth-mm D] [--height H]`` reads such a file back and counts, over all its
rows and folds, the components shallower than D mm (default 6, the edge check's usual depth)
at or below height H (default 0.5) and above it, lesions and false marks apart.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from LambdaSegmentLib.inference.postprocess import PostProcessing  # noqa: E402
from harness import invocation  # noqa: E402
from lesion_census import REPRODUCED_DICE  # noqa: E402
from LambdaSegmentLib.training.export import source_revision  # noqa: E402
from real_scan_cv import FOLDS, fold_package, load_real, prepare, real_cases_used, score  # noqa: E402

OUT = REPO / "benchmarks" / "results"


def fold_components(result: dict[str, Any], fold: str) -> dict[str, Any]:
    """Every candidate component of ``fold``'s chosen settings on its held-out case, natively."""
    held_out = FOLDS[fold][1]
    chosen = result["folds"][fold]
    settings = PostProcessing(**chosen["postprocessing"])
    package_dir = REPO / chosen["package_dir"]
    package = fold_package(str(package_dir))
    if held_out in real_cases_used(package):
        raise SystemExit(f"{package_dir} used case {held_out}, which it would be scored on")
    study, truth = load_real(held_out, thick=False)
    prepared = prepare(held_out, study, truth, package, regions=False)
    recorded = chosen["scores"]["native"]["model"]["volume_dice"]
    reproduced = score(prepared, prepared.mask(settings))["volume_dice"]
    if abs(reproduced - recorded) > REPRODUCED_DICE:
        raise SystemExit(f"{package_dir}: volume Dice {reproduced:.4f} on {held_out}, the row recorded {recorded:.4f}")
    components = prepared.components_for(settings)
    kept = components.keep(settings)
    labels = components.labels
    rows = []
    for index in range(1, int(labels.max()) + 1):
        voxels = labels == index
        rows.append({
            "lesion": bool((voxels & prepared.truth).any()), "kept": bool(kept[index - 1]),
            "voxels": int(voxels.sum()), "edge_depth_mm": round(float(components.edge_depth_mm[index - 1]), 2),
            "contralateral": round(float(components.contralateral_ratio[index - 1]), 3),
            "height": round(float(components.height[index - 1]), 3),
        })
    return {"held_out_case": held_out, "package_dir": str(package_dir), "volume_dice": round(reproduced, 4),
            "postprocessing": chosen["postprocessing"], "components": rows}


def summary(label: str, depth_mm: float, height: float) -> None:
    """Print the shallow components of a results file by height and kind (module docstring)."""
    data = json.loads((OUT / f"edge_component_height_{label}.json").read_text())
    counts: dict[tuple[str, str], list[int]] = {}
    for folds in data["rows"].values():
        for fold in folds.values():
            for component in fold["components"]:
                if component["edge_depth_mm"] >= depth_mm:
                    continue
                key = ("lesion" if component["lesion"] else "false mark", "low" if component["height"] <= height else "high")
                counts.setdefault(key, []).append(component["voxels"])
    print(f"components shallower than {depth_mm:g} mm over {len(data['rows'])} rows x 2 folds, "
          f"height <= {height:g} (low) or above (high): count, voxels")
    for kind in ("lesion", "false mark"):
        for part in ("low", "high"):
            voxels = counts.get((kind, part), [])
            print(f"  {kind:10s} {part:4s}: {len(voxels):3d} components, {sum(voxels):5d} voxels")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", metavar="RESULT", help="real_scan_cv.py result files")
    parser.add_argument("--label", required=True)
    parser.add_argument("--summary", action="store_true", help="read the label's file back instead (module docstring)")
    parser.add_argument("--depth-mm", type=float, default=6.0)
    parser.add_argument("--height", type=float, default=0.5)
    args = parser.parse_args()
    if args.summary:
        summary(args.label, args.depth_mm, args.height)
        return
    if not args.rows:
        parser.error("give real_scan_cv.py result files (or --summary)")
    out: dict[str, Any] = {
        "command": invocation(),
        "revision": source_revision(),
        "rows": {},
    }
    for result_path in args.rows:
        result = json.loads(Path(result_path).read_text())
        out["rows"][Path(result_path).stem] = {fold: fold_components(result, fold) for fold in FOLDS}
        print(f"{Path(result_path).stem}: done", flush=True)
    path = OUT / f"edge_component_height_{args.label}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
