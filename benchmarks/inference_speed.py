"""Forward-pass time, peak memory and FLOPs of LambdaUNet, the reference maths and the
conv UNet, side by side, one fresh process per configuration.

Implementations ("impl"):
- reference: LambdaUNet whose Lambda+ layers materialise every per-pixel lambda the way
  the authors' code does (``benchmarks/reference_lambda_plus.py``);
- plain: the project's model as created, eval mode;
- optimised: ``optimise_for_inference`` (BatchNorms folded, channels-last);
- chunked: what the inference engine runs (``inference.engine.inference_model``:
  ``optimise_for_inference(..., slice_chunk=INFERENCE_SLICE_CHUNK)``, 4: the
  slice-independent stem/decoder and every Lambda+ layer run 4 slices at a time), output
  identical to one pass (built here without importing the engine's I/O libraries, so that
  its RSS compares with the other rows);
- slabs: optimised model run by the inference engine (``predict_probability``) in slabs
  planned for ``--slab-budget-gib``;
- compiled (not run unless named in ``--impls``): ``torch.compile`` of the optimised model
  (inductor; needs a C++ compiler on CPU); its first full-size call, which compiles, is
  timed apart as "compile s".

Heaps (``--heaps``, glibc's malloc, set first thing in each child):
- default: as the C library starts (the Slicer module and library users);
- keep: ``heap.keep_freed_memory``, what the ``lambdasegment`` console script sets
  (freed blocks reused, no fresh pages per large tensor);
- trim-only: the trim threshold alone raised, which switches glibc's adaptive mmap
  threshold off at 128 KiB (why ``keep_freed_memory`` sets it only after the mmap threshold).
Every heap after the first is run right after the first, in its own process, and its
logits are compared with the first's (same weights, same input).

Each run reports its seconds, peak memory, FLOPs (``torch.utils.flop_counter`` on a
``--flop-slices`` prefix of the study, scaled linearly: every layer is linear in the slice
count), the fp32 matmul GFLOP/s measured in the same process just before (2048^2,
same threads) and the run's fraction of that roofline, the 1-minute load average, and the
largest |difference| of its logits from the reference (same weights, same input). Bundled-configuration LambdaUNet runs use the bundled
package's trained weights when the tree has one and inputs uniform in [0, 1); every other
run random weights (seed 0) and standard-normal inputs.

    nice -n 10 .venv/bin/python benchmarks/inference_speed.py                 # CPU, 2 threads
    .venv/bin/python benchmarks/inference_speed.py --studies 24x256 --archs bundled --models lambda_unet \
        --impls chunked --heaps default keep trim-only --repeats 7 --output benchmarks/results/heap_reuse_cpu
    .venv/bin/python benchmarks/inference_speed.py --device cuda --precisions fp32 bf16 fp16
"""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    BUNDLED_MANIFEST,
    RESULTS,
    bundled_architecture,
    current_rss_gib,
    emit,
    invocation,
    machine_header,
    matmul_gflops,
    peak_memory_gib,
    run_child,
    synchronize,
    write_tables,
)

PAPER = {"name": "lambda_unet", "config": {}}
IMPLS = ("reference", "plain", "optimised", "chunked", "slabs")
HEAPS = ("default", "keep", "trim-only")
ALL_IMPLS = (*IMPLS, "compiled")
# Peak bytes per input pixel x first-level width seen on CPU (one pass): about 30 for the
# models, 16 chunked (paper LambdaUNet 24x256^2: 1.54 GiB, process included), about 45 for
# the reference (its materialised lambdas); used, with a margin, to skip runs that would
# not fit in --max-gib.
BYTES_PER_PIXEL_WIDTH = {"reference": 60, "plain": 30, "optimised": 30, "chunked": 16, "slabs": 0, "compiled": 30}


def build_model(model_name: str, arch: str, impl: str) -> torch.nn.Module:
    from LambdaSegmentLib.models import create_model

    architecture = PAPER if arch == "paper" else bundled_architecture()[0]
    config = dict(architecture["config"])
    if model_name == "unet":
        config = {"widths": config["widths"]} if "widths" in config else {}
    torch.manual_seed(0)
    model = create_model(model_name, **config).eval()
    if arch == "bundled" and model_name == architecture["name"] and BUNDLED_MANIFEST.exists():
        # The bundled package's trained weights (random LambdaUNet weights can overflow in
        # eval mode, whose BatchNorms do not renormalise).
        from LambdaSegmentLib.inference import load_model_package

        model.load_state_dict(load_model_package().model.state_dict())
    return as_implementation(model, impl)


