"""The ablation table (linked from the model card), built from ``benchmarks/results/real_scan_cv/*.json``.

    .venv/bin/python benchmarks/real_scan_cv_table.py   # -> benchmarks/results/real_scan_cv/ablation.md
    .venv/bin/python benchmarks/real_scan_cv_table.py --means LABEL [LABEL ...]   # a row's held-out means
    .venv/bin/python benchmarks/real_scan_cv_table.py --means LABEL ... --rule26 0.522 0.2325 1.705   # and rule 26
    .venv/bin/python benchmarks/real_scan_cv_table.py --ranges LABEL [LABEL ...]   # a recipe's held-out table

``--means`` prints, per result file and over all of them (e.g. a recipe's three training seeds),
the mean of the four held-out scores (both folds, native and 6 mm) of volume Dice, lesion F1 and
false-positive mL, which issue 13's adoption rules compare, and each fold package's Dice on the
synthetic infarcts of 100 mL or more. With ``--rule26 DICE F1 FP`` (a reference recipe's pooled
means, e.g. R″'s) it also judges the pooled means by issue 13's rule 26 and the whole-territory
condition (:func:`rule26`).

``--ranges`` prints the model card's held-out table of a recipe over several result files (its
training seeds): per held-out case and setting, the range (lowest–highest) of each measure, and
the ADC rule's scores on the same data (:func:`held_out_ranges`).

It ends with how often each fold's search chose a minimum lesion size of 0.3 mL or more (a size
that removes most of case 0001's emboli), over the result files whose post-processing was searched.

One row per result file (``real_scan_cv.py --label``) and fold, with the code revision it ran
at (files written before the revision was recorded say "before f75a548"); held-out case scores native
and as 6 mm slabs, and the fold package's own synthetic held-out Dice where it was scored
(``--synthetic``: 16 studies at default ranges / those of 100 mL or more); the ADC rule once per held-out case. A fold whose package had its
checkpoint chosen on the case it is scored on, or that trained on it (the fold result's
``trained_on``, from the package manifest), is marked as not held out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "real_scan_cv"
# The 1.0.0 bundled weights were chosen by their volume Dice on case 0001 (docs/MODEL_CARD.md).
CHOSE_ON = {"aeb4bc5622b43694b09b33298046d1ec3596efe71f06fc2d5866ace74c8278e5": "0001"}


def cells(row: dict) -> str:
    return (f"{row['volume_dice']:.3f} | {row['lesion_f1']:.3f} | {row['abs_dv_ml']:.2f} | {row['fp_ml']:.2f} "
            f"({row['fp_edge_ml']:.2f} / {row['fp_posterior_fossa_ml']:.2f} / {row['fp_elsewhere_ml']:.2f})")


def synthetic_cells(entry: dict) -> str:
    """The fold package's mean volume Dice on the held-out synthetic studies (``real_scan_cv.py --synthetic``):
    16 at default ranges and those of 100 mL or more; a dash where the result file has no such score."""
    if "synthetic" not in entry:
        return "–"
    return f"{entry['synthetic']['summary']['default']['model_dice']:.3f} / {dice_cell(large_synthetic_dice(entry))}"


def dice_cell(dice: float | None) -> str:
    return f"{dice:.3f}" if dice is not None else "–"


def large_synthetic_dice(entry: dict) -> float | None:
    """The fold package's mean volume Dice on the held-out synthetic infarcts of 100 mL or more
    (recorded since that target was scored); None where the result file has no such score."""
    large = entry.get("synthetic", {}).get("summary", {}).get("true_100ml_or_more")
    return large["model_dice"] if large else None


def settings(post: dict) -> str:
    parts = [f"t {post['threshold']:g}"]
    if post["min_lesion_ml"]:
        parts.append(f"≥ {post['min_lesion_ml']:g} mL")
    if post["min_edge_depth_mm"] is not None:
        parts.append(f"depth ≥ {post['min_edge_depth_mm']:g} mm"
                     + (f" below {post['edge_max_height']:g} of the brain's height" if post.get("edge_max_height") is not None else ""))
        if post.get("edge_keep_ratio") is not None:
            parts.append(f"shallow kept at contra ≥ {post['edge_keep_ratio']:g}")
    if post["contralateral_ratio"] is not None:
        parts.append(f"contra ≥ {post['contralateral_ratio']:g}")
        if post.get("contralateral_search_mm"):
            parts.append(f"contra search {post['contralateral_search_mm']:g} mm")
    if post.get("grow_threshold") is not None:
        parts.append(f"grown to {post['grow_threshold']:g}")
    if post.get("max_relative_adc") is not None:
        parts.append(f"ADC ≤ {post['max_relative_adc']:g} × brain")
    if post.get("bilateral_partner_mm") is not None:
        fraction = post.get("bilateral_partner_fraction") or 0.0
        together = bool(post.get("bilateral_partner_total"))  # rule 128: the partners' voxels summed
        detail = (f", {'partners together' if together else 'partner'} ≥ {fraction:g} × its size" if fraction
                  else ", partners together" if together else "")
        parts.append(f"bilateral pairs dropped ({post['bilateral_partner_mm']:g} mm{detail})")
    if post.get("satellite_mm") is not None:  # rule 132
        parts.append(f"satellites kept within {post['satellite_mm']:g} mm"
                     + (" (edge check only)" if post.get("satellite_edge_only") else ""))
    if post.get("margin_dwi_ratio") is not None:
        parts.append(f"margin ≥ {post['margin_dwi_ratio']:g} × DWI"
                     + (f" and {post['margin_lesion_fraction']:g} of the lesion's" if post.get("margin_lesion_fraction") else "")
                     + (f" and {post['margin_mirror_ratio']:g} × mirror" if post.get("margin_mirror_ratio") else ""))
    if post.get("test_time_flips"):
        parts.append("flips")
    return ", ".join(parts)


def not_held_out(entry: dict) -> str:
    """Why a fold result's score of its held-out case is not held out ("" when it is): the fold
    package trained on that case or had its checkpoint chosen on it (``trained_on``, recorded since
    the issue-13 recipe; before it, :data:`CHOSE_ON`)."""
    case = entry["held_out_case"]
    if "trained_on" in entry:
        return "trained on this case or chose the weights on it" if case in entry["trained_on"] else ""
    return "this case chose the weights" if CHOSE_ON.get(entry["weights_sha256"]) == case else ""


def main() -> None:
    header = ("| method | fold (held out) | post-processing | native Dice | native lesion F1 | native abs dV mL "
              "| native FP mL (edge / PF / else) | 6 mm Dice | 6 mm lesion F1 | 6 mm abs dV mL | 6 mm FP mL (edge / PF / else) "
              "| synthetic Dice: default / >= 100 mL |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines, rules = [header], {}
    for path in sorted(RESULTS.glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        for fold, entry in result["folds"].items():
            held_out = entry["held_out_case"]
            mark = f" **not held out: {not_held_out(entry)}**" if not_held_out(entry) else ""
            scores = entry["scores"]
            revision = result["revision"][:7] if result.get("revision") else "before f75a548"
            objective = result.get("objective_per_study", "dice")  # recorded since --objective; volume Dice before
            chosen_for = "" if objective == "dice" else f" (search objective: {objective})"
            if result.get("search_data", "case+synthetic") == "synthetic":  # recorded since --search-data
                chosen_for += " (chosen on synthetic studies only)"
            if entry.get("postprocessing_thick"):  # --by-thickness (rule 147): the 6 mm scores are the second setting's
                chosen_for += f"; slices ≥ {result['thick_slice_mm']:g} mm: {settings(entry['postprocessing_thick'])}"
            lines.append(f"| {result['label']} ({revision}) | {fold} ({held_out}){mark} | {settings(entry['postprocessing'])}{chosen_for} "
                         f"| {cells(scores['native']['model'])} | {cells(scores['6mm']['model'])} | {synthetic_cells(entry)} |")
            rules[held_out] = (scores["native"]["adc_rule"], scores["6mm"]["adc_rule"])
    for case, (native, thick) in sorted(rules.items()):
        lines.append(f"| ADC rule | ({case}) | ADC < 0.62, DWI > 1.2× median | {cells(native)} | {cells(thick)} | |")
    out = RESULTS / "ablation.md"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(large_size_choices())


def large_size_choices(minimum_ml: float = 0.3) -> str:
    """How many searched result files' fold searches chose ``min_lesion_ml >= minimum_ml``, per fold."""
    counts: dict[str, list[int]] = {}
    for path in sorted(RESULTS.glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        if result.get("postprocessing") != "choose":
            continue
        for fold, entry in result["folds"].items():
            chosen, searched = counts.setdefault(fold, [0, 0])
            counts[fold] = [chosen + (entry["postprocessing"].get("min_lesion_ml", 0.0) >= minimum_ml), searched + 1]
    return "\n".join(f"fold {fold}: a minimum lesion size >= {minimum_ml:g} mL chosen in {chosen} of {searched} searched result files"
                     for fold, (chosen, searched) in sorted(counts.items()))


def held_out_scores(result: dict) -> list[dict]:
    """The four held-out model scores of a ``real_scan_cv.py`` result: both folds, native and 6 mm."""
    return [entry["scores"][grid]["model"] for entry in result["folds"].values() for grid in ("native", "6mm")]


def rule26(means: tuple[float, float, float], reference: tuple[float, float, float]) -> list[str]:
    """Which branches of issue 13's rule 26 pooled (Dice, lesion F1, false-positive mL) means pass
    against a reference recipe's: 1, Dice ≥ reference + 0.01 with false positives ≤ reference + 0.5
    mL; 2, lesion F1 ≥ reference + 0.05 with Dice ≥ reference − 0.01 and false positives ≤
    reference + 0.5 mL; 3, false positives ≤ reference − 1.0 mL with Dice ≥ reference − 0.02 and
    lesion F1 ≥ reference. The margins are compared at 4 decimals, as the card writes them."""
    dice, f1, fp = means
    ref_dice, ref_f1, ref_fp = reference
    at_least = lambda value, bound: round(value - bound, 4) >= 0  # noqa: E731
    branches = {"1": at_least(dice, ref_dice + 0.01) and at_least(ref_fp + 0.5, fp),
                "2": at_least(f1, ref_f1 + 0.05) and at_least(dice, ref_dice - 0.01) and at_least(ref_fp + 0.5, fp),
                "3": at_least(ref_fp - 1.0, fp) and at_least(dice, ref_dice - 0.02) and at_least(f1, ref_f1)}
    return [name for name, passed in branches.items() if passed]


def held_out_means(labels: list[str], reference: tuple[float, float, float] | None = None) -> str:
    """Per result file and over all: mean volume Dice / lesion F1 / false-positive mL of the
    held-out scores (both folds, native and 6 mm), and each fold's synthetic >= 100 mL Dice.
    Where every file records rule 79's split, the detached false-positive mL follows. With
    ``reference`` (Dice, F1, FP), the pooled means judged by :func:`rule26` and whether every
    fold's >= 100 mL synthetic Dice is at least 0.8 (a fold without one fails)."""
    lines, pooled, detached, large_ok = [], [], [], True
    for label in labels:
        result = json.loads((RESULTS / f"{label}.json").read_text(encoding="utf-8"))
        scores = held_out_scores(result)
        means = [sum(score[key] for score in scores) / len(scores) for key in ("volume_dice", "lesion_f1", "fp_ml")]
        large = ", ".join(f"{fold} {dice_cell(large_synthetic_dice(entry))}" for fold, entry in result["folds"].items())
        large_ok &= all((large_synthetic_dice(entry) or 0.0) >= 0.8 for entry in result["folds"].values())
        split = ""
        if all("fp_detached_ml" in score for score in scores):
            detached.append(sum(score["fp_detached_ml"] for score in scores) / len(scores))
            split = f" (detached {detached[-1]:.3f} mL)"
        lines.append(f"{label}: {means[0]:.4f} / {means[1]:.4f} / {means[2]:.3f} mL{split}; >= 100 mL synthetic: {large}")
        pooled.append(means)
    overall = [sum(column) / len(pooled) for column in zip(*pooled)]
    split = f" (detached {sum(detached) / len(detached):.3f} mL)" if len(detached) == len(pooled) else ""
    lines.append(f"mean over {len(pooled)}: {overall[0]:.4f} / {overall[1]:.4f} / {overall[2]:.3f} mL{split}")
    if reference is not None:
        branches = rule26((overall[0], overall[1], overall[2]), reference)
        lines.append(f"rule 26 against {reference[0]:g} / {reference[1]:g} / {reference[2]:g} mL: "
                     + (f"branch {', '.join(branches)} passed" if branches else "no branch passed")
                     + f"; every fold's >= 100 mL synthetic >= 0.8: {'yes' if large_ok else 'no'}")
    return "\n".join(lines)


def span(values: list[float], digits: int) -> str:
    """``lo–hi`` at ``digits`` decimals, or one value where they agree at that precision."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}–{high}"


def held_out_ranges(labels: list[str]) -> str:
    """A markdown table: per held-out case and setting (native, 6 mm), the range over the result
    files of volume Dice, lesion F1, |ΔV| mL and false-positive mL, and the ADC rule's scores."""
    rows: dict[tuple[str, str, str], list[dict]] = {}
    rule: dict[tuple[str, str, str], dict] = {}
    for label in labels:
        result = json.loads((RESULTS / f"{label}.json").read_text(encoding="utf-8"))
        for fold, entry in result["folds"].items():
            for grid in ("native", "6mm"):
                key = (entry["held_out_case"], fold, grid)
                rows.setdefault(key, []).append(entry["scores"][grid]["model"])
                rule[key] = entry["scores"][grid]["adc_rule"]
    lines = ["| held-out case | setting | volume Dice | lesion F1 | \\|ΔV\\| mL | FP mL | the ADC rule's Dice / lesion F1 / \\|ΔV\\| / FP mL |",
             "|---|---|---|---|---|---|---|"]
    for (case, fold, grid), scores in sorted(rows.items(), key=lambda item: (item[0][1], item[0][2] != "native")):
        first = f"{case} (fold {fold})" if grid == "native" else ""
        measures = [span([score[key] for score in scores], digits)
                    for key, digits in (("volume_dice", 3), ("lesion_f1", 3), ("abs_dv_ml", 2), ("fp_ml", 2))]
        adc = rule[(case, fold, grid)]
        lines.append(f"| {first} | {'native' if grid == 'native' else '6 mm'} | {' | '.join(measures)} "
                     f"| {adc['volume_dice']:.3f} / {adc['lesion_f1']:.3f} / {adc['abs_dv_ml']:.2f} / {adc['fp_ml']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    # argparse, so that a mistyped flag (or --help) is an error, not a silent rewrite of ablation.md
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--means", nargs="+", metavar="LABEL", help="print these result files' held-out means instead")
    parser.add_argument("--rule26", nargs=3, type=float, metavar=("DICE", "F1", "FP_ML"),
                        help="with --means: judge the pooled means by rule 26 against these reference means")
    parser.add_argument("--ranges", nargs="+", metavar="LABEL",
                        help="print the held-out table (ranges over these result files) instead")
    args = parser.parse_args()
    if args.ranges and args.means:
        parser.error("--ranges and --means are separate tables: give one")
    if args.rule26 and not args.means:
        parser.error("--rule26 needs --means")
    if args.ranges:
        print(held_out_ranges(args.ranges))
    elif args.means:
        print(held_out_means(args.means, tuple(args.rule26) if args.rule26 else None))
    else:
        main()
