"""``lambdasegment evaluate``: score model packages on labelled data, in the paper's Table 1 layout.

Example::

    lambdasegment evaluate --models bundled runs/unet-pkg --data ISLES22/ --csv table1.csv
    lambdasegment evaluate --models bundled --data ISLES22/ --thick-slab 3 --csv table1-6mm.csv

Columns: Method, 2D/3D, DSC (the paper's per-slice DSC), Recall/Precision, F1 (pixel-level),
then volume Dice, ISLES'22 lesion-wise F1, |ΔV| (mL) and |Δ lesion count|, each the mean
over cases (scores in % like the paper's table, volumes in mL). The ADC-threshold rule
(ADC < 0.62×10⁻³ mm²/s and DWI > 1.2× brain median) is scored on the same data as a
reference row unless ``--no-rule``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from LambdaSegmentLib.errors import BadInputError

RULE_NAME = "ADC rule (ADC<0.62, DWI>1.2x median)"
PERCENT = ("dsc", "recall", "precision", "f1", "volume_dice", "lesion_f1")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="score model packages on labelled data (the paper's Table 1 + ISLES'22 metrics)",
        description="Segment every labelled case with each model package and print the paper's Table 1 "
        "layout plus volume Dice, lesion-wise F1, |dV| (mL) and |d lesion count|; writes the table as CSV.",
    )
    parser.add_argument("--models", nargs="+", required=True, metavar="PKG", help="model package directories ('bundled' = the shipped one)")
    parser.add_argument("--data", action="append", required=True, metavar="DIR|CSV", help="labelled folder (BIDS/ISLES'22) or CSV listing; repeatable")
    parser.add_argument("--csv", type=Path, default=Path("evaluation.csv"), help="table CSV to write (evaluation.csv)")
    parser.add_argument("--per-case-csv", type=Path, default=None, help="also write every case's scores")
    parser.add_argument("--thick-slab", type=int, default=1, metavar="N", help="average N consecutive slices into one slab first (thick-slice setting); 1 = native")
    parser.add_argument("--no-rule", action="store_true", help="leave out the ADC-threshold rule row")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    parser.add_argument("--overwrite", action="store_true", help="replace existing CSV files")
    parser.set_defaults(func=run)


def dimensionality(package: Any) -> str:
    """The paper's "2D/3D" column: 3D for volumetric kernels, 2D with no slice context, else 2.5D."""
    architecture = package.manifest["architecture"]
    if "3d" in str(architecture["name"]).lower() or architecture.get("config", {}).get("local_3d"):
        return "3D"
    return "2D" if package.slice_receptive_radius == 0 else "2.5D"


def _check_writable(path: Path | None, overwrite: bool) -> None:
    if path is not None and path.exists() and not overwrite:
        raise BadInputError(path, "exists; use --overwrite to replace it")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from LambdaSegmentLib.inference import load_model_package, segment_study
    from LambdaSegmentLib.io import load_study, read_volume
    from LambdaSegmentLib.metrics import CaseScores, adc_threshold_rule, mean_scores, score_case
    from LambdaSegmentLib.metrics.thick_slices import thick_slice_study
    from LambdaSegmentLib.preprocessing import find_slice_axis
    from LambdaSegmentLib.training import find_labelled_cases

    _check_writable(args.csv, args.overwrite)
    _check_writable(args.per_case_csv, args.overwrite)
    if args.thick_slab < 1:
        raise BadInputError(None, f"--thick-slab must be >= 1, got {args.thick_slab}")
    cases = [case for root in args.data for case in find_labelled_cases(root)]
    packages = [load_model_package(None if spec == "bundled" else spec) for spec in args.models]
    names = [f"{package.name} {package.version}" for package in packages]
    methods: list[tuple[str, str, Any]] = []
    for spec, name, package in zip(args.models, names, packages):
        # Packages that share a name and version (e.g. two stage-1 draws) are each named with their path,
        # the first as well, so that every row says which package it is.
        label = f"{name} ({spec})" if names.count(name) > 1 else name
        methods.append((label, dimensionality(package), package))
    if not args.no_rule:
        methods.append((RULE_NAME, "voxel", None))

    per_case: dict[str, list[CaseScores]] = {label: [] for label, _, _ in methods}
    rows_per_case: list[dict[str, Any]] = []
    for case in cases:
        study = load_study(dwi=case.dwi, adc=case.adc, eadc=case.eadc)
        truth = read_volume(case.mask)
        if args.thick_slab > 1:
            study, truth = thick_slice_study(study, truth, args.thick_slab)
        slice_axis = 2 - find_slice_axis(study.dwi)
        for label, _dims, package in methods:
            if package is None:
                mask = adc_threshold_rule(study)
            else:
                mask = segment_study(study, package, device=args.device).mask
            scores = score_case(np.asarray(mask.array), np.asarray(truth.array), voxel_volume_mm3=study.dwi.voxel_volume_mm3, slice_axis=slice_axis)
            per_case[label].append(scores)
            rows_per_case.append({"case": case.name, "method": label, **scores.as_dict()})
            print(f"{case.name}: {label}: volume Dice {scores.volume_dice:.3f}, lesion F1 {scores.lesion_f1:.3f}", file=sys.stderr)

    table = []
    for label, dims, _package in methods:
        mean = mean_scores(per_case[label])
        table.append({"method": label, "dims": dims, "cases": len(per_case[label]), **mean})
    print(format_table(table, slab=args.thick_slab))
    write_csv(args.csv, table)
    if args.per_case_csv is not None:
        write_csv(args.per_case_csv, rows_per_case)
    print(f"table written to {args.csv}")
    return 0


def format_table(table: list[dict[str, Any]], *, slab: int = 1) -> str:
    """The paper's Table 1 (scores in %) with the ISLES'22 columns appended."""
    header = f"{'Method':40s} {'2D/3D':6s} {'DSC':>6s} {'Recall/Precision':>17s} {'F1':>6s} {'VolDice':>7s} {'LesF1':>6s} {'|dV|mL':>7s} {'|dN|':>6s}"
    lines = [header, "-" * len(header)]
    for row in table:
        rp = f"{100 * row['recall']:.2f}/{100 * row['precision']:.2f}"
        lines.append(
            f"{row['method'][:40]:40s} {row['dims']:6s} {100 * row['dsc']:6.2f} {rp:>17s} {100 * row['f1']:6.2f} "
            f"{100 * row['volume_dice']:7.2f} {100 * row['lesion_f1']:6.2f} {row['abs_volume_difference_ml']:7.2f} {row['abs_lesion_count_difference']:6.1f}"
        )
    cases = table[0]["cases"] if table else 0
    setting = "native slices" if slab == 1 else f"{slab} slices averaged per slab"
    lines.append(f"mean over {cases} case(s), {setting}; DSC = the paper's per-slice DSC; scores in %")
    return "\n".join(lines)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows as CSV (atomic: temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".partial")
    with open(temporary, "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    temporary.replace(path)
