"""Start-up cost of the command line: ``segment`` imports only what segmenting needs.

A fresh ``lambdasegment segment`` process is what a clinician waits for; Lightning (with
torchmetrics) alone takes seconds to import, so the segment path must never load the
training stack, and never matplotlib (the report page is drawn by a helper process).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lambdasegment_cli_helpers import StudyFiles

from LambdaSegmentLib.cli import COMMAND_MODULES, build_parser, main, requested_command

TRAINING_STACK = ("lightning", "torchmetrics", "nilearn")

# Runs the CLI in a fresh interpreter and prints the heavy modules it ended up importing.
PROBE = """
import json, sys
from LambdaSegmentLib.cli import main
code = main(sys.argv[1:])
heavy = ("lightning", "torchmetrics", "nilearn", "matplotlib")
print(json.dumps({"exit": code, "imported": sorted(m for m in heavy if m in sys.modules)}))
"""


def imported_by_segment(*args: object) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, "segment", *map(str, args)],
                          capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_segment_without_a_report_imports_neither_the_training_stack_nor_matplotlib(
    model_dir: Path, axial_study: StudyFiles, tmp_path: Path
) -> None:
    result = imported_by_segment("--dwi", axial_study.dwi, "--adc", axial_study.adc, "--output", tmp_path / "mask.nii.gz",
                                 "--model", model_dir, "--device", "cpu")
    assert result == {"exit": 0, "imported": []}


def test_segment_with_a_report_leaves_matplotlib_to_the_page_helper(
    model_dir: Path, axial_study: StudyFiles, tmp_path: Path
) -> None:
    # reports.pages: a helper process imports matplotlib while this one imports torch, and draws the page.
    result = imported_by_segment("--dwi", axial_study.dwi, "--adc", axial_study.adc, "--output", tmp_path / "mask.nii.gz",
                                 "--report", tmp_path / "report.json", "--model", model_dir, "--device", "cpu")
    assert result == {"exit": 0, "imported": []}
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("argv", "command"), [
    (["segment", "--dwi", "x"], "segment"),
    (["segment-dir", "in", "out"], "segment-dir"),
    (["--help"], None),
    ([], None),
])
def test_the_requested_command_is_the_first_word_that_is_not_an_option(argv: list[str], command: str | None) -> None:
    assert requested_command(argv) == command


@pytest.mark.parametrize(("command", "module"), [("segment", "segment"), ("segment-dir", "segment_dir"), ("models", "models_cmd")])
def test_a_named_command_gets_a_parser_with_that_command_alone(command: str, module: str) -> None:
    assert module in COMMAND_MODULES
    subcommands = build_parser(command)._subparsers._group_actions[0].choices
    assert list(subcommands) == [command]


def test_without_a_known_command_every_command_is_registered() -> None:
    everything = list(build_parser()._subparsers._group_actions[0].choices)
    assert list(build_parser("segmnt")._subparsers._group_actions[0].choices) == everything
    assert {"demo", "segment", "segment-dir", "models", "synthesize", "train", "evaluate"} <= set(everything)


def test_a_misspelt_command_is_refused_with_the_list_of_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["segmnt", "--dwi", "x"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'segmnt'" in error and "segment-dir" in error


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    listing = capsys.readouterr().out
    for command in ("demo", "segment", "segment-dir", "models", "synthesize", "train", "evaluate"):
        assert command in listing


def test_only_the_process_command_tunes_the_garbage_collector_and_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() as the console script calls it (argv None) raises the collection thresholds and
    freezes live objects before exit, and keeps freed heap blocks; main(argv), as tests and
    embedding code call it, leaves the GC and the allocator alone."""
    import gc

    import LambdaSegmentLib.cli as cli

    calls: list[tuple] = []
    monkeypatch.setattr(cli, "_run", lambda argv: calls.append(("run",)) or 0)
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: calls.append(("keep_freed_memory",)) or True)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(("freeze",)))
    monkeypatch.setattr(gc, "set_threshold", lambda *thresholds: calls.append(("set_threshold", *thresholds)))
    assert cli.main(["segment"]) == 0 and calls == [("run",)]
    calls.clear()
    monkeypatch.setattr(sys, "argv", ["lambdasegment", "segment"])
    assert cli.main() == 0
    assert calls == [("set_threshold", *cli.PROCESS_GC_THRESHOLDS), ("keep_freed_memory",), ("run",), ("freeze",)]
    assert cli.PROCESS_GC_THRESHOLDS[0] > gc.get_threshold()[0]


