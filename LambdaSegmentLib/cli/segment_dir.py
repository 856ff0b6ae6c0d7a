"""``lambdasegment segment-dir``: segment every case of a folder or CSV listing.

A failing case is reported and the batch goes on; finished cases are skipped on the next
run (resumable) unless ``--overwrite``; ``OUTPUT_DIR/summary.csv`` lists every case.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .segment import add_model_options

if TYPE_CHECKING:
    from LambdaSegmentLib.reports.pages import PageWriter


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "segment-dir", help="segment a batch of studies",
        description="Segment every case in INPUT (a BIDS / ISLES'22 folder: sub-*/[ses-*/]dwi/*_dwi.nii.gz with "
        "*_adc.nii.gz (or *_eadc / *_b0) beside it; or a CSV with columns case, dwi and adc, eadc or b0). Writes "
        "OUTPUT_DIR/<case>/<case>_mask.nii.gz and <case>_report.{json,csv,png}, and OUTPUT_DIR/summary.csv "
        "(case, volume_ml, lesion_count, seconds, status, error). A failing case is reported and the batch goes "
        "on; finished cases are skipped when run again. Exit codes: 0 all cases done, 2 a case had bad input or the "
        "batch itself is bad, 1 an unexpected error. Research use only, not a medical device.",
    )
    parser.add_argument("input", type=Path, metavar="INPUT_DIR", help="BIDS / ISLES'22 folder, or a CSV listing of cases")
    parser.add_argument("output_dir", type=Path, metavar="OUTPUT_DIR", help="where case folders and summary.csv go")
    parser.add_argument("--workers", type=int, default=1,
                        help="DataLoader worker processes loading the next studies while one is segmented (default 1; 0 = none)")
    parser.add_argument("--devices", type=int, default=None, metavar="N",
                        help="spread cases over N devices per node with Lightning's predict loop (DDP; needs the train extra)")
    parser.add_argument("--num-nodes", type=int, default=1, metavar="M", help="nodes for --devices (default 1)")
    add_model_options(parser)
    parser.set_defaults(func=run)


class ProgressBar:
    """One self-overwriting line on stderr: bar, cases done, elapsed time and ETA."""

    def __init__(self, total: int, width: int = 28) -> None:
        self.total, self.width, self.start = total, width, time.perf_counter()

    def show(self, done: int, note: str = "") -> None:
        elapsed = time.perf_counter() - self.start
        filled = int(self.width * done / max(1, self.total))
        eta = "--:--" if done == 0 else clock(elapsed / done * (self.total - done))
        line = f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{self.total} cases  elapsed {clock(elapsed)}  ETA {eta}  {note}"
        print(line[:160].ljust(100), end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        print(file=sys.stderr, flush=True)


def clock(seconds: float) -> str:
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes:02d}:{seconds:02d}"


def run(args: argparse.Namespace) -> int:
    if args.devices is not None:
        return segment_all(args, None)
    from LambdaSegmentLib.reports.pages import PageWriter

    # Started before torch is imported: the page helper imports matplotlib meanwhile.
    with PageWriter() as pages:
        return segment_all(args, pages)


def segment_all(args: argparse.Namespace, pages: PageWriter | None) -> int:
    from LambdaSegmentLib.errors import BadInputError
    from LambdaSegmentLib.inference import load_model_package
    from LambdaSegmentLib.inference.batch import discover_cases, finished_report, iterate_loaded, start_item, summarise, write_summary

    if args.workers < 0:
        raise BadInputError("--workers", f"must be >= 0, got {args.workers}")
    if args.memory_budget_gb is not None and args.memory_budget_gb <= 0:
        raise BadInputError("--memory-budget-gb", f"must be positive, got {args.memory_budget_gb:g}")
    if args.devices is not None and (args.devices < 1 or args.num_nodes < 1):
        raise BadInputError("--devices", "--devices and --num-nodes must be >= 1")
    if args.output_dir.exists() and not args.output_dir.is_dir():
        raise BadInputError(args.output_dir, "OUTPUT_DIR exists and is not a folder")
    cases = discover_cases(args.input, resample_to_dwi=args.resample_to_dwi, adc_unit=args.adc_unit)
    package = load_model_package(args.model)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    finished = {case.name for case in cases if finished_report(args.output_dir, case.name) is not None}
    done_before = set() if args.overwrite else finished
    todo = [case for case in cases if case.name not in done_before]
    print(f"{len(cases)} case(s) in {args.input}: {len(todo)} to segment, {len(cases) - len(todo)} done earlier", file=sys.stderr)
    options = dict(memory_budget_gb=args.memory_budget_gb, figure_format=args.figure_format, overwrite=args.overwrite,
                   precision=args.precision)

    if args.devices is not None:
        from LambdaSegmentLib.inference.distributed import predict_with_lightning

        rows = predict_with_lightning(todo, package, args.output_dir, devices=args.devices, num_nodes=args.num_nodes,
                                      device=args.device, workers=args.workers, **options)
        if rows is None:
            return 0  # not rank 0: rank 0 reports
    else:
        rows = {}
        bar = ProgressBar(len(todo))
        bar.show(0)

        def record(row: dict) -> None:
            rows[row["case"]] = row
            write_summary(args.output_dir, summarise(args.output_dir, cases, rows, done_before))
            if row["status"] == "failed":
                print(f"\n{row['case']}: failed: {row['error']}", file=sys.stderr)
            for message in row.get("warnings", []):
                print(f"\nlambdasegment: warning: {row['case']}: {message}", file=sys.stderr)
            bar.show(len(rows), f"{row['case']}: {row['status']}")

        # Each case is finished (its report page waited for, its folder moved into place) after
        # the next one is segmented: the page helper draws one case's page during the next's work.
        finish = None
        for item in iterate_loaded(todo, args.workers):
            started = start_item(item, package, args.output_dir, device=args.device, pages=pages, **options)
            if finish is not None:
                record(finish())
            finish = started
        if finish is not None:
            record(finish())
        bar.close()
    summary = summarise(args.output_dir, cases, rows, done_before)
    path = write_summary(args.output_dir, summary)
    failed = [row for row in summary if row["status"] == "failed"]
    print(f"{len(cases) - len(failed)}/{len(cases)} case(s) done, {len(failed)} failed; summary: {path}")
    if any(not row.get("bad_input", True) for row in rows.values() if row["status"] == "failed"):
        return 1
    return 2 if failed else 0
