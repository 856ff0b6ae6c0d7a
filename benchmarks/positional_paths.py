"""Both positional contractions of every Lambda+ layer, timed on the layer's real input:
is ``LambdaPlus.positional_path = "auto"`` (the fewer multiply-adds) the faster one?

Each Lambda+ layer of the inference model (``inference_model``: folded, 4-slice chunks) is
run on the input it receives in a forward pass over a 24 x 256 x 256 study, once with
"reassociated" (q^T E first, then one batched matmul over the gathered neighbourhoods) and
once with "materialised" (per-pixel |k| x |v| lambdas, then q^T lambda); median of
``--repeats`` runs each, no autograd.

    nice -n 10 .venv/bin/python benchmarks/positional_paths.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, invocation, machine_header, write_tables  # noqa: E402
from inference_speed import build_model  # noqa: E402

from LambdaSegmentLib.models import LambdaPlus  # noqa: E402


def layer_inputs(model: torch.nn.Module, x: torch.Tensor) -> list[tuple[str, LambdaPlus, torch.Tensor, int]]:
    """(name, layer, its input, slice count) of every Lambda+ layer, from one forward pass."""
    captured: list[tuple[str, LambdaPlus, torch.Tensor, int]] = []
    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, LambdaPlus):
            def keep(layer: LambdaPlus, args: tuple[Any, ...], name: str = name) -> None:
                captured.append((name, layer, args[0].clone(memory_format=torch.channels_last), int(args[1])))
            hooks.append(module.register_forward_pre_hook(keep))
    with torch.inference_mode():
        model(x)
    for hook in hooks:
        hook.remove()
    return captured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", nargs="+", default=["bundled", "paper"], choices=["bundled", "paper"])
    parser.add_argument("--slices", type=int, default=24)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=str(RESULTS / "positional_paths_cpu"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows: list[dict[str, Any]] = []
    for arch in args.archs:
        model = build_model("lambda_unet", arch, "chunked")
        generator = torch.Generator().manual_seed(1)
        shape = (1, 2, args.slices, args.size, args.size)
        x = (torch.rand if arch == "bundled" else torch.randn)(shape, generator=generator)
        for name, layer, inputs, num_slices in layer_inputs(model, x):
            auto = layer.chosen_positional_path()
            seconds = {}
            with torch.inference_mode():
                for path in ("reassociated", "materialised"):
                    layer.positional_path = path
                    layer(inputs, num_slices)  # warm-up
                    times = []
                    for _ in range(args.repeats):
                        start = time.perf_counter()
                        layer(inputs, num_slices)
                        times.append(time.perf_counter() - start)
                    seconds[path] = statistics.median(times)
            layer.positional_path = "auto"
            faster = min(seconds, key=seconds.get)
            row = {"arch": arch, "layer": name, "input": "x".join(map(str, inputs.shape)), "heads": layer.heads,
                   "auto": auto, "reassociated_s": seconds["reassociated"], "materialised_s": seconds["materialised"],
                   "faster": faster, "auto_over_best": seconds[auto] / seconds[faster]}
            rows.append(row)
            print(row, flush=True)
    header = machine_header("Lambda+ positional contractions per layer: reassociated vs materialised", invocation(),
                            {"threads": args.threads, "study": f"{args.slices}x{args.size}x{args.size}",
                             "note": f"median of {args.repeats} runs per path, no autograd, 4-slice chunks"})
    columns = [("arch", "config"), ("layer", "layer"), ("input", "input (B c H W)"), ("heads", "heads"),
               ("auto", "auto picks"), ("reassociated_s", "reassociated s"), ("materialised_s", "materialised s"),
               ("faster", "faster"), ("auto_over_best", "auto / best")]
    write_tables(rows, columns, Path(args.output), header)
    print(f"wrote {args.output}.md and .csv")


if __name__ == "__main__":
    main()
