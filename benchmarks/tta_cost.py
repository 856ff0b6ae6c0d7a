"""What ``--tta`` and ``--uncertainty`` cost: ``lambdasegment segment`` with and without them,
side by side, each in a fresh process (``end_to_end.py``'s study, model choice and timing).

Configurations: the default; ``--tta`` (3 passes: as acquired, left-right mirror, the other
in-plane mirror, averaged); ``--tta --uncertainty PATH`` (the same passes, plus their
disagreement map written on the DWI grid). ``--uncertainty`` alone runs the same passes as
``--tta``. Columns: wall seconds of the fresh CLI process, its CPU seconds, the segmentation
seconds the report gives (preprocess, passes, back to the DWI grid), peak RSS, and a digest of
the mask (the default's and --tta's may differ: averaging changes the probability).

    nice -n 10 .venv/bin/python benchmarks/tta_cost.py            # -> benchmarks/results/tta_cost_cpu.{md,csv}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from end_to_end import RESULTS, add_run_arguments, mask_digest, model_choice, segment_command, timed_run, write_study  # noqa: E402

CONFIGURATIONS = {"default": [], "--tta": ["--tta"], "--tta --uncertainty": ["--tta", "--uncertainty", "{out}/doubt.nii.gz"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each configuration (default 1)")
    parser.add_argument("--output", default=str(RESULTS / "tta_cost_cpu"), help="table stem (.md and .csv)")
    args = parser.parse_args()
    from harness import cli_executable, invocation, machine_header, threads_env, write_tables

    env = threads_env(args.threads)
    executable = cli_executable()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        dwi, adc = write_study(scratch, args.slices, args.size, args.in_plane_mm)
        model_dir, model_label = model_choice(args.model, scratch)
        for repeat in range(args.repeats):
            for name, extra in CONFIGURATIONS.items():
                out = scratch / f"{name.replace(' ', '').replace('-', '')}{repeat}"
                command = segment_command(dwi, adc, out, model_dir, args.device) + [a.format(out=out) for a in extra]
                row = {"configuration": name, "repeat": repeat, "load_1min": os.getloadavg()[0],
                       **timed_run([executable, *command], env)}
                if row["exit_code"] == 0:
                    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
                    row.update(segmentation_seconds=report["seconds"], passes=len(report["test_time_flips"]["flips"]),
                               mask_sha256=mask_digest(out / "mask.nii.gz"))
                rows.append(row)
                print(json.dumps(row), flush=True)
    default = {r["repeat"]: r for r in rows if r["configuration"] == "default" and r["exit_code"] == 0}
    for row in rows:
        base = default.get(row["repeat"])
        if base is not None and row["exit_code"] == 0:
            row["x_default_segmentation"] = row["segmentation_seconds"] / base["segmentation_seconds"]
            row["extra_peak_rss_gib"] = row["peak_rss_gib"] - base["peak_rss_gib"]
    header = machine_header("Cost of --tta and --uncertainty: lambdasegment segment, side by side with the default",
                            invocation(),
                            {"threads": args.threads, "device": args.device, "model": model_label,
                             "study": f"{args.slices}x{args.size}x{args.size} @ {args.in_plane_mm:g} mm (synthetic head, end_to_end.write_study)",
                             "note": "seconds = wall time of a fresh CLI process (imports included); segmentation = report.json "
                                     "seconds (preprocess, model passes, back to the DWI grid); one run per configuration "
                                     "on a shared 2-core machine: compare within a row group, expect a few % noise"})
    columns = [("configuration", "configuration"), ("repeat", "repeat"), ("exit_code", "exit"), ("passes", "model passes"),
               ("seconds", "seconds"), ("cpu_seconds", "cpu s"), ("segmentation_seconds", "segmentation s"),
               ("x_default_segmentation", "x default (segmentation)"), ("peak_rss_gib", "peak RSS GiB"),
               ("extra_peak_rss_gib", "extra RSS GiB"), ("load_1min", "load 1-min"), ("mask_sha256", "mask SHA-256")]
    write_tables(rows, columns, Path(args.output), header)
    print(f"wrote {args.output}.md and .csv")


if __name__ == "__main__":
    main()
