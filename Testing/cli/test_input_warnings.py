"""The CLI speaks only through its own messages: ITK's warnings never reach stderr, and a NIfTI
whose qform and sform disagree gets one ``lambdasegment: warning:`` line naming the file, also
kept in the report and in segment-dir's summary."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nibabel as nib
import pytest
import numpy as np
from lambdasegment_cli_helpers import StudyFiles, lambdasegment, write_phantom

SMALL = dict(size_ijk=(32, 36, 8), spacing_mm=(4.0, 4.0, 6.0))


def with_sform(source: Path, target: Path, sform_of: callable) -> Path:
    """``source`` rewritten by nibabel with the sform ``sform_of(qform)`` (code 1, scanner); qform kept."""
    image = nib.load(str(source))
    copy = nib.Nifti1Image(np.asanyarray(image.dataobj), None, header=image.header)
    copy.set_sform(sform_of(image.get_qform()), code=1)
    target.parent.mkdir(parents=True, exist_ok=True)
    nib.save(copy, str(target))
    return target


def left_right_swapped(qform: np.ndarray) -> np.ndarray:
    """The qform with its i axis reversed about the volume's centre: the classic flipped mask."""
    flip = np.diag([-1.0, 1.0, 1.0, 1.0])
    flip[0, 3] = SMALL["size_ijk"][0] - 1
    return qform @ flip


def unusual_scales(qform: np.ndarray) -> np.ndarray:
    """Voxel sizes in the sform unlike the header's pixdim (ITK: 'has unexpected scales in sform')."""
    return qform @ np.diag([1.1, 0.9, 1.0, 1.0])


def our_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("lambdasegment: warning:")]


def test_segment_names_the_file_whose_forms_disagree_and_prints_no_itk_text(model_dir: Path, tmp_path: Path) -> None:
    phantom = write_phantom(tmp_path / "phantom", "scan", **SMALL)
    study = StudyFiles(with_sform(phantom.dwi, tmp_path / "in" / "scan_dwi.nii.gz", left_right_swapped),
                       with_sform(phantom.adc, tmp_path / "in" / "scan_adc.nii.gz", left_right_swapped))
    report_path = tmp_path / "out" / "scan.json"
    result = lambdasegment("segment", "--dwi", study.dwi, "--adc", study.adc, "--output", tmp_path / "out" / "mask.nii.gz",
                           "--report", report_path, "--model", model_dir, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "WARNING: In" not in result.stderr and "itk" not in result.stderr.lower()
    # the small phantom's brain volume gets its own (plausibility) warning; the input files' are these
    lines = [line for line in our_warnings(result.stderr) if "qform" in line]
    assert len(lines) == 2
    for line, path in zip(lines, (study.dwi, study.adc)):
        assert line.startswith(f"lambdasegment: warning: {path}: the NIfTI qform (code 1) and sform (code 1) disagree")
        assert "mirror image" in line and "read with the sform's geometry" in line
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["input"]["warnings"] == [line.removeprefix("lambdasegment: warning: ") for line in lines]


def test_unusual_sform_scales_give_one_line_of_ours_before_the_refusal(model_dir: Path, tmp_path: Path) -> None:
    """The issue's case: the DWI's sform scales differ from its pixdim, and the study is refused
    (here: its ADC file is broken). ITK's own two-line warning (printed twice) is replaced by one
    line of ours naming the DWI, then comes the error."""
    phantom = write_phantom(tmp_path / "phantom", "scan", **SMALL)
    dwi = with_sform(phantom.dwi, tmp_path / "in" / "odd_dwi.nii.gz", unusual_scales)
    broken_adc = tmp_path / "in" / "odd_adc.nii.gz"
    broken_adc.write_bytes(phantom.adc.read_bytes()[:300])
    result = lambdasegment("segment", "--dwi", dwi, "--adc", broken_adc, "--output", tmp_path / "mask.nii.gz",
                           "--model", model_dir, "--device", "cpu")
    assert result.returncode == 2, result.stderr
    assert "WARNING: In" not in result.stderr and "unexpected scales" not in result.stderr
    first, last = result.stderr.strip().splitlines()
    assert first.startswith(f"lambdasegment: warning: {dwi}: the NIfTI qform (code 1) and sform (code 1) disagree")
    assert last.startswith(f"lambdasegment: error: {broken_adc}:")


def test_segment_dir_keeps_a_cases_warnings_in_its_summary(model_dir: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "rawdata"
    write_phantom(dataset / "sub-a" / "ses-0001" / "dwi", "sub-a_ses-0001", **SMALL)
    phantom = write_phantom(tmp_path / "phantom", "b", seed=1, **SMALL)
    folder = dataset / "sub-b" / "ses-0001" / "dwi"
    dwi = with_sform(phantom.dwi, folder / "sub-b_ses-0001_dwi.nii.gz", left_right_swapped)
    with_sform(phantom.adc, folder / "sub-b_ses-0001_adc.nii.gz", left_right_swapped)
    output = tmp_path / "results"
    result = lambdasegment("segment-dir", dataset, output, "--model", model_dir, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "WARNING: In" not in result.stderr
    assert any(line.startswith(f"lambdasegment: warning: {dwi}: the NIfTI qform") for line in our_warnings(result.stderr))
    with open(output / "summary.csv", newline="", encoding="utf-8") as stream:
        rows = {row["case"]: row for row in csv.DictReader(stream)}
    # the summary's warnings column holds all of a case's warnings: its inputs', then its report's own
    # (here the small phantom's implausible brain volume); case a has no input warning
    report_a = json.loads((output / "sub-a_ses-0001" / "sub-a_ses-0001_report.json").read_text(encoding="utf-8"))
    assert report_a["input"]["warnings"] == []
    assert rows["sub-a_ses-0001"]["warnings"] == " | ".join(report_a["warnings"])
    notes = rows["sub-b_ses-0001"]["warnings"].split(" | ")
    report = json.loads((output / "sub-b_ses-0001" / "sub-b_ses-0001_report.json").read_text(encoding="utf-8"))
    assert notes == report["input"]["warnings"] + report["warnings"]
    assert len(report["input"]["warnings"]) == 2
    assert report["input"]["warnings"][0].startswith(f"{dwi}: the NIfTI qform (code 1) and sform (code 1) disagree")


def test_itk_messages_outside_file_reading_are_said_once_in_our_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> None:
    """A command that hands a file to SimpleITK directly (not through io.reading): ITK's text is
    still caught for the whole command and restated, once, at its end."""
    import SimpleITK as sitk

    from LambdaSegmentLib.cli import main, models_cmd

    phantom = write_phantom(tmp_path / "phantom", "scan", **SMALL)
    odd = with_sform(phantom.dwi, tmp_path / "odd_dwi.nii.gz", unusual_scales)
    monkeypatch.setattr(models_cmd, "run", lambda args: sitk.ReadImage(str(odd)) and 0)
    assert main(["models"]) == 0
    err = capfd.readouterr().err
    assert "WARNING: In" not in err
    assert err.strip().splitlines() == [f"lambdasegment: warning: SimpleITK: {odd} has unexpected scales in sform"]
