"""Rule 71 of issue 13 (docs/ablation.md): the skull-on condition of a release, pooled over skull-on studies.

    .venv/bin/python benchmarks/skull_on_gate.py benchmarks/results/synthetic_false_positives_held-out-8.json \\
        benchmarks/results/synthetic_false_positives_skull-on-16.json \\
        benchmarks/results/synthetic_false_positives_skull-on-16-fresh.json --default lambdaunet-dwi

Reads ``synthetic_false_positives.py`` results (their skull-on rows only; a package is named by its
directory's last part, or for ``runs/X/STAGE/pkg`` by ``X`` (stage ``pretrain``) or ``X/STAGE``)
and prints, per package found in every file: the skull-on studies, the mean volume Dice over
those with an infarct, the mean false positives per study (mL), and with ``--default`` whether it
passes: Dice at least the default's minus ``--dice-margin`` (rule 71: ``DICE_MARGIN``) and false
positives at most the default's plus ``--fp-margin-ml`` (rule 71: ``FP_MARGIN_ML``). Rule 75's
condition on the gate studies as they are (false positives at most 2 mL per study above the
default's, Dice not judged) is ``--fp-margin-ml 2 --dice-margin inf``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

DICE_MARGIN = 0.03
FP_MARGIN_ML = 0.5


def package_name(path: str) -> str:
    """A package's short name from its directory: ``runs/x/pretrain/pkg`` -> ``x``, ``.../lambdaunet-dwi`` -> itself."""
    parts = [part for part in path.strip("/").split("/") if part]
    if len(parts) >= 3 and parts[-1] == "pkg":
        return parts[-3] if parts[-2] == "pretrain" else f"{parts[-3]}/{parts[-2]}"
    return parts[-1]


def pooled(files: list[Path]) -> dict[str, dict[str, Any]]:
    """Per package present in every file: studies, mean Dice over the studies with an infarct, mean false positives."""
    rows_per_file = [[row for row in json.loads(path.read_text(encoding="utf-8"))["rows"] if row["skull_on"]] for path in files]
    names = set.intersection(*({package_name(row["package"]) for row in rows} for rows in rows_per_file))
    out = {}
    for name in sorted(names):
        rows = [row for rows in rows_per_file for row in rows if package_name(row["package"]) == name]
        lesions = [row["volume_dice"] for row in rows if row["truth_ml"] > 0]
        out[name] = {"studies": len(rows), "with_infarct": len(lesions),
                     "dice_with_infarct": sum(lesions) / len(lesions) if lesions else float("nan"),
                     "fp_ml_per_study": sum(row["fp_ml"] for row in rows) / len(rows)}
    return out


def passes(entry: dict[str, Any], base: dict[str, Any], *, dice_margin: float = DICE_MARGIN,
           fp_margin_ml: float = FP_MARGIN_ML) -> bool:
    """Whether ``entry`` passes against the default's ``base`` (:func:`pooled` entries); an infinite
    ``dice_margin`` leaves the Dice out (rule 75's condition on the studies as they are)."""
    dice_ok = dice_margin == float("inf") or entry["dice_with_infarct"] >= base["dice_with_infarct"] - dice_margin
    return dice_ok and entry["fp_ml_per_study"] <= base["fp_ml_per_study"] + fp_margin_ml


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="synthetic_false_positives_*.json files")
    parser.add_argument("--default", help="the default package's name, to judge the others against")
    parser.add_argument("--dice-margin", type=float, default=DICE_MARGIN,
                        help=f"how far below the default's Dice a package may fall (rule 71: {DICE_MARGIN}; inf: not judged)")
    parser.add_argument("--fp-margin-ml", type=float, default=FP_MARGIN_ML,
                        help=f"how many mL per study above the default's false positives (rule 71: {FP_MARGIN_ML})")
    args = parser.parse_args()
    table = pooled(args.results)
    print(f"| package | skull-on studies | with an infarct | mean volume Dice over them | false positives per study (mL) "
          f"| Dice >= default - {args.dice_margin:g}, false positives <= default + {args.fp_margin_ml:g} mL |")
    print("|---|---|---|---|---|---|")
    base = table.get(args.default) if args.default else None
    for name, entry in table.items():
        verdict = ""
        if base is not None and name != args.default:
            verdict = "passes" if passes(entry, base, dice_margin=args.dice_margin, fp_margin_ml=args.fp_margin_ml) else "fails"
        print(f"| {name} | {entry['studies']} | {entry['with_infarct']} | {entry['dice_with_infarct']:.3f} | {entry['fp_ml_per_study']:.2f} | {verdict} |")


if __name__ == "__main__":
    main()
