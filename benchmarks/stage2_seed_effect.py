"""How the three stage-2 seeds of issue 13's rows compare, over every row scored on all three
(issue 13's rule 95: seed 51000007 is the lowest in most rows).

    .venv/bin/python benchmarks/stage2_seed_effect.py
    # reads benchmarks/results/real_scan_cv/*-seed5100000{5,6,7}*.json

A row is the part of a result's label around ``-seed<SEED>`` (``cv-x-seed51000005-unseeded-nlb``
and ``cv-x-seed51000007-unseeded-nlb`` are one row). Per row and seed: the mean of the four
volume Dice scores (both folds, native and 6 mm). Printed: how many rows have each seed lowest,
each seed's mean over the rows, and fold A's and fold B's native Dice averaged per seed over
every result file of that seed.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_scan_cv_table import RESULTS, held_out_scores  # noqa: E402

SEEDS = ("51000005", "51000006", "51000007")
LABEL = re.compile(r"^(?P<row>.*)-seed(?P<seed>5100000[567])(?P<rest>.*)$")


def seed_effect(directory: Path) -> dict:
    """Per seed: rows where it is lowest, its mean four-score Dice over complete rows, and each
    fold's native Dice averaged over every result of that seed."""
    rows: dict[str, dict[str, float]] = defaultdict(dict)
    native: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in sorted(directory.glob("*-seed5100000[567]*.json")):
        match = LABEL.match(path.stem)
        if match is None:
            continue
        result = json.loads(path.read_text())
        rows[match["row"] + "|" + match["rest"]][match["seed"]] = statistics.fmean(
            score["volume_dice"] for score in held_out_scores(result))
        for fold, entry in result["folds"].items():
            native[(fold, match["seed"])].append(entry["scores"]["native"]["model"]["volume_dice"])
    complete = {row: by_seed for row, by_seed in rows.items() if len(by_seed) == len(SEEDS)}
    lowest = Counter(min(by_seed, key=by_seed.get) for by_seed in complete.values())
    return {"rows": len(complete),
            "lowest": {seed: lowest.get(seed, 0) for seed in SEEDS},
            "mean_dice": {seed: statistics.fmean(r[seed] for r in complete.values()) if complete else None for seed in SEEDS},
            "native_by_fold": {f"{fold} {seed}": statistics.fmean(values) for (fold, seed), values in sorted(native.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="real_scan_cv.py result folder")
    out = seed_effect(parser.parse_args().results)
    print(f"{out['rows']} rows scored on all three stage-2 seeds")
    for seed in SEEDS if out["rows"] else ():  # no complete row: no seed's mean to print
        print(f"seed {seed}: lowest in {out['lowest'][seed]}, mean Dice {out['mean_dice'][seed]:.4f}")
    for key, value in out["native_by_fold"].items():
        print(f"fold {key} native Dice {value:.3f}")


if __name__ == "__main__":
    main()
