"""Training throughput (windows/s) and peak memory of one optimiser step, with and without
activation checkpointing, one fresh process per configuration.

A step is the paper's: a batch of ``--windows`` windows of ``--slices`` consecutive slices
(paper: 12 x 8 at 256x256), BCE-with-logits loss, backward, RMSprop(momentum 0.9). One
warm-up step on a 1-window batch precedes the timed steps. Peak memory is the child's
peak RSS (CPU) or ``torch.cuda.max_memory_allocated`` (GPU).

    nice -n 10 .venv/bin/python benchmarks/training_speed.py                       # CPU, 2 threads
    .venv/bin/python benchmarks/training_speed.py --runs bundled:lambda_unet:4 bundled@1.5:lambda_unet:4 \
        bundled@2:lambda_unet:4 --slices 8 --size 96 --steps 3 --output benchmarks/results/training_speed_width_cpu
                                       # the stage-1 recipe's batch (4 x 8 x 96^2) at 1, 1.5 and 2 x the bundled widths

ARCH is "paper", "bundled" or "bundled@F": the bundled architecture with every width times F
(a whole multiple of its ``value_dim``; ``lambdasegment train --init-weights`` widens a package
to it, ``training/init_weights.py``).
    .venv/bin/python benchmarks/training_speed.py --device cuda --precisions fp32 bf16
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    RESULTS,
    bundled_architecture,
    emit,
    invocation,
    machine_header,
    matmul_gflops,
    peak_memory_gib,
    run_child,
    synchronize,
    write_tables,
)


def child(config: dict[str, Any]) -> None:
    from LambdaSegmentLib.models import create_model

    torch.set_num_threads(config["threads"])
    device = torch.device(config["device"])
    gflops = matmul_gflops(device)
    arch, _, factor = config["arch"].partition("@")
    architecture = {"name": "lambda_unet", "config": {}} if arch == "paper" else bundled_architecture()[0]
    model_config = dict(architecture["config"])
    if factor:
        model_config["widths"] = scaled_widths(model_config["widths"], float(factor))
    if config["model"] == "unet":
        model_config = {"widths": model_config["widths"]} if "widths" in model_config else {}
    else:
        model_config["checkpoint_activations"] = config["checkpoint"]
    torch.manual_seed(0)
    model = create_model(config["model"], **model_config).to(device).train()
    optimiser = torch.optim.RMSprop(model.parameters(), lr=1e-4, momentum=0.9, weight_decay=1e-8)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    precision = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[config["precision"]]
    scaler = torch.amp.GradScaler(device.type, enabled=config["precision"] == "fp16")

    def step(windows: int) -> None:
        x = torch.randn(windows, 2, config["slices"], config["size"], config["size"], device=device)
        target = (torch.rand(windows, 1, config["slices"], config["size"], config["size"], device=device) > 0.9).float()
        autocast = torch.autocast(device.type, dtype=precision) if precision else torch.autocast(device.type, enabled=False)
        optimiser.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(model(x).float(), target)
        scaler.scale(loss).backward()
        scaler.step(optimiser)
        scaler.update()

    step(1)  # warm-up
    times = []
    for _ in range(config["steps"]):
        synchronize(device)
        start = time.perf_counter()
        step(config["windows"])
        synchronize(device)
        times.append(time.perf_counter() - start)
    seconds = min(times)
    emit({**config, "status": "ok", "step_seconds": seconds, "windows_per_second": config["windows"] / seconds,
          "peak_gib": peak_memory_gib(device), "matmul_gflops": gflops})


def scaled_widths(widths: list[int], factor: float) -> list[int]:
    """Every width times ``factor``; refused unless each product is a whole number."""
    scaled = [width * factor for width in widths]
    if any(value != int(value) for value in scaled):
        raise SystemExit(f"training_speed.py: widths {widths} times {factor} are not whole: {scaled}")
    return [int(value) for value in scaled]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", nargs="+", default=["bundled:lambda_unet:12", "bundled:unet:12",
                                                       "paper:lambda_unet:1", "paper:unet:1"],
                        help="ARCH:MODEL:WINDOWS (paper batches are cut on a 2-core CPU; say so)")
    parser.add_argument("--slices", type=int, default=8)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--precisions", nargs="+", default=["fp32"], choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--output", default=str(RESULTS / "training_speed_cpu"))
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    rows: list[dict[str, Any]] = []
    for run in args.runs:
        arch, model_name, windows = run.split(":")
        if "@" in arch:
            scaled_widths(bundled_architecture()[0]["config"]["widths"], float(arch.partition("@")[2]))  # refuse before any child runs
        for checkpoint in ((False, True) if model_name == "lambda_unet" else (False,)):
            for precision in args.precisions:
                config = dict(arch=arch, model=model_name, windows=int(windows), checkpoint=checkpoint,
                              slices=args.slices, size=args.size, steps=args.steps, device=args.device,
                              precision=precision, threads=args.threads)
                row = run_child(Path(__file__).resolve(), config, args.timeout, args.threads)
                row["load_1min"] = row.get("load_1min_before")
                rows.append(row)
                print(json.dumps(row), flush=True)
                write_results(rows, args)  # after every run, so a cut-short run keeps its rows


def write_results(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    command = invocation()
    architecture, source = bundled_architecture()
    header = machine_header("Training throughput: one RMSprop step, BCE loss", command, {
        "threads": args.threads, "device": args.device,
        "bundled architecture": f"{json.dumps(architecture)} from {source}",
        "note": "load_1min is the 1-minute load average before each run (2 cores: above 2 the run shared the CPU)"})
    columns = [("arch", "config"), ("model", "model"), ("checkpoint", "activation checkpointing"),
               ("precision", "precision"), ("windows", "windows"), ("slices", "slices/window"), ("size", "size"),
               ("status", "status"), ("step_seconds", "step s"), ("windows_per_second", "windows/s"),
               ("peak_gib", "peak GiB"), ("matmul_gflops", "matmul GFLOP/s"), ("load_1min", "load 1-min"),
               ("load_1min_after", "load after")]
    write_tables(rows, columns, Path(args.output), header)
    print(f"wrote {args.output}.md and .csv")


if __name__ == "__main__":
    main()