def test_debug_anywhere_shows_the_traceback_of_an_unexpected_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from LambdaSegmentLib.cli import models_cmd

    def broken(args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(models_cmd, "run", broken)
    assert main(["models"]) == 1
    assert capsys.readouterr().err.strip() == "lambdasegment: unexpected error: RuntimeError: boom"
    for argv in (["models", "--debug"], ["--debug", "models"]):
        with pytest.raises(RuntimeError, match="boom"):
            main(argv)


MMAPPED_BLOCKS_AFTER_A_LARGE_ALLOCATION = """
import ctypes, ctypes.util, sys
from LambdaSegmentLib.heap import keep_freed_memory

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
if not hasattr(libc, "mallinfo2"):
    print("no mallinfo2"); sys.exit(0)
libc.mallinfo2.restype = Mallinfo2
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
before = libc.mallinfo2().hblks
block = bytearray(64 * 2**20)  # far above glibc's largest adaptive mmap threshold (32 MiB)
print(kept, libc.mallinfo2().hblks - before)
"""


def test_keep_freed_memory_serves_large_blocks_from_the_heap() -> None:
    """On glibc a 64 MiB block is one more mmapped block by default and comes from the heap
    once ``keep_freed_memory`` has run (each in a fresh interpreter: the setting is for the
    process's lifetime)."""
    from LambdaSegmentLib.heap import glibc_mallopt

    if glibc_mallopt() is None:
        pytest.skip("glibc's malloc only")

    def mmapped_blocks(mode: str) -> str:
        run = subprocess.run(
            [sys.executable, "-c", MMAPPED_BLOCKS_AFTER_A_LARGE_ALLOCATION, mode],
            capture_output=True, text=True, check=True,
        )
        return run.stdout.strip()

    default, kept = mmapped_blocks("default"), mmapped_blocks("keep")
    if default == "no mallinfo2":
        pytest.skip("glibc older than 2.33 (no mallinfo2)")
    assert default == "None 1"
    assert kept == "True 0"


def test_the_heap_changes_the_time_of_a_forward_pass_not_its_logits(tmp_path: Path) -> None:
    """``benchmarks/inference_speed.py --heaps default keep`` runs the same forward pass in two
    fresh processes, the second with the console script's heap, and finds the same logits."""
    from LambdaSegmentLib.heap import glibc_mallopt

    if glibc_mallopt() is None:
        pytest.skip("glibc's malloc only")
    root = Path(__file__).resolve().parents[2]
    stem = tmp_path / "heap"
    subprocess.run(
        [sys.executable, str(root / "benchmarks" / "inference_speed.py"), "--studies", "3x32", "--archs", "paper",
         "--models", "lambda_unet", "--impls", "chunked", "--heaps", "default", "keep", "--threads", "1",
         "--output", str(stem)],
        check=True, capture_output=True, text=True, cwd=root,
    )
    import csv

    with open(stem.with_suffix(".csv"), encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["heap"], row["status"], row["heap_set"]) for row in rows] == [("default", "ok", ""), ("keep", "ok", "True")]
    assert float(rows[1]["diff_vs_first_heap"]) == 0.0


def test_keep_freed_memory_leaves_other_c_libraries_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off glibc (macOS, Windows, musl) the call changes nothing and says so; no library is loaded."""
    import ctypes
    import platform

    import LambdaSegmentLib.heap as heap

    def no_library(*args: object, **kwargs: object) -> None:
        raise AssertionError("no C library may be loaded off glibc")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    for system, libc in (("Darwin", ("", "")), ("Windows", ("", "")), ("Linux", ("musl", "1.2"))):
        monkeypatch.setattr(platform, "system", lambda system=system: system)
        monkeypatch.setattr(platform, "libc_ver", lambda libc=libc: libc)
        assert heap.keep_freed_memory() is False
