"""Every bad input to ``lambdasegment segment``: exit 2, one line naming the file and the problem,
and nothing written. (In-process through ``cli.main`` for speed; the subprocess path of the
same handler is covered by ``test_segment.py``.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from lambdasegment_cli_helpers import StudyFiles

from LambdaSegmentLib.cli import main
from LambdaSegmentLib.inference import sha256_of_file
from LambdaSegmentLib.io import read_volume, write_volume


def run_main(capsys: pytest.CaptureFixture, *args: object) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err.strip()


def corrupted_model(model_dir: Path, folder: Path) -> Path:
    """Weights replaced by garbage whose SHA-256 the manifest was updated to match."""
    copy = folder / "corrupted"
    shutil.copytree(model_dir, copy)
    (copy / "weights.pt").write_bytes(b"\x00" * 512)
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    manifest["weights_sha256"] = sha256_of_file(copy / "weights.pt")
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def adc_on_another_grid(study: StudyFiles, folder: Path) -> Path:
    adc = read_volume(study.adc)
    moved = type(adc)(adc.array, (adc.spacing_mm[0] * 1.5, *adc.spacing_mm[1:]), adc.origin_mm, adc.direction)
    return write_volume(moved, folder / "moved_adc.nii.gz")


def zero_adc(study: StudyFiles, folder: Path) -> Path:
    adc = read_volume(study.adc)
    return write_volume(adc.with_array(np.zeros_like(adc.array)), folder / "zero_adc.nii.gz")


def not_an_image(folder: Path) -> Path:
    path = folder / "notes_dwi.nii.gz"
    path.write_text("this is not an image")
    return path


# Each case: (arguments built from study files, folder and model -> argv, the source the message must name)
CASES = {
    "missing DWI file": lambda s, f, m: (["--dwi", f / "absent.nii.gz", "--adc", s.adc], f / "absent.nii.gz"),
    "DWI that is not an image": lambda s, f, m: (["--dwi", not_an_image(f), "--adc", s.adc], f / "notes_dwi.nii.gz"),
    "ADC on another grid": lambda s, f, m: (["--dwi", s.dwi, "--adc", adc_on_another_grid(s, f)], f / "moved_adc.nii.gz"),
    "ADC all zero": lambda s, f, m: (["--dwi", s.dwi, "--adc", zero_adc(s, f)], f / "zero_adc.nii.gz"),
    "no ADC, eADC or b0": lambda s, f, m: (["--dwi", s.dwi], "--adc"),
    "mask output of unknown format": lambda s, f, m: (["--dwi", s.dwi, "--adc", s.adc, "--output", f / "mask.txt"], f / "mask.txt"),
    "output onto the DWI itself": lambda s, f, m: (["--dwi", s.dwi, "--adc", s.adc, "--output", s.dwi, "--overwrite"], s.dwi),
    "missing model package": lambda s, f, m: (["--dwi", s.dwi, "--adc", s.adc, "--model", f / "no-model"], f / "no-model"),
    "corrupted checkpoint": lambda s, f, m: (["--dwi", s.dwi, "--adc", s.adc, "--model", corrupted_model(m, f)], f / "corrupted" / "weights.pt"),
    "unknown device": lambda s, f, m: (["--dwi", s.dwi, "--adc", s.adc, "--device", "tpu"], "--device"),
    "negative memory budget": lambda s, f, m: (["--dwi", s.dwi, "--adc", s.adc, "--memory-budget-gb", "-1"], "--memory-budget-gb"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exits_2_with_one_line_naming_the_file(
    case: str, axial_study: StudyFiles, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    dwi_before = axial_study.dwi.read_bytes()
    arguments, source = CASES[case](axial_study, tmp_path, model_dir)
    if "--output" not in arguments:
        arguments += ["--output", tmp_path / "mask.nii.gz"]
    if "--model" not in arguments:
        arguments += ["--model", model_dir]
    code, message = run_main(capsys, "segment", *arguments)
    assert code == 2, message
    assert "\n" not in message
    assert message.startswith("lambdasegment: error: ") and str(source) in message
    assert not (tmp_path / "mask.nii.gz").exists()
    assert axial_study.dwi.read_bytes() == dwi_before


@pytest.mark.parametrize("case", ["missing input folder", "output is a file", "negative workers"])
def test_bad_batch_arguments_exit_2_naming_them(case: str, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a_file = tmp_path / "results.txt"
    a_file.write_text("mine")
    arguments, source = {
        "missing input folder": ([tmp_path / "nowhere", tmp_path / "out"], tmp_path / "nowhere"),
        "output is a file": ([tmp_path, a_file], a_file),
        "negative workers": ([tmp_path, tmp_path / "out", "--workers", "-1"], "--workers"),
    }[case]
    code, message = run_main(capsys, "segment-dir", *arguments, "--model", model_dir)
    assert code == 2 and "\n" not in message and str(source) in message
    assert a_file.read_text(encoding="utf-8") == "mine"


def test_adc_on_another_grid_is_resampled_when_asked(axial_study: StudyFiles, model_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    moved = adc_on_another_grid(axial_study, tmp_path)
    code, message = run_main(capsys, "segment", "--dwi", axial_study.dwi, "--adc", moved, "--resample-to-dwi",
                             "--output", tmp_path / "mask.nii.gz", "--model", model_dir, "--device", "cpu")
    assert code == 0, message
    assert read_volume(tmp_path / "mask.nii.gz").array.shape == read_volume(axial_study.dwi).array.shape
