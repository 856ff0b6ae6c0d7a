"""Where a forward pass spends its time: torch.profiler's table of operators.

    nice -n 10 .venv/bin/python benchmarks/profile_forward.py --arch bundled --slices 12
    nice -n 10 .venv/bin/python benchmarks/profile_forward.py --arch paper --slices 6 --impl plain
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from inference_speed import build_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", default="bundled", choices=["paper", "bundled"])
    parser.add_argument("--model", default="lambda_unet", choices=["lambda_unet", "unet"])
    parser.add_argument("--impl", default="optimised", choices=["reference", "plain", "optimised", "chunked"])
    parser.add_argument("--slices", type=int, default=12)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = build_model(args.model, args.arch, args.impl)
    x = torch.rand(1, 2, args.slices, args.size, args.size)
    with torch.inference_mode():
        model(x)  # warm-up
        with profile() as profiler:
            start = time.perf_counter()
            model(x)
            seconds = time.perf_counter() - start
    print(f"{args.arch} {args.model} {args.impl} {args.slices}x{args.size}x{args.size}: {seconds:.2f} s (profiled)")
    print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
