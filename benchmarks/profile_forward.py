"""Where a forward pass spends its time: torch.profiler's table of operators.

    nice -n 10 .venv/bin/python benchmarks/profile_forward.py --arch bundled --slices 12
    nice -n 10 .venv/bin/python benchmarks/profile_forward.py --arch paper --slices 6 --impl plain
    nice -n 10 .venv/bin/python benchmarks/profile_forward.py --package LambdaSegmentLib/resources/models/lambdaunet-dwi-pair/partner \
        --package LambdaSegmentLib/resources/models/lambdaunet-dwi --impl chunked --slices 24 --repeats 3

``--package DIR`` (repeatable) profiles a model package's trained network instead (its
architecture and weights; ``--impl`` as for ``--arch``: ``chunked`` is the engine's copy), each
after a warm-up, with ``--repeats`` untimed-by-the-profiler passes timed first.
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

from inference_speed import as_implementation, build_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", default="bundled", choices=["paper", "bundled"])
    parser.add_argument("--model", default="lambda_unet", choices=["lambda_unet", "unet"])
    parser.add_argument("--impl", default="optimised", choices=["reference", "plain", "optimised", "chunked"])
    parser.add_argument("--slices", type=int, default=12)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=15)
    parser.add_argument("--package", action="append", default=[], metavar="DIR",
                        help="profile this package's network (repeatable) instead of --arch/--model")
    parser.add_argument("--repeats", type=int, default=0, help="timed passes before the profiled one")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    models = [(f"{args.arch} {args.model} {args.impl}", build_model(args.model, args.arch, args.impl))] if not args.package else [
        (f"{directory} {args.impl}", package_model(directory, args.impl)) for directory in args.package]
    for name, model in models:
        x = torch.rand(1, model_in_channels(model), args.slices, args.size, args.size)
        with torch.inference_mode():
            model(x)  # warm-up
            timed = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                model(x)
                timed.append(time.perf_counter() - start)
            with profile() as profiler:
                start = time.perf_counter()
                model(x)
                seconds = time.perf_counter() - start
        passes = f"; {args.repeats} passes {', '.join(f'{t:.2f}' for t in timed)} s" if timed else ""
        print(f"{name} {args.slices}x{args.size}x{args.size}: {seconds:.2f} s (profiled){passes}")
        print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


def package_model(directory: str, impl: str) -> torch.nn.Module:
    """A package's network as ``impl`` runs it (``inference_speed.as_implementation``)."""
    from LambdaSegmentLib.inference import load_model_package

    return as_implementation(load_model_package(directory, seed_network=False).model.eval(), impl)


def model_in_channels(model: torch.nn.Module) -> int:
    """Input channels of a model (its first convolution's)."""
    first = next(module for module in model.modules() if isinstance(module, torch.nn.Conv2d))
    return first.in_channels


if __name__ == "__main__":
    main()
