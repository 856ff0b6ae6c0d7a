"""End-to-end time of ``lambdasegment segment`` on a 24 x 256 x 256 study: what a user
waits for (read, preprocess, infer, write mask + report), in a fresh process.

The study is a synthetic skull-on head (``write_study``) on a 256 x 256 x 24 grid at
2 x 2 x 6 mm, so the network sees 24 slices of 256 x 256 at the default 2 mm in-plane
spacing. The model is ``--model DIR`` when given, else the bundled
package when the tree has one, else an UNTRAINED stand-in with the bundled recipe's
architecture and preprocessing (``STAND_IN``: same cost, meaningless mask); the table
says which.

Each run is the real console script in a fresh process (Python start-up and every import
included). The table gives its wall time, its CPU time (user + system: with one thread on
a busy machine the honest measure of the work), the segmentation time the CLI reports
(``report.json`` ``seconds``: preprocessing, inference, back to the DWI grid), peak RSS
and a SHA-256 of the mask's voxels and geometry (identical masks, identical digests).

``--compare-model DIR`` runs another package (e.g. the same one with a seed network) right
after ``--model``'s run in every repeat, so the two are timed side by side under the same load.

``--stages`` adds one more fresh process that runs the same ``lambdasegment segment``
in-process with a timer around each stage (imports, reading, brain mask, preprocessing,
model copy, forward, the contralateral registration, writing, report, figure): where the
seconds go. Its timed imports come first, so
there the report-page helper (``reports.pages``) starts only after torch is imported; in a
real run it imports matplotlib while torch is imported: the runs' wall time is the answer.

    nice -n 10 .venv/bin/python benchmarks/end_to_end.py --repeats 2 --stages
    OMP_NUM_THREADS=1 nice -n 19 .venv/bin/python benchmarks/end_to_end.py --threads 1 --model /tmp/pkg \\
        --output /tmp/end_to_end_1thread
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The repository last: an installed package or PYTHONPATH (e.g. another checkout to compare) comes first.
sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# ``harness`` imports torch: imported where needed, never in the --stages child before its timers start.
RESULTS = Path(__file__).resolve().parent / "results"

# The bundled recipe's model and preprocessing (scripts/train_cv.sh), used untrained when no
# bundled package is installed.
STAND_IN = {
    "architecture": {"name": "lambda_unet", "config": {"widths": [16, 32, 64, 128, 256], "value_dim": 8}},
    "preprocessing": {"channels": ["eadc", "dwi"], "in_plane_spacing_mm": 2.0,
                      "normalization": {"dwi": "brain_median_clip4", "eadc": "clip01"}, "pad_multiple": 16},
}


def end_to_end_study(slices: int, size: int, in_plane_mm: float = 2.0) -> Any:
    """The ``SyntheticStudy`` (seed 7, a 15-40 mL territorial infarct, skull on) of ``slices``
    axial 6 mm slices of ``size`` × ``size`` voxels at ``in_plane_mm``. (Until 2026-11-23 this
    was the inference phantom, a uniform ellipsoid in noise: far from any real head, and the
    2.0.0 weights overflow on it; the timing of a network does not depend on the values.)"""
    from LambdaSegmentLib.synthesis import generate

    study = generate(7, in_plane_spacing_mm=in_plane_mm, fov_mm=size * in_plane_mm, slice_thickness_mm=6.0, slice_gap_mm=0.0,
                     coverage_mm=slices * 6.0, oblique_probability=0.0, skull_stripped=False,
                     lesion_kind="territorial", lesion_volume_ml=(15.0, 40.0))
    if study.dwi.array.shape != (slices, size, size):
        raise SystemExit(f"end_to_end: the generator made {study.dwi.array.shape}, not {(slices, size, size)}")
    return study


def write_study(directory: Path, slices: int, size: int, in_plane_mm: float = 2.0) -> tuple[Path, Path]:
    """:func:`end_to_end_study`'s DWI and ADC written to ``directory`` (dwi.nii.gz, adc.nii.gz)."""
    from LambdaSegmentLib.io import write_volume

    study = end_to_end_study(slices, size, in_plane_mm)
    dwi = write_volume(study.dwi, directory / "dwi.nii.gz")
    adc = write_volume(study.adc, directory / "adc.nii.gz")
    return dwi, adc