def as_implementation(model: torch.nn.Module, impl: str) -> torch.nn.Module:
    """An eval-mode ``model`` as ``impl`` runs it (one of ``ALL_IMPLS``; "chunked" is the
    engine's ``inference_model`` copy, "plain" the model itself)."""
    from LambdaSegmentLib.models.fusion import optimise_for_inference

    if impl == "reference":
        from reference_lambda_plus import reference_model

        return reference_model(model)
    if impl in ("optimised", "slabs"):
        return optimise_for_inference(model)
    if impl == "compiled":
        return torch.compile(optimise_for_inference(model))
    if impl == "chunked":
        from LambdaSegmentLib.models.fusion import INFERENCE_SLICE_CHUNK

        return optimise_for_inference(model, slice_chunk=INFERENCE_SLICE_CHUNK)  # = engine.inference_model
    return model


def set_heap(heap: str) -> bool | None:
    """Configure glibc's malloc for this process as ``heap`` (one of ``HEAPS``) names;
    returns whether mallopt took it (None: "default", nothing called)."""
    from LambdaSegmentLib.heap import INT_MAX, M_TRIM_THRESHOLD, glibc_mallopt, keep_freed_memory

    if heap == "keep":
        return keep_freed_memory()
    if heap == "trim-only":
        mallopt = glibc_mallopt()
        return mallopt is not None and mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1
    return None


def child(config: dict[str, Any]) -> None:
    heap_set = set_heap(config["heap"])
    from torch.utils.flop_counter import FlopCounterMode

    torch.set_num_threads(config["threads"])
    device = torch.device(config["device"])
    gflops = matmul_gflops(device)
    model = build_model(config["model"], config["arch"], config["impl"]).to(device)
    generator = torch.Generator().manual_seed(1)
    shape = (1, 2, config["slices"], config["size"], config["size"])
    # Bundled: inputs in the preprocessed range [0, 1) (the trained network is quadratic-ish
    # in its input and overflows on far-out-of-range inputs); paper: standard normal.
    x = (torch.rand if config["arch"] == "bundled" else torch.randn)(shape, generator=generator).to(device)
    rss_before = current_rss_gib()
    precision = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[config["precision"]]

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        if config["impl"] == "slabs":
            from LambdaSegmentLib.inference.engine import plan_for_budget, predict_probability

            channels = inputs[0].cpu().numpy()
            slabs = plan_for_budget(model, channels.shape, model.slice_receptive_radius,
                                    int(config["slab_budget_gib"] * 2**30))
            forward.num_slabs = len(slabs)
            probability = predict_probability(model, channels, device=device, slabs=slabs)
            return torch.logit(torch.from_numpy(probability).double().clamp(1e-12, 1 - 1e-12)).float()[None, None]
        autocast = torch.autocast(device.type, dtype=precision) if precision else torch.autocast(device.type, enabled=False)
        with autocast:
            return model(inputs)

    forward.num_slabs = 1
    with torch.inference_mode():
        flop_slices = min(config["flop_slices"], config["slices"])
        with FlopCounterMode(display=False) as counter:
            getattr(model, "_orig_mod", model)(x[:, :, :flop_slices])  # also the warm-up (eager if compiled)
        flops = counter.get_total_flops() * config["slices"] / flop_slices
        compile_seconds = None
        if config["impl"] == "compiled":
            start = time.perf_counter()
            forward(x)  # compiles for this shape
            synchronize(device)
            compile_seconds = time.perf_counter() - start
        times = []
        for _ in range(config["repeats"]):
            synchronize(device)
            start = time.perf_counter()
            logits = forward(x)
            synchronize(device)
            times.append(time.perf_counter() - start)
    seconds = min(times)
    if config.get("save"):
        np.save(config["save"], logits.float().cpu().numpy())
    emit({
        **config,
        "status": "ok",
        "heap_set": heap_set,
        "seconds": seconds,
        "seconds_first": times[0],
        "seconds_median": float(np.median(times)),
        "seconds_all": times,
        "peak_gib": peak_memory_gib(device),
        "rss_before_forward_gib": rss_before,
        "gflop": flops / 1e9,
        "matmul_gflops": gflops,
        "roofline_seconds": flops / 1e9 / gflops,
        "roofline_fraction": flops / 1e9 / gflops / seconds,
        "parameters": sum(p.numel() for p in model.parameters()),
        "num_slabs": forward.num_slabs,
        "compile_seconds": compile_seconds,
    })


