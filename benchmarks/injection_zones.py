"""Where stage 2's injected infarcts land on a real background (issue 13: do they label the rims?).

    .venv/bin/python benchmarks/injection_zones.py --studies 40 --seed 51000005

Stage 2 writes 0-3 synthetic infarcts into a fold's real case (``training.real_backgrounds``)
and labels them "lesion". For each real case as background, ``--studies`` draws exactly as
``RealBackgroundWindows.make_study`` makes them (``default_rng([seed, epoch, study])``, epochs
0-3 in turn, native acquisition) are measured against the case's own anatomy before injection:

- ``injected_ml``: injected label (the expert lesion left out), mean per draw;
- ``edge_share``: share of it within 4 mm of the brain mask's edge;
- ``skull_base_share``: share in ``skull_base_marks.py``'s zone (inferior 35 % of the brain's
  slices, within 8 mm of the edge);
- ``bright_rim_ml``: injected label on the zone's bright rims (DWI > 2 × the brain median
  before injection), mean per draw, and ``draws_on_bright_rim``: draws that label any of it;
- the same shares for the case's expert lesion, for comparison;
- ``draw_ml``: each draw's injected mL in stage 2's order (epoch 0's studies first), and
  ``draws_of_25_ml_or_more``: how many of them reach 25 mL. With ``--studies 16`` these are
  exactly the 16 real-background studies of a stage 2 with that ``--seed`` (4 per epoch, 4
  epochs): how large an infarct the fold network ever sees on real texture (issue 13, rule 88).

With ``--whole-territory`` every draw is instead one whole-territory infarct (``lambdasegment
train --injected-whole-territory``'s studies; issue 13's rule 88): ``draw_ml`` then says how much
of a real case such an infarct covers, beside ``brain_ml`` and ``receiving_ml`` (the brain
tissue that may receive one: ``real_backgrounds.lesion_free_tissue``).

With ``--synthesis JSON`` (stage 2's generator options) it also lists the synthetic studies the
same stage 2 draws (``--studies`` of them: seed ``--seed + 4 e + s`` for study s of epoch e, as
``training.windows.SyntheticWindows`` with 4 studies per epoch): each one's lesion kind, whether
it is a whole-territory infarct and its template volume.

Writes ``benchmarks/results/injection_zones.json`` (``--output`` elsewhere); no image of the cases.

    .venv/bin/python benchmarks/injection_zones.py --studies 16 --seed 51000007 \
        --output benchmarks/results/injection_zones_stage2_51000007.json
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
from skull_base_marks import inferior_slices  # noqa: E402

from LambdaSegmentLib.inference.postprocess import edge_depth_mm  # noqa: E402
from LambdaSegmentLib.training.cases import find_labelled_cases  # noqa: E402
from LambdaSegmentLib.training.real_backgrounds import (INJECTED_COUNTS, MARGIN_VOXELS, inject_infarcts,  # noqa: E402
                                                         lesion_free_tissue, load_background)

EDGE_MM = 4.0
LARGE_ML = 25.0
ZONE_MM = 8.0
RIM_DWI = 2.0  # × the brain's median DWI


def shares(label: np.ndarray, edge: np.ndarray, zone: np.ndarray, rim: np.ndarray, ml: float) -> dict[str, float | None]:
    total = int(label.sum())
    return {
        "ml": total * ml,
        "edge_share": float((label & edge).sum() / total) if total else None,
        "skull_base_share": float((label & zone).sum() / total) if total else None,
        "bright_rim_ml": float((label & rim).sum() * ml),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=40)
    parser.add_argument("--seed", type=int, default=51_000_005, help="stage 2's --seed (the background stream's base seed)")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "injection_zones.json")
    parser.add_argument("--whole-territory", action="store_true", help="every draw one whole-territory infarct")
    parser.add_argument("--synthesis", type=json.loads, default=None, metavar="JSON", help="stage 2's generator options: list its synthetic studies too")
    args = parser.parse_args()
    if not ISLES.is_dir():
        raise SystemExit(f"injection_zones: {ISLES} is absent; it needs the two ISLES'22 cases")
    rows = []
    for case, folder in sorted(CASES.items()):
        (labelled,) = find_labelled_cases(ISLES / folder)
        background = load_background(labelled)
        study = background.study
        ml = study.dwi.voxel_volume_mm3 / 1000.0
        dwi = np.asarray(study.dwi.array, dtype=np.float64)
        dwi = dwi / np.median(dwi[background.brain])
        depth = edge_depth_mm(background.brain, study.dwi.spacing_mm)
        edge = background.brain & (depth <= EDGE_MM)
        zone = background.brain & inferior_slices(study.dwi, background.brain)[:, None, None] & (depth <= ZONE_MM)
        rim = zone & (dwi > RIM_DWI)
        draws = []
        for index in range(args.studies):
            # stage 2 serves 4 studies per epoch, so its 16 are these 16 in (draw, epoch) order
            epoch, draw = index % 4, index // 4
            rng = np.random.default_rng([args.seed, epoch, draw])
            rng.integers(1)  # make_study's choice of background (one background here)
            count = int(rng.choice(INJECTED_COUNTS))
            _, label, _ = inject_infarcts(background, rng, count=1 if args.whole_territory else count,
                                          whole_territory=args.whole_territory)
            draws.append({**shares(label & ~background.lesion, edge, zone, rim, ml), "epoch": epoch, "draw": draw})
        hit = [d for d in draws if d["ml"] > 0]
        row = {
            "case": case,
            "draws": len(draws),
            "draws_with_injection": len(hit),
            "injected_ml_mean": float(np.mean([d["ml"] for d in draws])),
            "edge_share": float(sum(d["ml"] * d["edge_share"] for d in hit) / max(sum(d["ml"] for d in hit), 1e-9)),
            "skull_base_share": float(sum(d["ml"] * d["skull_base_share"] for d in hit) / max(sum(d["ml"] for d in hit), 1e-9)),
            "bright_rim_ml_mean": float(np.mean([d["bright_rim_ml"] for d in draws])),
            "draws_on_bright_rim": sum(d["bright_rim_ml"] > 0 for d in draws),
            "draw_ml": [round(d["ml"], 2) for d in sorted(draws, key=lambda d: (d["epoch"], d["draw"]))],
            "draws_of_25_ml_or_more": sum(d["ml"] >= LARGE_ML for d in draws),
            "brain_ml": float(background.brain.sum() * ml),
            "receiving_ml": float(lesion_free_tissue(background.brain, np.asarray(study.adc.array), background.lesion, MARGIN_VOXELS).sum() * ml),
            "zone_bright_rim_ml": float(rim.sum() * ml),
            "expert_lesion": shares(background.lesion, edge, zone, rim, ml),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    synthetic = []
    if args.synthesis is not None:
        from LambdaSegmentLib.synthesis import generate

        for index in range(args.studies):
            epoch, study = divmod(index, 4)
            seed = args.seed + 4 * epoch + study  # SyntheticWindows.study_seed with 4 studies per epoch
            lesion = generate(seed, **args.synthesis).params["lesion"]
            synthetic.append({"epoch": epoch, "seed": seed, "kind": lesion["kind"], "whole_territory": bool(lesion.get("massive")),
                              "template_ml": round(float(lesion["template_volume_ml"]), 1)})
            print(json.dumps(synthetic[-1]), flush=True)
    from LambdaSegmentLib.training.export import source_revision

    out = args.output
    command = f"benchmarks/injection_zones.py --studies {args.studies} --seed {args.seed}"
    if out != parser.get_default("output"):
        command += f" --output {out.relative_to(REPO) if out.is_relative_to(REPO) else out}"
    if args.whole_territory:
        command += " --whole-territory"
    if args.synthesis is not None:
        command += f" --synthesis '{json.dumps(args.synthesis)}'"
    results = {"command": command, "revision": source_revision(), "rows": rows}
    if synthetic:
        results["synthetic_studies"] = synthetic
    out.write_text(json.dumps(results, indent=1) + "\n",
                   encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
