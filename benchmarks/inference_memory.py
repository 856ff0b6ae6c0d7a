"""Peak memory of inference: the per-slice factor behind ``inference/memory.py`` and a
big study (40 slices of 512 x 512) run in one pass and under a memory budget.

Run:  .venv/bin/python benchmarks/inference_memory.py [--quick]
Writes benchmarks/results/inference_memory.json. Peak memory is the peak resident set
size (ru_maxrss) of a fresh ``lambdasegment segment`` process (mask output only) started
from this small process; the forward-pass factor is a process's RSS growth during one pass.
Untrained weights (memory and time do not depend on the weights' values).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "inference_memory.json"

FORWARD = r"""
import resource, sys, torch
from LambdaSegmentLib.models import create_model
name, t, hw = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
model = create_model(name).eval()
with torch.inference_mode():
    model(torch.randn(1, 2, 1, 16, 16))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.inference_mode():
    model(torch.randn(1, 2, t, hw, hw))
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def forward_factor(name: str, slices: int, side: int) -> dict:
    """Peak RSS growth of one forward pass over bytes of one fp32 64-channel map per slice."""
    grown = int(subprocess.run([sys.executable, "-c", FORWARD, name, str(slices), str(side)],
                               capture_output=True, text=True, encoding="utf-8", errors="replace", check=True).stdout.split()[-1])
    return {"model": name, "slices": slices, "side": side, "peak_growth_mb": round(grown / 2**20, 1),
            "factor": round(grown / (slices * 64 * side * side * 4), 2)}


def run_cli(arguments: list[str]) -> dict:
    """Run ``lambdasegment`` in a child process; its own peak RSS (MB, from wait4), wall seconds and output."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen([sys.executable, "-m", "LambdaSegmentLib", *arguments], stdout=out, stderr=err, text=True, encoding="utf-8", errors="replace")
        _pid, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().strip(), err.read().strip()
    if child.returncode:
        raise RuntimeError(stderr)
    return {"peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "seconds": round(seconds, 1), "stdout": stdout, "stderr": stderr}


MAKE_STUDY = r"""
import sys
from pathlib import Path
from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import write_volume
folder, slices, side = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
phantom = make_phantom(size_ijk=(side, side, slices), spacing_mm=(230 / side, 230 / side, 5.0))
write_volume(phantom.dwi, folder / "dwi.nii.gz")
write_volume(phantom.adc, folder / "adc.nii.gz")
save_untrained_package(folder / "paper-model", config={})  # the paper's LambdaUNet, untrained
"""


def big_study(folder: Path, slices: int, side: int) -> dict:
    # Linux counts a child's peak RSS from at least the parent's RSS at fork time, so the
    # study is made in a child too and this process stays small until the runs are done.
    subprocess.run([sys.executable, "-c", MAKE_STUDY, str(folder), str(slices), str(side)], check=True)
    model = folder / "paper-model"
    common = ["segment", "--dwi", str(folder / "dwi.nii.gz"), "--adc", str(folder / "adc.nii.gz"),
              "--model", str(model), "--device", "cpu"]
    budget = ["--memory-budget-gb", "1.5"]
    # Peak memory: mask only (writing the float probability map has an I/O peak of its own).
    runs = {
        "one_pass": run_cli(common + ["--output", str(folder / "a.nii.gz")]),
        "budget_1_5_gb": run_cli(common + ["--output", str(folder / "b.nii.gz")] + budget),
    }
    # Equality: the same two runs writing their probability maps.
    run_cli(common + ["--output", str(folder / "c.nii.gz"), "--probability", str(folder / "c_p.nii.gz")])
    run_cli(common + ["--output", str(folder / "d.nii.gz"), "--probability", str(folder / "d_p.nii.gz")] + budget)
    import numpy as np
    import SimpleITK as sitk

    c = sitk.GetArrayFromImage(sitk.ReadImage(str(folder / "c_p.nii.gz")))
    d = sitk.GetArrayFromImage(sitk.ReadImage(str(folder / "d_p.nii.gz")))
    return {"study": f"{slices} slices of {side}x{side} (0.45 mm in-plane -> model grid 2 mm)", **runs,
            "max_abs_probability_difference": float(np.abs(c - d).max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="only the per-slice factors")
    args = parser.parse_args()
    results = {"forward_factors": [forward_factor(*c) for c in
                                   [("lambda_unet", 4, 128), ("lambda_unet", 8, 128), ("lambda_unet", 4, 256), ("unet", 8, 128)]]}
    for row in results["forward_factors"]:
        print(row, flush=True)
    if not args.quick:
        with tempfile.TemporaryDirectory() as folder:
            results["big_study"] = big_study(Path(folder), 40, 512)
        print(json.dumps(results["big_study"], indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