def estimated_peak_gib(model_name: str, arch: str, impl: str, slices: int, size: int) -> float:
    architecture = PAPER if arch == "paper" else bundled_architecture()[0]
    first_width = architecture["config"].get("widths", [64])[0]
    return BYTES_PER_PIXEL_WIDTH[impl] * first_width * slices * size * size / 2**30


def slab_recompute_factor(model_name: str, arch: str, slices: int, size: int, budget_gib: float) -> float:
    """Input slices processed by the engine's slab plan / study slices."""
    from LambdaSegmentLib.inference.engine import plan_for_budget

    model = build_model(model_name, arch, "plain")
    slabs = plan_for_budget(model, (2, slices, size, size), model.slice_receptive_radius, int(budget_gib * 2**30))
    return sum(slab.stop - slab.start for slab in slabs) / slices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--studies", nargs="+", default=["24x256", "32x256", "40x512"], help="SLICESxSIZE")
    parser.add_argument("--archs", nargs="+", default=["paper", "bundled"], choices=["paper", "bundled"])
    parser.add_argument("--impls", nargs="+", default=list(IMPLS), choices=ALL_IMPLS)
    parser.add_argument("--models", nargs="+", default=["lambda_unet", "unet"], choices=["lambda_unet", "unet"])
    parser.add_argument("--precisions", nargs="+", default=["fp32"], choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--heaps", nargs="+", default=["default"], choices=HEAPS,
                        help="glibc malloc configurations, each in its own process right after the first")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--flop-slices", type=int, default=2)
    parser.add_argument("--max-gib", type=float, default=12.0, help="skip runs whose estimated peak exceeds this")
    parser.add_argument("--slab-budget-gib", type=float, default=1.5)
    parser.add_argument("--skip", nargs="*", default=[],
                        help="glob patterns over STUDY:ARCH:MODEL:IMPL not to run, e.g. '40x512:paper:*:plain'")
    parser.add_argument("--max-slab-recompute", type=float, default=2.0,
                        help="skip slab runs whose plan processes more than this many times the slices")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per run, seconds")
    parser.add_argument("--output", default=str(RESULTS / "inference_speed_cpu"), help="file stem for .md/.csv")
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return

    script = Path(__file__).resolve()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for study in args.studies:
            slices, size = (int(part) for part in study.split("x"))
            for arch in args.archs:
                for model_name in args.models:
                    for impl in args.impls:
                        if model_name == "unet" and impl in ("reference",):
                            continue
                        for precision, heap in itertools.product(args.precisions, args.heaps):
                            config = dict(model=model_name, arch=arch, impl=impl, slices=slices, size=size,
                                          device=args.device, precision=precision, heap=heap, threads=args.threads,
                                          repeats=args.repeats, flop_slices=args.flop_slices,
                                          slab_budget_gib=args.slab_budget_gib,
                                          save=str(Path(scratch) / f"{study}-{arch}-{model_name}-{impl}-{precision}-{heap}.npy"))
                            estimate = estimated_peak_gib(model_name, arch, impl, slices, size)
                            recompute = slab_recompute_factor(model_name, arch, slices, size, args.slab_budget_gib)
                            label = f"{study}:{arch}:{model_name}:{impl}"
                            if any(fnmatch.fnmatch(label, pattern) for pattern in args.skip):
                                row = {**config, "status": "not run (--skip)"}
                            elif args.device == "cpu" and estimate > args.max_gib:
                                row = {**config, "status": f"skipped: estimated peak {estimate:.0f} GiB > --max-gib {args.max_gib:g}"}
                            elif impl == "slabs" and recompute > args.max_slab_recompute:
                                row = {**config, "status": f"skipped: the slab plan for {args.slab_budget_gib:g} GiB "
                                       f"runs {recompute:.1f}x the slices (receptive radius halos)"}
                            else:
                                row = run_child(script, config, args.timeout, args.threads)
                            row["study"] = f"{slices}x{size}x{size}"
                            rows.append(row)
                            print(json.dumps({k: v for k, v in row.items() if k not in ("save", "seconds_all")}), flush=True)
                            compare_to_reference(rows, study, arch, model_name)
                            compare_to_first_heap(rows, row, args.heaps[0])
                            write_results(rows, args)  # after every run, so a cut-short run keeps its rows


