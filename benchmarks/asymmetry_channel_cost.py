"""What the ``dwi_asymmetry`` input channel costs at inference: ``prepare_input`` with the paper's
two channels and with [eADC, DWI, dwi_asymmetry], side by side, on ``end_to_end.py``'s study
(the inference phantom, 24 x 256 x 256 at 2 x 2 x 6 mm), each in a fresh process.

The difference is the channel: the mirror's rigid registration (``preprocessing.symmetry``),
its resampling and the smoothing. The network's extra cost (one more input channel of the
stem convolution) is not measured here; it is a small part of the first layer.

    nice -n 19 .venv/bin/python benchmarks/asymmetry_channel_cost.py   # -> benchmarks/results/asymmetry_channel_cost_cpu.{md,csv}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, emit, invocation, machine_header, run_child, write_tables  # noqa: E402

PAPER = {"channels": ["eadc", "dwi"], "in_plane_spacing_mm": 2.0,
         "normalization": {"dwi": "brain_median_clip4", "eadc": "clip01"}, "pad_multiple": 16}
CONFIGURATIONS = {"paper [eadc, dwi]": PAPER, "+ dwi_asymmetry": {**PAPER, "channels": ["eadc", "dwi", "dwi_asymmetry"]}}


def child(config: dict[str, Any]) -> None:
    from LambdaSegmentLib.inference.phantom import make_phantom
    from LambdaSegmentLib.io import Study
    from LambdaSegmentLib.io.units import eadc_from_adc
    from LambdaSegmentLib.preprocessing import prepare_input

    size, slices = config["size"], config["slices"]
    phantom = make_phantom(size_ijk=(size, size, slices), spacing_mm=(config["in_plane_mm"], config["in_plane_mm"], 6.0))
    adc = phantom.adc.with_array(phantom.adc.array * 1000.0)  # 10⁻³ mm²/s, as load_study gives it
    study = Study(phantom.dwi, adc, eadc_from_adc(adc, 1000.0), 1000.0, "1e-3 mm2/s", {"dwi": "<memory>", "adc": "<memory>"})
    start, cpu = time.perf_counter(), time.process_time()
    prepared = prepare_input(study, CONFIGURATIONS[config["configuration"]])
    emit({**config, "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
          "stack": "x".join(str(n) for n in prepared.channels.shape)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--slices", type=int, default=24)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--in-plane-mm", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default=str(RESULTS / "asymmetry_channel_cost_cpu"), help="table stem (.md and .csv)")
    args = parser.parse_args()
    if args.child is not None:
        child(json.loads(args.child))
        return
    rows = []
    for name in CONFIGURATIONS:
        config = {"configuration": name, "slices": args.slices, "size": args.size, "in_plane_mm": args.in_plane_mm}
        row = run_child(Path(__file__), config, timeout_s=600, threads=args.threads)
        rows.append(row)
        print(json.dumps(row), flush=True)
    base = rows[0].get("seconds")
    for row in rows[1:]:
        if base and row.get("seconds") is not None:
            row["extra_seconds"] = row["seconds"] - base
    header = machine_header(
        "Cost of the dwi_asymmetry input channel: prepare_input with and without it",
        invocation(),
        {"threads": args.threads,
         "study": f"{args.slices}x{args.size}x{args.size} @ {args.in_plane_mm:g} x {args.in_plane_mm:g} x 6 mm (inference phantom)",
         "note": "one run per configuration, each in a fresh process, on a shared 2-core machine under load "
                 "(a training run was using both cores): an upper bound, expect tens of % noise"},
    )
    columns = [("configuration", "configuration"), ("stack", "model stack (c t h w)"), ("seconds", "prepare_input s"),
               ("cpu_seconds", "cpu s"), ("extra_seconds", "extra s"), ("load_1min_before", "load 1-min before"),
               ("load_1min_after", "load 1-min after")]
    write_tables(rows, columns, Path(args.output), header)


if __name__ == "__main__":
    main()
