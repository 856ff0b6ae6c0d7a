"""Issue 13's rule 50, the release gate on the held-out synthetic studies, from ``lambdasegment evaluate``'s per-case CSV.

A package ships only if, on the 8 held-out synthetic studies
(``lambdasegment synthesize /tmp/heldout-synth --n 8 --seed 30000000 --in-plane-mm 1.2 2.0``),
its mean volume Dice is at least 0.50 and its mean over the skull-on ones is at least the
default's minus 0.05. Which studies are skull-on is read from each study's
``<case>_params.json`` (``skull_stripped``), as ``synthesize`` wrote it, not listed by hand.

    .venv/bin/lambdasegment evaluate --models PKG ... --data /tmp/heldout-synth --per-case-csv CASES.csv --no-rule
    .venv/bin/python benchmarks/synthetic_release_gate.py CASES.csv --data /tmp/heldout-synth [--default METHOD]

Prints, per method (the CSV's ``method`` column), the mean volume Dice over all studies and over
the skull-on ones, and with ``--default`` whether each method passes the gate.

The floor of 0.50 belongs to those 8 studies (2.1.0 scores 0.59 on them). On a fresh set drawn
the same way from other seeds the default itself may fall below it (issue 13, rule 100: 0.368),
so ``--floor-below-default M`` reads the floor there as the default's own mean minus M.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

FLOOR = 0.50  # the "today's 0.50 Dice" on held-out synthetic studies
SKULL_ON_MARGIN = 0.05  # how far below the default's skull-on mean a package may fall


def skull_on(data: Path, case: str) -> bool:
    """Whether the study ``case`` of ``data`` was made skull-on (its params file's ``skull_stripped``)."""
    found = sorted(data.rglob(f"{case}_params.json"))
    if len(found) != 1:
        raise SystemExit(f"synthetic_release_gate: expected one {case}_params.json under {data}, found {len(found)}")
    return not json.loads(found[0].read_text(encoding="utf-8"))["skull_stripped"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=Path, help="lambdasegment evaluate --per-case-csv output")
    parser.add_argument("--data", type=Path, required=True, help="the folder the studies were evaluated from")
    parser.add_argument("--default", default=None, metavar="METHOD", help="the default package's method name in the CSV")
    parser.add_argument("--floor-below-default", type=float, default=None, metavar="M",
                        help="with --default: the floor is the default's mean volume Dice minus M, not 0.50 (a fresh set)")
    args = parser.parse_args()

    with open(args.cases, newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    on = {case: skull_on(args.data, case) for case in {row["case"] for row in rows}}
    means: dict[str, tuple[float, float, int, int]] = {}
    for method in dict.fromkeys(row["method"] for row in rows):
        scores = [(float(row["volume_dice"]), on[row["case"]]) for row in rows if row["method"] == method]
        skull_on_scores = [dice for dice, is_on in scores if is_on]
        means[method] = (sum(dice for dice, _ in scores) / len(scores),
                         sum(skull_on_scores) / len(skull_on_scores) if skull_on_scores else float("nan"),
                         len(scores), len(skull_on_scores))
    if args.default is not None and args.default not in means:
        raise SystemExit(f"synthetic_release_gate: --default {args.default!r} is not a method of {args.cases}")
    if args.floor_below_default is not None and args.default is None:
        raise SystemExit("synthetic_release_gate: --floor-below-default needs --default: the floor is read from it")
    floor = FLOOR if args.floor_below_default is None else means[args.default][0] - args.floor_below_default
    print("| method | studies | mean volume Dice | skull-on studies | their mean | rule 50 |\n|---|---|---|---|---|---|")
    for method, (mean, on_mean, n, n_on) in means.items():
        verdict = ""
        if args.default is not None:
            passes = mean >= floor and on_mean >= means[args.default][1] - SKULL_ON_MARGIN
            verdict = "passes" if passes else "fails"
        print(f"| {method} | {n} | {mean:.4f} | {n_on} | {on_mean:.3f} | {verdict} |")


if __name__ == "__main__":
    main()