def compare_to_reference(rows: list[dict[str, Any]], study: str, arch: str, model_name: str) -> None:
    """Max |logit difference| of each run from the reference run (lambda_unet) or the
    plain run (unet) of the same study, architecture and precision."""
    anchor_impl = "reference" if model_name == "lambda_unet" else "plain"
    group = [r for r in rows if r.get("arch") == arch and r.get("model") == model_name and r["save"].split("/")[-1].startswith(study + "-")]
    for row in group:
        anchor = next((r for r in group if r["impl"] == anchor_impl and r["precision"] == row["precision"]
                       and r.get("heap") == row.get("heap")), None)
        if row.get("status") != "ok" or anchor is None or anchor.get("status") != "ok" or row is anchor:
            continue
        mine, theirs = np.load(row["save"]), np.load(anchor["save"])
        if row["impl"] == "slabs":  # probabilities come back; compare those
            mine, theirs = 1 / (1 + np.exp(-mine.astype(np.float64))), 1 / (1 + np.exp(-theirs.astype(np.float64)))
            row["compared_as"] = "probability"
        row[f"max_abs_diff_vs_{anchor_impl}"] = float(np.abs(mine.astype(np.float64) - theirs).max())


def compare_to_first_heap(rows: list[dict[str, Any]], row: dict[str, Any], first_heap: str) -> None:
    """Max |logit difference| of ``row`` from the same run under the first heap (0 when the
    allocator changes nothing but the time)."""
    if row.get("heap") == first_heap or row.get("status") != "ok":
        return
    same = ("study", "arch", "model", "impl", "precision")
    anchor = next((r for r in rows if r.get("heap") == first_heap and all(r.get(k) == row.get(k) for k in same)), None)
    if anchor is not None and anchor.get("status") == "ok":
        row["diff_vs_first_heap"] = float(np.abs(np.load(row["save"]).astype(np.float64) - np.load(anchor["save"])).max())


def write_results(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    command = invocation()
    architecture, source = bundled_architecture()
    header = machine_header(
        "Inference speed: LambdaUNet (project), reference maths, conv UNet", command,
        {"threads": args.threads, "device": args.device,
         "bundled architecture": f"{json.dumps(architecture)} from {source}",
         "FLOPs": f"FlopCounterMode on the first {args.flop_slices} slices, scaled linearly in slices",
         "seconds": "the fastest of --repeats full-size calls; first s the first of them (after the 2-slice FLOP count, "
                    "which is the warm-up), median s their median",
         "note": "load_1min is the machine's 1-minute load average around each run (2 cores: above 2 the run shared the CPU)"},
    )
    for row in rows:
        row["diff_vs_anchor"] = row.get("max_abs_diff_vs_reference", row.get("max_abs_diff_vs_plain"))
        row["load_1min"] = row.get("load_1min_before")
    columns = [
        ("study", "study"), ("arch", "config"), ("model", "model"), ("impl", "implementation"),
        ("precision", "precision"), ("heap", "heap"), ("heap_set", "heap set"), ("status", "status"),
        ("seconds", "seconds"), ("seconds_first", "first s"), ("seconds_median", "median s"), ("peak_gib", "peak GiB"),
        ("gflop", "GFLOP"), ("matmul_gflops", "matmul GFLOP/s"), ("roofline_seconds", "roofline s"),
        ("roofline_fraction", "fraction of roofline"), ("num_slabs", "passes"), ("compile_seconds", "compile s"),
        ("diff_vs_anchor", "max abs diff vs reference (lambda_unet) / plain (unet)"),
        ("diff_vs_first_heap", "max abs diff vs first heap"), ("load_1min", "load 1-min"),
        ("load_1min_after", "load after"),
    ]
    write_tables(rows, columns, Path(args.output), header)
    print(f"wrote {args.output}.md and .csv")


if __name__ == "__main__":
    main()
