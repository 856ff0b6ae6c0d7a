"""``lambdasegment segment --brain-mask``: the brain mask on the DWI grid, never over an existing
file; ``brain_volume_ml`` in the report, with a warning outside 800-2,000 mL."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from LambdaSegmentLib.io import read_volume
from LambdaSegmentLib.reports import PLAUSIBLE_BRAIN_VOLUME_ML, brain_summary

from lambdasegment_cli_helpers import StudyFiles, lambdasegment


def test_segment_writes_the_brain_mask_and_its_volume(oblique_study: StudyFiles, model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = lambdasegment("segment", "--dwi", oblique_study.dwi, "--adc", oblique_study.adc, "--output", out / "mask.nii.gz",
                           "--brain-mask", out / "brain.nrrd", "--report", out / "case.json", "--model", model_dir,
                           "--device", "cpu")
    assert result.returncode == 0, result.stderr
    brain_image, dwi_image = sitk.ReadImage(str(out / "brain.nrrd")), sitk.ReadImage(str(oblique_study.dwi))
    assert brain_image.GetSize() == dwi_image.GetSize()
    np.testing.assert_allclose(brain_image.GetSpacing(), dwi_image.GetSpacing(), atol=1e-6)
    np.testing.assert_allclose(brain_image.GetOrigin(), dwi_image.GetOrigin(), atol=1e-5)
    np.testing.assert_allclose(brain_image.GetDirection(), dwi_image.GetDirection(), atol=1e-6)
    brain = read_volume(out / "brain.nrrd")
    assert set(np.unique(brain.array)) == {0, 1}
    mask = read_volume(out / "mask.nii.gz")
    assert not mask.array[brain.array == 0].any()  # no infarct outside the brain

    report = json.loads((out / "case.json").read_text(encoding="utf-8"))
    volume = float(brain.array.sum()) * brain.voxel_volume_mm3 / 1000
    assert report["brain_volume_ml"] == pytest.approx(volume, abs=1e-3)
    assert report["brain_mask_method"] == "dwi_morphology"
    assert report["outputs"]["brain_mask"] == str(out / "brain.nrrd")
    low, high = PLAUSIBLE_BRAIN_VOLUME_ML
    plausible = low <= volume <= high
    assert (report["warnings"] == []) == plausible
    assert ("lambdasegment: warning: brain volume" in result.stderr) == (not plausible)
    assert f"brain {volume:.0f} mL" in result.stdout
    assert "brain_volume_ml" in (out / "case.csv").read_text(encoding="utf-8").splitlines()[0]


def test_segment_refuses_to_overwrite_an_existing_brain_mask(axial_study: StudyFiles, model_dir: Path, tmp_path: Path) -> None:
    existing = tmp_path / "brain.nii.gz"
    existing.write_bytes(b"the user's file")
    result = lambdasegment("segment", "--dwi", axial_study.dwi, "--adc", axial_study.adc, "--output", tmp_path / "mask.nii.gz",
                           "--brain-mask", existing, "--model", model_dir, "--device", "cpu")
    assert result.returncode == 2
    assert str(existing) in result.stderr and "already exists" in result.stderr
    assert existing.read_bytes() == b"the user's file" and not (tmp_path / "mask.nii.gz").exists()
    bad = lambdasegment("segment", "--dwi", axial_study.dwi, "--adc", axial_study.adc, "--output", tmp_path / "mask.nii.gz",
                        "--brain-mask", tmp_path / "brain.png", "--model", model_dir, "--device", "cpu")
    assert bad.returncode == 2 and "brain mask output must end in one of" in bad.stderr


def test_a_brain_volume_outside_the_plausible_range_is_a_warning() -> None:
    assert brain_summary(1300.0, "dwi_morphology")["warnings"] == []
    for volume in (450.0, 2600.0):
        summary = brain_summary(volume, "dwi_morphology")
        assert summary["brain_volume_ml"] == volume and len(summary["warnings"]) == 1
        assert f"{volume:.0f} mL is outside the plausible 800-2000 mL" in summary["warnings"][0]