def save_stand_in(directory: Path) -> Path:
    """An UNTRAINED package (seeded) with the bundled recipe's architecture and preprocessing."""
    import torch

    from LambdaSegmentLib.inference import save_model_package
    from LambdaSegmentLib.inference.untrained import UNTRAINED_LABEL
    from LambdaSegmentLib.models import create_model

    torch.manual_seed(0)
    model = create_model(STAND_IN["architecture"]["name"], **STAND_IN["architecture"]["config"]).eval()
    manifest = {"name": "untrained-bundled-recipe", "version": "0.0.0+seed0", **STAND_IN, "threshold": 0.5,
                "training_data": UNTRAINED_LABEL, "created": "1970-01-01T00:00:00+00:00"}
    return save_model_package(model, manifest, directory)


def model_choice(given: str | None, scratch: Path) -> tuple[Path | None, str]:
    """(directory to pass as --model, None = the bundled package; its label for the table)."""
    if given is not None:
        manifest = json.loads((Path(given) / "manifest.json").read_text(encoding="utf-8"))
        untrained = " UNTRAINED" if "UNTRAINED" in str(manifest.get("training_data", "")).upper() else ""
        return Path(given), (f"--model {given}:{untrained} {manifest['name']} {manifest['version']} (weights SHA-256 "
                             f"{manifest['weights_sha256'][:12]}), {json.dumps(manifest['architecture'])}, "
                             f"preprocessing {json.dumps(manifest['preprocessing'])}"
                             + "".join(f", {role} network {manifest[f'{role}_network']['directory']}/ (weights SHA-256 "
                                       f"{manifest[f'{role}_network']['weights_sha256'][:12]})"
                                       for role in ("partner", "seed") if f"{role}_network" in manifest))
    from harness import BUNDLED_MANIFEST

    if BUNDLED_MANIFEST.exists():
        manifest = json.loads(BUNDLED_MANIFEST.read_text(encoding="utf-8"))
        return None, f"bundled package {manifest['name']} {manifest['version']}, {json.dumps(manifest['architecture'])}"
    directory = save_stand_in(scratch / "model")
    return directory, f"UNTRAINED stand-in (no bundled package installed) {json.dumps(STAND_IN)}"


def mask_digest(path: Path) -> str:
    """SHA-256 (first 16 hex) of a mask's voxels, size, spacing, origin and direction."""
    import SimpleITK as sitk

    image = sitk.ReadImage(str(path))
    digest = hashlib.sha256(sitk.GetArrayViewFromImage(image).tobytes())
    digest.update(repr((image.GetSize(), image.GetSpacing(), image.GetOrigin(), image.GetDirection())).encode())
    return digest.hexdigest()[:16]


def segment_command(dwi: Path, adc: Path, out: Path, model_dir: Path | None, device: str) -> list[str]:
    command = ["segment", "--dwi", str(dwi), "--adc", str(adc), "--output", str(out / "mask.nii.gz"),
               "--report", str(out / "report.json"), "--device", device]
    return command + (["--model", str(model_dir)] if model_dir is not None else [])


