"""Shared pieces of the benchmark scripts: one fresh process per configuration, the
machine's measured matmul peak, peak memory, load average, and Markdown/CSV output.

Every measurement runs in a child process (``python <script> --child '<json>'``) so that
peak memory (RSS on CPU via ``getrusage``; ``torch.cuda.max_memory_allocated`` on GPU)
belongs to that configuration alone and no allocator or oneDNN cache carries over.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results"
BUNDLED_MANIFEST = REPO_ROOT / "LambdaSegmentLib" / "resources" / "models" / "lambdaunet-dwi" / "manifest.json"
# The bundled model's intended architecture when its manifest is not (yet) in the tree.
BUNDLED_FALLBACK = {"name": "lambda_unet", "config": {"widths": [16, 32, 64, 128, 256], "value_dim": 16}}


def bundled_architecture() -> tuple[dict[str, Any], str]:
    """(architecture {name, config}, where it came from) of the bundled model."""
    if BUNDLED_MANIFEST.exists():
        manifest = json.loads(BUNDLED_MANIFEST.read_text(encoding="utf-8"))
        return manifest["architecture"], str(BUNDLED_MANIFEST.relative_to(REPO_ROOT))
    return BUNDLED_FALLBACK, "fallback (no bundled manifest in the tree when run)"


def matmul_gflops(device: torch.device, size: int = 2048, repeats: int = 5) -> float:
    """Measured fp32 GFLOP/s of a size x size matmul (the roofline used for every run)."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    a @ b
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize(device)
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_gib(device: torch.device) -> float:
    """Peak resident memory of this process (CPU) or peak allocated device memory (GPU), GiB."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def current_rss_gib() -> float:
    """Resident memory now (Linux /proc), GiB."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**30


def machine_description() -> dict[str, str]:
    """CPU model, cores, memory, OS, Python and library versions."""
    cpu = platform.processor() or "unknown"
    mhz = "unknown"
    try:
        first: dict[str, str] = {}  # each cpuinfo field's first value (that of CPU 0)
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            first.setdefault(key.strip(), value.strip())
        cpu = first.get("model name", cpu)
        if "cpu MHz" in first:
            mhz = f"{float(first['cpu MHz']):.0f}"
        memory_gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (OSError, ValueError):
        memory_gib = float("nan")
    info = {
        "cpu": cpu,
        "logical_cpus": str(os.cpu_count()),
        "memory_gib": f"{memory_gib:.1f}",
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mkldnn": str(torch.backends.mkldnn.is_available()),
        # the VM behind "AMD EPYC" changes between sessions: these say which one a run had
        "cpu_mhz": mhz,
        "cpu_isa": torch.backends.cpu.get_cpu_capability(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
    }
    try:
        import einops

        info["einops"] = einops.__version__
    except ImportError:
        pass
    return info


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, encoding="utf-8", errors="replace")
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "LambdaSegmentLib", "benchmarks"],
                               cwd=REPO_ROOT, capture_output=True, text=True, encoding="utf-8", errors="replace").stdout.strip()
        return out.stdout.strip() + (" (+ uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def threads_env(threads: int) -> dict[str, str]:
    """This process's environment with OpenMP and MKL limited to ``threads`` threads."""
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def cli_executable() -> str:
    """The ``lambdasegment`` console script of the running Python environment."""
    return str(Path(sys.executable).parent / "lambdasegment")


def run_child(script: Path, config: dict[str, Any], timeout_s: float, threads: int) -> dict[str, Any]:
    """Run ``script --child config`` in a fresh process; returns its JSON result plus the
    1-minute load average before/after. A timeout or crash becomes a result with ``status``."""
    env = threads_env(threads)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(script), "--child", json.dumps(config)],
            capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=timeout_s, env=env, cwd=REPO_ROOT,
        )
    except subprocess.TimeoutExpired:
        return {**config, "status": f"timeout after {timeout_s:.0f} s", "load_1min_before": load_before,
                "load_1min_after": os.getloadavg()[0]}
    result_lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not result_lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        status = f"failed (exit {done.returncode}): {tail[0][:200]}"
        if done.returncode in (-9, 137):
            status = "killed (out of memory?)"
        return {**config, "status": status, "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]}
    result = json.loads(result_lines[-1][len("RESULT "):])
    result.update(load_1min_before=load_before, load_1min_after=os.getloadavg()[0],
                  process_seconds=time.perf_counter() - start)
    return result


def emit(result: dict[str, Any]) -> None:
    """Child side: print the one result line the parent reads."""
    print("RESULT " + json.dumps(result), flush=True)


def write_tables(rows: list[dict[str, Any]], columns: list[tuple[str, str]], stem: Path, header: str) -> None:
    """``stem``.csv (all keys of ``columns``) and ``stem``.md (``header`` + a table)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    with open(stem.with_suffix(".csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, [key for key, _ in columns], extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: format_cell(row.get(key)) for key, _ in columns})
    lines = [header, "", "| " + " | ".join(title for _, title in columns) + " |",
             "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(format_cell(row.get(key)) for key, _ in columns) + " |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")


def format_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if value != value:  # NaN: say so, never a blank
            return "nan"
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def invocation() -> str:
    """This benchmark's command line as it was really run (with its niceness, when not 0)."""
    niceness = os.nice(0)
    return " ".join([f"nice -n {niceness}"] * bool(niceness) + [".venv/bin/python", *sys.argv])


def machine_header(title: str, command: str, extra: dict[str, Any] | None = None) -> str:
    """Markdown preamble: title, exact command, machine, versions, commit, time."""
    info = machine_description()
    lines = [f"# {title}", "", f"Command: `{command}`", "",
             f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {git_commit()}", ""]
    lines += [f"- {key}: {value}" for key, value in {**info, **(extra or {})}.items()]
    return "\n".join(lines)
