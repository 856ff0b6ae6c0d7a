"""Issue 13's rule 89: does detection of injected lesions rank networks as real-lesion detection does?

Reads a ``small_lesion_detection.py --real --injected`` result and, over its packages held out
on ``--case``, prints per package the share of that case's real lesions of one size bin found
and the shares of the injected (faint and default signal) and synthetic emboli found in the
same bin, then the Spearman rank correlation (ties averaged, ``scipy.stats.spearmanr``) of each
of those three against the real count. With ``--stage1 RESULT``, also the share of synthetic
emboli found by each package's stage 1 (``runs/X/foldB/pkg``'s ``runs/X/pretrain/pkg``, the copy
its stage 2 started from, read from a second ``small_lesion_detection.py`` result; rule 90).

    .venv/bin/python benchmarks/injected_rank.py benchmarks/results/small_lesion_detection_rule89.json --case 0001 \\
        [--stage1 benchmarks/results/small_lesion_detection_rule90.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from scipy.stats import spearmanr

COLUMNS = ("injected faint", "injected default", "synthetic emboli")
STAGE1_COLUMN = "stage 1 alone, synthetic emboli"


def bin_of(table: list[dict[str, Any]], voxels: str) -> dict[str, Any]:
    """The entry of a ``by_size`` table for the size bin ``voxels`` (e.g. "5-25")."""
    (entry,) = [entry for entry in table if entry["voxels"] == voxels]
    return entry


def stage1_of(spec: str) -> str:
    """The stage-1 copy a stage-2 package started from: ``runs/X/foldB/pkg`` -> ``runs/X/pretrain/pkg``."""
    path = Path(spec)
    return str(path.parent.parent / "pretrain" / path.name)


def rows(result: dict[str, Any], case: str, voxels: str, stage1: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per package held out on ``case``: real lesions (n, found) and the three found shares of the
    bin, and with ``stage1`` (a second result) its stage 1's synthetic-emboli share."""
    out = []
    for spec, entry in result["packages"].items():
        real = entry.get(f"real_{case}_native")
        if real is None or not real["held_out"] or f"injected_{case}_faint" not in entry:
            continue
        real_bin = bin_of(real["by_size"], voxels)
        row = {
            "package": spec, "real_n": real_bin["n"], "real_found": round(real_bin["found"] * real_bin["n"]),
            "injected faint": bin_of(entry[f"injected_{case}_faint"]["by_size"], voxels)["found"],
            "injected default": bin_of(entry[f"injected_{case}_default"]["by_size"], voxels)["found"],
            "synthetic emboli": bin_of(entry["synthetic_embolic"]["by_size"], voxels)["found"],
        }
        if stage1 is not None:
            stage1_entry = stage1["packages"].get(stage1_of(spec))
            if stage1_entry is None:
                raise SystemExit(f"injected_rank: no result for {stage1_of(spec)}, the stage 1 of {spec}")
            row[STAGE1_COLUMN] = bin_of(stage1_entry["synthetic_embolic"]["by_size"], voxels)["found"]
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, help="small_lesion_detection.py --real --injected output")
    parser.add_argument("--case", default="0001", help="the held-out case (default 0001)")
    parser.add_argument("--voxels", default="5-25", help="the size bin (default 5-25)")
    parser.add_argument("--stage1", type=Path, default=None, metavar="RESULT",
                        help="small_lesion_detection.py result holding the packages' stage 1s")
    args = parser.parse_args()
    stage1 = json.loads(args.stage1.read_text(encoding="utf-8")) if args.stage1 else None
    table = rows(json.loads(args.result.read_text(encoding="utf-8")), args.case, args.voxels, stage1)
    columns = (*COLUMNS, STAGE1_COLUMN) if stage1 is not None else COLUMNS
    if len(table) < 3:
        raise SystemExit(f"injected_rank: {args.result}: {len(table)} packages held out on {args.case} with --injected; need 3")
    print(f"| package | real {args.voxels}-voxel lesions of {args.case} found | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for row in table:
        print(f"| {row['package']} | {row['real_found']} of {row['real_n']} | " + " | ".join(f"{row[c]:.2f}" for c in columns) + " |")
    real = [row["real_found"] for row in table]
    for column in columns:
        rho = spearmanr([row[column] for row in table], real).statistic
        print(f"Spearman, {column} against real found, over {len(table)} packages: {rho:.3f}")


if __name__ == "__main__":
    main()