def timed_run(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a command; wall seconds, its own CPU seconds and peak RSS (os.wait4), exit code, stderr tail."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        stderr.seek(0)
        tail = stderr.read().decode("utf-8", errors="replace").strip().splitlines()[-1:]
    code = os.waitstatus_to_exitcode(status)
    return {"exit_code": code, "seconds": seconds, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_gib": usage.ru_maxrss / 2**20, "stderr_tail": tail if code else ""}


# --stages: the CLI run in-process, a timer around each stage (the real functions, wrapped).
STAGES = [  # (label, module, attribute)
    ("read + units (load_study)", "LambdaSegmentLib.io", "load_study"),
    ("load model package", "LambdaSegmentLib.inference", "load_model_package"),
    ("brain mask (brain_mask)", "LambdaSegmentLib.preprocessing.brain_mask", "brain_mask"),
    ("preprocess (prepare_input)", "LambdaSegmentLib.preprocessing", "prepare_input"),
    ("inference copy (optimise_for_inference)", "LambdaSegmentLib.inference.engine", "inference_model"),
    ("forward (predict_probability)", "LambdaSegmentLib.inference.engine", "predict_probability"),
    # the rest of postprocess() (components, edge depth, checks) stays under "everything else"
    ("contralateral registration (contralateral_dwi)", "LambdaSegmentLib.preprocessing.symmetry", "contralateral_dwi"),
    ("write mask", "LambdaSegmentLib.io", "write_mask"),
    ("report numbers (build_report)", "LambdaSegmentLib.reports", "build_report"),
    ("report JSON + CSV", "LambdaSegmentLib.reports", "write_report_json"),
    ("report JSON + CSV", "LambdaSegmentLib.reports", "write_report_csv"),
    # A page the CLI draws itself because the page helper failed counts in this row, or under
    # "everything else" when the helper had failed before the page was handed over.
    ("report page (waiting for the page helper: render + PNG; it imported matplotlib meanwhile)",
     "LambdaSegmentLib.reports.pages:PendingPage", "wait"),
]


def stages_child(argv: list[str]) -> None:
    """Child side of --stages: time imports, then each stage of ``lambdasegment segment``."""
    import importlib

    clock = {"wall": time.perf_counter, "cpu": time.process_time}
    totals: dict[str, dict[str, float]] = {}

    def add(label: str, wall: float, cpu: float) -> None:
        entry = totals.setdefault(label, {"wall": 0.0, "cpu": 0.0})
        entry["wall"] += wall
        entry["cpu"] += cpu

    def timed(label: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = clock["wall"](), clock["cpu"]()
            try:
                return function(*args, **kwargs)
            finally:
                add(label, clock["wall"]() - wall, clock["cpu"]() - cpu)
        return wrapper

    start_wall, start_cpu = time.perf_counter(), time.process_time()
    for label, module in [("import torch", "torch"), ("import SimpleITK", "SimpleITK"),
                          ("import LambdaSegmentLib (cli, inference, io, reports)", "LambdaSegmentLib.inference")]:
        wall, cpu = time.perf_counter(), time.process_time()
        importlib.import_module(module)
        add(label, time.perf_counter() - wall, time.process_time() - cpu)
    for name in ("LambdaSegmentLib.cli", "LambdaSegmentLib.cli.segment", "LambdaSegmentLib.inference.case",
                 "LambdaSegmentLib.io", "LambdaSegmentLib.reports", "LambdaSegmentLib.preprocessing"):
        wall, cpu = time.perf_counter(), time.process_time()
        importlib.import_module(name)
        add("import LambdaSegmentLib (cli, inference, io, reports)", time.perf_counter() - wall, time.process_time() - cpu)
    for label, module, attribute in STAGES:
        module, _, class_name = module.partition(":")
        owner = importlib.import_module(module)
        owner = getattr(owner, class_name) if class_name else owner
        setattr(owner, attribute, timed(label, getattr(owner, attribute)))
    from LambdaSegmentLib.cli import main

    sys.argv = ["lambdasegment", *argv]
    code = main()  # as the console script calls it (argv None: the process is the command)
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    add("everything else (argument parsing, hashing inputs, threshold, to DWI grid, lesion checks, ...)",
        wall - sum(v["wall"] for v in totals.values()), cpu - sum(v["cpu"] for v in totals.values()))
    print("RESULT " + json.dumps({"exit_code": code, "stages": totals, "wall": wall, "cpu": cpu}), flush=True)


def run_stages(command: list[str], env: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--stages-child", json.dumps(command)],
                          capture_output=True, text=True, encoding="utf-8", errors="replace", env=env)
    process_wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"--stages run failed: {(done.stderr or done.stdout).strip()[-500:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    rows = [{"stage": label, "seconds": v["wall"], "cpu_seconds": v["cpu"], "share": v["wall"] / process_wall}
            for label, v in result["stages"].items()]
    rows.append({"stage": "Python start-up and exit (process wall minus the above)",
                 "seconds": process_wall - result["wall"], "share": (process_wall - result["wall"]) / process_wall})
    rows.append({"stage": "total (fresh process, wall)", "seconds": process_wall, "cpu_seconds": result["cpu"], "share": 1.0})
    return rows, result


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The study shape (``write_study``), threads, device and model of a benchmark that runs
    the ``lambdasegment`` console script (this one, ``tta_cost.py``, ``batch_throughput.py``)."""
    parser.add_argument("--slices", type=int, default=24)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--in-plane-mm", type=float, default=2.0,
                        help="in-plane spacing of the study (2.0: the network sees the full 256x256; "
                        "0.9, a clinical DWI: it is resampled to the model's 2 mm grid, ~115x115)")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS/MKL_NUM_THREADS of the runs (2)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default=None, metavar="DIR",
                        help="model package to run (default: the bundled one, else an untrained stand-in of its recipe)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--compare-model", action="append", default=[], metavar="DIR",
                        help="another model package, run in every repeat right after --model's run, so both see the "
                             "same machine load (e.g. the same package with a seed network); repeatable")
    parser.add_argument("--stages", action="store_true", help="also one in-process run timing each stage")
    parser.add_argument("--output", default=str(RESULTS / "end_to_end_cpu"), help="table stem (.md and .csv)")
    parser.add_argument("--stages-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stages_child is not None:
        stages_child(json.loads(args.stages_child))
        return
    import torch

    from harness import cli_executable, invocation, machine_header, matmul_gflops, threads_env, write_tables

    rows: list[dict[str, Any]] = []
    stage_rows: list[dict[str, Any]] = []
    env = threads_env(args.threads)
    executable = cli_executable()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        dwi, adc = write_study(scratch, args.slices, args.size, args.in_plane_mm)
        model_dir, model_label = model_choice(args.model, scratch)
        models = [(model_dir, "model")] + [(Path(d), f"compare {n + 1}") for n, d in enumerate(args.compare_model)]
        for repeat in range(args.repeats):
            for which, (directory, name) in enumerate(models):
                out = scratch / f"run{repeat}-{which}"
                load = os.getloadavg()[0]
                row = {"repeat": repeat, "model": name, "study": f"{args.slices}x{args.size}x{args.size} @ {args.in_plane_mm:g} mm",
                       "load_1min": load, **timed_run([executable, *segment_command(dwi, adc, out, directory, args.device)], env)}
                if row["exit_code"] == 0:
                    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
                    row.update(segmentation_seconds=report["seconds"], mask_sha256=mask_digest(out / "mask.nii.gz"),
                               outputs=sorted(p.name for p in out.glob("*")))
                rows.append(row)
                print(json.dumps(row), flush=True)
        if args.stages:
            out = scratch / "stages"
            stage_rows, _ = run_stages(segment_command(dwi, adc, out, model_dir, args.device), env)
            for row in stage_rows:
                print(json.dumps(row), flush=True)
    torch.set_num_threads(args.threads)
    gflops = matmul_gflops(torch.device("cpu"))  # after the runs: the machine's speed, comparable across sessions
    header = machine_header("End to end: lambdasegment segment (read, preprocess, infer, write, report)",
                            invocation(),
                            {"threads": args.threads, "device": args.device, "model": model_label,
                             "matmul GFLOP/s (fp32 2048², these threads, measured after the runs)": f"{gflops:.0f}",
                             **{f"compare {n + 1}": model_choice(d, Path("."))[1] for n, d in enumerate(args.compare_model)},
                             **({"PYTHONPATH (code under test)": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
                             "note": "seconds = wall time of a fresh CLI process (Python and torch imports included); "
                                     "cpu = its user + system CPU seconds; segmentation = report.json seconds "
                                     "(preprocess, infer, back to the DWI grid)"})
    columns = [("repeat", "repeat"), ("model", "model"), ("study", "study"), ("exit_code", "exit"), ("seconds", "seconds"),
               ("cpu_seconds", "cpu s"), ("segmentation_seconds", "segmentation s"), ("peak_rss_gib", "peak RSS GiB"),
               ("load_1min", "load 1-min"), ("mask_sha256", "mask SHA-256 (voxels+grid)"), ("outputs", "outputs")]
    write_tables(rows, columns, Path(args.output), header)
    if stage_rows:
        stage_columns = [("stage", "stage"), ("seconds", "wall s"), ("cpu_seconds", "cpu s"), ("share", "share of wall")]
        write_tables(stage_rows, stage_columns, Path(args.output + "_stages"),
                     header.replace("# End to end:", "# Where the seconds go, end to end:"))
    print(f"wrote {args.output}.md and .csv" + (f", {args.output}_stages.md and .csv" if stage_rows else ""))


if __name__ == "__main__":
    main()
