"""End-to-end time of ``lambdasegment segment`` on a 24 x 256 x 256 study: what a user
waits for (read, preprocess, infer, write mask + report), in a fresh process.

The study is the inference phantom (``LambdaSegmentLib.inference.phantom``) on a
256 x 256 x 24 grid at 2 x 2 x 6 mm, so the network sees 24 slices of 256 x 256 at the
default 2 mm in-plane spacing. The model is the bundled package when the tree has one;
otherwise an UNTRAINED package with the bundled architecture (same cost, meaningless
mask), and the table says which.

    nice -n 10 .venv/bin/python benchmarks/end_to_end.py --repeats 2
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import BUNDLED_MANIFEST, RESULTS, bundled_architecture, machine_header, write_tables  # noqa: E402


def write_study(directory: Path, slices: int, size: int) -> tuple[Path, Path]:
    from LambdaSegmentLib.inference.phantom import make_phantom
    from LambdaSegmentLib.io import write_volume

    phantom = make_phantom(size_ijk=(size, size, slices), spacing_mm=(2.0, 2.0, 6.0))
    dwi = write_volume(phantom.dwi, directory / "dwi.nii.gz")
    adc = write_volume(phantom.adc, directory / "adc.nii.gz")
    return dwi, adc


def model_directory(scratch: Path) -> tuple[Path | None, str]:
    if BUNDLED_MANIFEST.exists():
        return None, "bundled package"
    from LambdaSegmentLib.inference.untrained import save_untrained_package

    architecture, _ = bundled_architecture()
    directory = save_untrained_package(scratch / "model", architecture=architecture["name"],
                                       config=architecture["config"])
    return directory, f"UNTRAINED package with the bundled architecture {json.dumps(architecture)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slices", type=int, default=24)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--output", default=str(RESULTS / "end_to_end_cpu"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        dwi, adc = write_study(scratch, args.slices, args.size)
        model_dir, model_label = model_directory(scratch)
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
        for repeat in range(args.repeats):
            out = scratch / f"run{repeat}"
            command = [str(Path(sys.executable).parent / "lambdasegment"), "segment", "--dwi", str(dwi), "--adc", str(adc),
                       "--output", str(out / "mask.nii.gz"), "--report", str(out / "report.json"), "--device", args.device]
            if model_dir is not None:
                command += ["--model", str(model_dir)]
            load = os.getloadavg()[0]
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", errors="replace", env=env)
            seconds = time.perf_counter() - start
            row = {"repeat": repeat, "study": f"{args.slices}x{args.size}x{args.size}", "model": model_label,
                   "exit_code": done.returncode, "seconds": seconds,
                   "peak_rss_gib_largest_child": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20,
                   "load_1min": load, "outputs": sorted(p.name for p in out.glob("*")) if out.exists() else [],
                   "stderr_tail": done.stderr.strip().splitlines()[-1:] if done.returncode else ""}
            rows.append(row)
            print(json.dumps(row), flush=True)
    header = machine_header("End to end: lambdasegment segment (read, preprocess, infer, write, report)",
                            " ".join(["nice -n 10", ".venv/bin/python", *sys.argv]),
                            {"threads": args.threads, "device": args.device, "model": model_label,
                             "note": "seconds = wall time of a fresh CLI process (Python and torch imports included)"})
    columns = [("repeat", "repeat"), ("study", "study"), ("exit_code", "exit"), ("seconds", "seconds"),
               ("peak_rss_gib_largest_child", "peak RSS GiB"), ("load_1min", "load 1-min"), ("outputs", "outputs")]
    write_tables(rows, columns, Path(args.output), header)
    print(f"wrote {args.output}.md and .csv")


if __name__ == "__main__":
    main()
