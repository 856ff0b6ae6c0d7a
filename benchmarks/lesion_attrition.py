"""Where a fold's post-processing loses its held-out case's lesions, step by step (issue 13's rule 92).

    .venv/bin/python benchmarks/lesion_attrition.py --fold B --label rule92 \\
        benchmarks/results/real_scan_cv/ROW-seed51000005-unseeded-nlb.json [...]
        # -> benchmarks/results/lesion_attrition_rule92.json

Each ``real_scan_cv.py`` result names the fold's package and the post-processing its search
chose. The package segments the fold's held-out ISLES'22 case (native; seeded as the row was,
when it was), and the chosen settings are applied one step at a time, each stage adding one
step to the one before:

1. ``bare 0.5``: the bare threshold 0.5, nothing else;
2. ``threshold``: the chosen threshold (with the chosen hysteresis and flips, if any);
3. then each chosen step in the product's order: ``size``, ``edge``, ``contralateral``, ``adc``,
   ``bilateral`` (a step the search left off is not a stage).

The last stage is the row's own mask: its volume Dice must equal the result file's, or the
script stops (the re-run is not the run the row scored). ``--thick`` does all of this on the
case as the rows score it at 6 mm instead (3 slices averaged, reference = slab majority;
``real_scan_cv.load_real``), where lesion sizes count the slabs' voxels. ``--then FIELD=VALUE``
(repeatable) adds stages after it, each the chosen settings with one field changed (e.g. ``satellite_mm=10``, rule 132):
what a step would do on the row where its search did not choose it, read for nothing. Per stage: expert lesions
(26-connected components of the reference, as the lesion-wise F1) reached by the mask, of
them those of 5-25 voxels (``small_lesion_detection.py``'s emboli), expert voxels covered,
predicted and false-positive mL, predicted components touching no expert lesion (lesion F1's
false positives), volume Dice and lesion F1. Per expert lesion: its voxels, the
stages that reach it, the step that loses it (the first stage that no longer reaches it when the
stage before did: ``threshold`` when the chosen threshold lies above 0.5, else a check), and,
for a lesion a check drops, what the check saw on the candidate components that held it
(median depth below the brain's edge in mm, DWI over the mirror's, bilateral partner share).
Only numbers are written, never images (ISLES'22 may not be redistributed).

``--synthetic-seeds FIRST LAST [--synthesis JSON] [--package PKG]`` does the same on generator
studies under a package's own post-processing (default the bundled one): where the checks lose
the generator's infarcts, e.g. a found infarct whose candidate component (``checks``' voxels,
against the lesion's own) also holds the network's marks on the skull-side rims.

    .venv/bin/python benchmarks/lesion_attrition.py --synthetic-seeds 30000100 30000115 --label skull-on-gate
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import FOLDS, Prepared, fold_package, load_real, paired_package, prepare, score  # noqa: E402

from LambdaSegmentLib.cli import json_object  # noqa: E402
from LambdaSegmentLib.inference import load_model_package  # noqa: E402
from LambdaSegmentLib.inference.package import ModelPackage  # noqa: E402
from LambdaSegmentLib.inference.postprocess import PostProcessing  # noqa: E402
from LambdaSegmentLib.metrics import label_lesions  # noqa: E402

SMALL_VOXELS = (5, 25)  # small_lesion_detection.py's 5-25-voxel bin: the emboli the rules count
# the product's steps after the threshold, in the order Components.keep applies them, with the
# PostProcessing fields each one sets
STEP_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("size", ("min_lesion_ml",)),
    ("edge", ("min_edge_depth_mm", "edge_keep_ratio")),
    ("contralateral", ("contralateral_ratio", "contralateral_search_mm")),
    ("adc", ("max_relative_adc",)),
    ("bilateral", ("bilateral_partner_mm", "bilateral_partner_fraction", "bilateral_partner_total")),
    ("satellite", ("satellite_mm", "satellite_edge_only")),  # rules 132-134: brings back what edge / contralateral dropped
    # rules 109-111 and 137: widens the kept lesions last, as postprocess does
    ("margin", ("margin_dwi_ratio", "margin_lesion_fraction", "margin_mirror_ratio", "margin_capped")),
)


def stages(chosen: PostProcessing) -> list[tuple[str, PostProcessing]]:
    """``[(name, settings), ...]``: the bare threshold 0.5, the chosen threshold alone, then each
    step the search turned on added in turn; the last is ``chosen`` itself."""
    plain = PostProcessing()
    current = replace(plain, threshold=chosen.threshold, grow_threshold=chosen.grow_threshold,
                      test_time_flips=chosen.test_time_flips)
    out = [("bare 0.5", plain), ("threshold", current)]
    for name, fields in STEP_FIELDS:
        values = {field: getattr(chosen, field) for field in fields}
        if all(values[field] == getattr(plain, field) for field in fields):
            continue
        current = replace(current, **values)
        out.append((name, current))
    if out[-1][1] != chosen:
        raise AssertionError(f"the stages end at {out[-1][1]}, not at the chosen {chosen}")
    return out


def check_values(prepared: Prepared, settings: PostProcessing, lesion: np.ndarray) -> list[dict[str, float | None]]:
    """What the checks saw on each candidate component (at ``settings``' threshold) holding a
    voxel of ``lesion``: median edge depth (mm), mean DWI / mirror's, bilateral partner share."""
    components = prepared.components_for(settings)
    out = []
    for label in np.unique(components.labels[lesion]):
        if label == 0:
            continue
        index = int(label) - 1
        ratio = float(components.contralateral_ratio[index])
        out.append({
            "voxels": int(np.count_nonzero(components.labels == label)),
            "edge_depth_mm": round(float(components.edge_depth_mm[index]), 2),
            "contralateral_ratio": None if np.isnan(ratio) else round(ratio, 3),
            "partner_share": None if components.bilateral is None else round(float(components.bilateral[0][index]), 3),
        })
    return out


def attrition(prepared: Prepared, chosen: PostProcessing, then: tuple[tuple[str, float | None], ...] = ()) -> dict[str, Any]:
    """The per-stage table and the per-lesion record (module docstring) for one prepared case;
    each ``then`` item (a PostProcessing field, a value) adds a stage after the chosen settings:
    those settings with that one field changed (``--then``; what a step would do, not what ran)."""
    plan = stages(chosen) + [(f"then {field}={value}", replace(chosen, **{field: value})) for field, value in then]
    masks = [prepared.mask(settings) != 0 for _, settings in plan]
    labels, count = label_lesions(prepared.truth)
    sizes = np.bincount(labels.ravel(), minlength=count + 1)[1:]
    small = (sizes >= SMALL_VOXELS[0]) & (sizes <= SMALL_VOXELS[1])
    reached = np.zeros((len(plan), count), dtype=bool)  # (stage, lesion)
    for s, mask in enumerate(masks):
        hit = np.unique(labels[mask & prepared.truth])
        reached[s, hit[hit > 0] - 1] = True
    table = []
    for s, ((name, settings), mask) in enumerate(zip(plan, masks)):
        row = score(prepared, mask)
        table.append({
            "stage": name, "settings": settings.as_dict(),
            "lesions_reached": int(reached[s].sum()), "lesions": int(count),
            "small_reached": int(reached[s, small].sum()), "small": int(small.sum()),
            "expert_voxels_covered": int(np.count_nonzero(mask & prepared.truth)),
            "false_positive_components": int(row["false_positive_components"]),
            **{key: round(float(row[key]), 4) for key in ("volume_dice", "lesion_f1", "predicted_ml", "fp_ml")},
        })
    lesions = []
    for index in range(count):
        lost_at = next((plan[s][0] for s in range(1, len(plan)) if reached[s - 1, index] and not reached[s, index]), None)
        entry: dict[str, Any] = {"voxels": int(sizes[index]), "lost_at": lost_at,
                                 "reached_at": [plan[s][0] for s in range(len(plan)) if reached[s, index]]}
        if lost_at not in (None, "threshold"):
            entry["checks"] = check_values(prepared, chosen, labels == index + 1)
        lesions.append(entry)
    losses = {name: {"lesions": sum(e["lost_at"] == name for e in lesions),
                     "small": sum(e["lost_at"] == name and bool(small[i]) for i, e in enumerate(lesions))}
              for name, _ in plan[1:]}
    return {"stages": table, "lost_by_step": losses, "lesions": lesions}


def scored_package(result_path: Path, entry: dict[str, Any], key: str) -> ModelPackage:
    """The package a result's fold names under ``key`` (``package_dir`` or ``partner_package_dir``),
    refused unless its weights are the ones the result scored."""
    package = fold_package(entry[key])
    expected = entry["weights_sha256" if key == "package_dir" else "partner_weights_sha256"]
    if package.sha256 != expected:
        raise SystemExit(f"lesion_attrition: {entry[key]} is not the package {result_path} scored "
                         f"(weights {package.sha256[:12]}, the result's {expected[:12]})")
    return package


def prepared_as_scored(result_path: Path, fold: str, *, regions: bool, tool: str = "lesion_attrition",
                       thick: bool = False) -> tuple[dict[str, Any], PostProcessing, Prepared]:
    """(the result's fold entry, the post-processing its search chose, the fold's held-out case
    prepared natively, or as 6 mm slabs if ``thick``, as the row ran it: its package checked
    against the scored weights, seeded and paired as the row was). Stops, naming ``tool``, unless
    the chosen mask's volume Dice is the result's: otherwise this is not the run the row scored."""
    result = json.loads(result_path.read_text())
    entry = result["folds"][fold]
    chosen = PostProcessing(**entry["postprocessing"])
    held_out = FOLDS[fold][1]
    package = scored_package(result_path, entry, "package_dir")
    seed = fold_package(entry["seed_package_dir"]) if entry.get("seed_package_dir") else None
    with tempfile.TemporaryDirectory(prefix="lesion_attrition-pair-") as pairs:
        if entry.get("partner_package_dir"):  # two networks averaged, as the row ran them (rule 94)
            partner = scored_package(result_path, entry, "partner_package_dir")
            package = paired_package(package, partner, Path(pairs) / fold)
        way = "6mm" if thick else "native"
        prepared = prepare(f"{held_out}-{way}", *load_real(held_out, thick), package, regions=regions, seed_package=seed)
    expected = entry["scores"][way]["model"]["volume_dice"]
    measured = score(prepared, prepared.mask(chosen))["volume_dice"]
    if abs(measured - expected) > 1e-9:
        raise SystemExit(f"{tool}: {result_path} fold {fold}: volume Dice {measured:.6f} here, "
                         f"{expected:.6f} in the result: not the run the row scored")
    return entry, chosen, prepared


def run(result_path: Path, fold: str, then: tuple[tuple[str, float | None], ...] = (), *, thick: bool = False) -> dict[str, Any]:
    entry, chosen, prepared = prepared_as_scored(result_path, fold, regions=True, thick=thick)
    out = attrition(prepared, chosen, then)
    return {"result": str(result_path), "fold": fold, "held_out_case": FOLDS[fold][1], "thick": thick,
            "package_dir": entry["package_dir"],
            "partner_package_dir": entry.get("partner_package_dir"), "chosen": chosen.as_dict(), **out}


def run_synthetic(seed: int, ranges: dict[str, Any], package: ModelPackage) -> dict[str, Any]:
    """:func:`attrition` of a generator study (``seed``, ``ranges``) under ``package``'s own
    post-processing, with each lost lesion's candidate components' size against its own."""
    from LambdaSegmentLib.io import load_study
    from LambdaSegmentLib.synthesis import generate

    made = generate(seed, **ranges)
    study = load_study(dwi=made.dwi, adc=made.adc, adc_unit=made.adc_unit, b_value=made.b_value)
    chosen = PostProcessing.from_manifest(package.manifest)
    prepared = prepare(f"synthetic-{seed}", study, np.asarray(made.mask.array) != 0, package, regions=False)
    out = attrition(prepared, chosen)
    return {"seed": seed, "skull_stripped": bool(made.params.get("skull_stripped")), "chosen": chosen.as_dict(), **out}


def then_item(text: str) -> tuple[str, float | None]:
    """``--then``'s FIELD=VALUE: a PostProcessing field and a number (or ``none``)."""
    field, _, value = text.partition("=")
    if field not in PostProcessing.__dataclass_fields__ or not value:
        raise argparse.ArgumentTypeError(f"{text!r}: give FIELD=VALUE with a PostProcessing field")
    try:
        return field, None if value.lower() == "none" else float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: the value must be a number or none") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path, help="real_scan_cv.py result files")
    parser.add_argument("--fold", choices=list(FOLDS), default=None)
    parser.add_argument("--synthetic-seeds", type=int, nargs=2, metavar=("FIRST", "LAST"), default=None,
                        help="instead: generator studies FIRST..LAST under --package's own post-processing")
    parser.add_argument("--synthesis", type=json_object, default={}, metavar="JSON", help="their generator ranges")
    parser.add_argument("--package", default=None, help="the package for --synthetic-seeds (default: the bundled one)")
    parser.add_argument("--thick", action="store_true",
                        help="the held-out case as 6 mm slabs, as the rows score it (not with --synthetic-seeds)")
    parser.add_argument("--label", required=True, help="results file: benchmarks/results/lesion_attrition_LABEL.json")
    parser.add_argument("--then", type=then_item, action="append", default=[], metavar="FIELD=VALUE",
                        help="after the chosen settings, a stage with this one PostProcessing field changed "
                             "(e.g. satellite_mm=10; 'none' turns a step off; repeat for more stages): what the "
                             "step would do on the row")
    args = parser.parse_args()
    if (args.synthetic_seeds is None) == (not args.results or args.fold is None):
        parser.error("give result files with --fold, or --synthetic-seeds")
    if args.thick and args.synthetic_seeds is not None:
        parser.error("--thick is for result files (the real case's 6 mm slabs), not --synthetic-seeds")
    rows = []
    if args.synthetic_seeds is not None:
        package = load_model_package(args.package)
        for seed in range(args.synthetic_seeds[0], args.synthetic_seeds[1] + 1):
            row = run_synthetic(seed, args.synthesis, package)
            rows.append(row)
            print(f"synthetic {seed} ({'skull-stripped' if row['skull_stripped'] else 'skull-on'}): lost by step "
                  + ", ".join(f"{name} {v['lesions']}" for name, v in row["lost_by_step"].items())
                  + f"; final Dice {row['stages'][-1]['volume_dice']:.3f}", flush=True)
        output = REPO / "benchmarks" / "results" / f"lesion_attrition_{args.label}.json"
        output.write_text(json.dumps({"label": args.label, "package": f"{package.name} {package.version}",
                                      "synthesis": args.synthesis, "rows": rows}, indent=1) + "\n")
        print(f"wrote {output.relative_to(REPO)}")
        return
    for path in args.results:
        row = run(path, args.fold, tuple(args.then), thick=args.thick)
        rows.append(row)
        print(f"{path.name} (fold {args.fold}, held out {row['held_out_case']}{' at 6 mm' if args.thick else ''}; "
              f"chosen threshold {row['chosen']['threshold']}):")
        for stage in row["stages"]:
            print(f"  {stage['stage']:>13}: lesions {stage['lesions_reached']:>2}/{stage['lesions']}, "
                  f"5-25 voxels {stage['small_reached']:>2}/{stage['small']}, Dice {stage['volume_dice']:.3f}, "
                  f"F1 {stage['lesion_f1']:.3f}, predicted {stage['predicted_ml']:.2f} mL, FP {stage['fp_ml']:.2f} mL "
                  f"in {stage['false_positive_components']} components")
        print("  lost by step: " + ", ".join(f"{name} {v['lesions']} ({v['small']} of 5-25 voxels)"
                                             for name, v in row["lost_by_step"].items()))
    output = REPO / "benchmarks" / "results" / f"lesion_attrition_{args.label}.json"
    output.write_text(json.dumps({"label": args.label, "fold": args.fold, "thick": args.thick, "rows": rows}, indent=1) + "\n")
    print(f"wrote {output.relative_to(REPO)}")


if __name__ == "__main__":
    main()
