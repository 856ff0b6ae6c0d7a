"""Helpers of the CLI tests: running the command in a subprocess, phantom studies on disk."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.io import write_volume


@dataclass(frozen=True)
class StudyFiles:
    dwi: Path
    adc: Path


def lambdasegment(*args: object, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m LambdaSegmentLib ARGS`` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "LambdaSegmentLib", *map(str, args)],
        capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=timeout, cwd=cwd,
    )


def write_phantom(folder: Path, name: str, **geometry: object) -> StudyFiles:
    phantom = make_phantom(**geometry)
    folder.mkdir(parents=True, exist_ok=True)
    files = StudyFiles(folder / f"{name}_dwi.nii.gz", folder / f"{name}_adc.nii.gz")
    write_volume(phantom.dwi, files.dwi)
    write_volume(phantom.adc, files.adc)
    return files


