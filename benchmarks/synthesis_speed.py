"""Studies per second of the synthetic generator on this CPU, as a DataLoader worker runs it.

    nice -n 10 .venv/bin/python benchmarks/synthesis_speed.py --n 6

One process, one torch thread (what a DataLoader worker gets). Reports wall-clock and
process CPU time per study (on a shared, loaded machine the CPU time is the honest
cost of a study on one free core), the one-off
template/atlas load and LESYMAP registration, then seconds per study for the training setting (2 mm in-plane)
and the full default ranges (0.9-2 mm in-plane). The 1-minute load average is recorded
too: on a shared machine it says how much of the CPU the run really had.
Writes benchmarks/results/synthesis_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.synthesis import generate  # noqa: E402
from LambdaSegmentLib.synthesis.generator import _template_channels  # noqa: E402
from LambdaSegmentLib.synthesis.lesymap import _ch2_to_template, lesymap_path  # noqa: E402

SETTINGS = {
    "training (in-plane 2 mm, slices 2-7 mm)": {"in_plane_spacing_mm": 2.0},
    "default ranges (in-plane 0.9-2 mm, slices 2-7 mm)": {},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=6, help="studies per setting")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "synthesis_speed.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in a DataLoader worker
    start = time.perf_counter()
    _template_channels()
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    _ch2_to_template(lesymap_path())  # the LESYMAP ch2 -> MNI registration, once per process like the atlas
    results = {
        "command": f"nice -n 10 .venv/bin/python benchmarks/synthesis_speed.py --n {args.n}",
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": 1,
        "load_average_before": os.getloadavg()[0],
        "template_and_atlas_load_s": round(load_s, 2),
        "lesymap_registration_s": round(time.perf_counter() - start, 2),
        "settings": {},
    }
    for name, ranges in SETTINGS.items():
        seconds, cpu_seconds, voxels = [], [], []
        for seed in range(args.n):
            start, cpu_start = time.perf_counter(), time.process_time()
            study = generate(1000 + seed, **ranges)
            seconds.append(time.perf_counter() - start)
            cpu_seconds.append(time.process_time() - cpu_start)
            voxels.append(int(study.dwi.array.size))
        mean = sum(seconds) / len(seconds)
        results["settings"][name] = {
            "studies": args.n,
            "mean_s_per_study": round(mean, 2),
            "min_s": round(min(seconds), 2),
            "max_s": round(max(seconds), 2),
            "studies_per_s": round(1.0 / mean, 3),
            # CPU time of this process: what the study costs on an otherwise idle core
            "mean_cpu_s_per_study": round(sum(cpu_seconds) / len(cpu_seconds), 2),
            "studies_per_cpu_s": round(len(cpu_seconds) / sum(cpu_seconds), 3),
            "mean_voxels": int(sum(voxels) / len(voxels)),
        }
        print(name, results["settings"][name], flush=True)
    results["load_average_after"] = os.getloadavg()[0]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
