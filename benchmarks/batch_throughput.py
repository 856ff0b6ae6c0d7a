"""Batch throughput of ``lambdasegment segment-dir``: studies per minute, end to end.

A BIDS folder of ``--studies`` copies of the 24 x 256 x 256 synthetic study of ``end_to_end.write_study`` (2 x 2 x 6 mm:
the network sees the full 256 x 256 grid, like ``end_to_end.py``) is segmented by the real
console script in a fresh process, once per ``--workers`` value: 0 = the main process
reads each study itself; N = N DataLoader worker processes read (and check units of) the
next studies while the main process preprocesses, infers and writes the previous one.
Every case writes its mask and its JSON/CSV/PNG report, as in production.

The table gives the whole run's wall time (Python start-up, imports and model load
included: a conservative rate), studies per minute over that wall time, CPU seconds
(user + system, workers included), the peak RSS of the largest process, and the mean
per-case seconds of ``summary.csv`` (the case's own work: loading, segmenting, writing, and
waiting for its report page, which the page helper draws while the next case is segmented).

    nice -n 10 .venv/bin/python benchmarks/batch_throughput.py --studies 12 --workers 0 1
    .venv/bin/python benchmarks/batch_throughput.py --device cuda --studies 100 --workers 0 2 4 \\
        --output benchmarks/results/batch_throughput_cuda
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from end_to_end import add_run_arguments, model_choice, timed_run, write_study  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def write_batch(folder: Path, studies: int, slices: int, size: int, in_plane_mm: float) -> None:
    """``studies`` copies of one synthetic study in the BIDS layout ``segment-dir`` reads."""
    source = folder / ".source"
    source.mkdir(parents=True)
    dwi, adc = write_study(source, slices, size, in_plane_mm)
    for index in range(studies):
        subject = f"sub-{index:03d}"
        target = folder / subject / "dwi"
        target.mkdir(parents=True)
        shutil.copyfile(dwi, target / f"{subject}_dwi.nii.gz")
        shutil.copyfile(adc, target / f"{subject}_adc.nii.gz")
    shutil.rmtree(source)


def summary_of(output_dir: Path) -> tuple[int, float]:
    """(cases done, mean per-case seconds) from ``summary.csv``."""
    with open(output_dir / "summary.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    done = [row for row in rows if row["status"] == "ok"]
    mean = sum(float(row["seconds"]) for row in done) / len(done) if done else float("nan")
    return len(done), mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=12)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1])
    add_run_arguments(parser)
    parser.add_argument("--output", default=str(RESULTS / "batch_throughput_cpu"), help="table stem (.md and .csv)")
    args = parser.parse_args()
    from harness import cli_executable, invocation, machine_header, threads_env, write_tables

    env = threads_env(args.threads)
    executable = cli_executable()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        write_batch(scratch / "studies", args.studies, args.slices, args.size, args.in_plane_mm)
        model_dir, model_label = model_choice(args.model, scratch)
        for workers in args.workers:
            out = scratch / f"out-workers{workers}"
            command = [executable, "segment-dir", str(scratch / "studies"), str(out), "--workers", str(workers),
                       "--device", args.device, *(["--model", str(model_dir)] if model_dir is not None else [])]
            load = os.getloadavg()[0]
            row: dict[str, Any] = {"workers": workers, "studies": args.studies, "load_1min": load, **timed_run(command, env)}
            if out.joinpath("summary.csv").exists():
                done, mean = summary_of(out)
                row.update(done=done, mean_case_seconds=mean, studies_per_minute=60 * done / row["seconds"])
            rows.append(row)
            print(json.dumps(row), flush=True)
    header = machine_header(
        "Batch throughput: lambdasegment segment-dir (read, preprocess, infer, write mask + report per case)",
        invocation(),
        {"threads": args.threads, "device": args.device, "model": model_label,
         "study": f"{args.slices}x{args.size}x{args.size} at {args.in_plane_mm:g} x {args.in_plane_mm:g} x 6 mm, "
                  f"{args.studies} copies",
         "note": "wall = the whole segment-dir process (start-up, imports, model load included); studies/min = "
                 "done x 60 / wall; cpu = user + system of the process and its workers; per-case = mean summary.csv "
                 "seconds (load, segment, write, wait for the report page)"})
    columns = [("workers", "loader workers"), ("studies", "studies"), ("exit_code", "exit"), ("done", "done"),
               ("seconds", "wall s"), ("studies_per_minute", "studies/min"), ("cpu_seconds", "cpu s"),
               ("mean_case_seconds", "per-case s (summary.csv)"), ("peak_rss_gib", "peak RSS GiB (largest process)"),
               ("load_1min", "load 1-min")]
    write_tables(rows, columns, Path(args.output), header)
    print(f"wrote {args.output}.md and .csv")


if __name__ == "__main__":
    main()
