"""The real ISLES'22 case in ../shared (skipped when absent): the CLI runs and the mask lands
on the input DWI grid. The small untrained test model is used on purpose: this checks
geometry and plumbing, whatever state the bundled model is in (its accuracy is measured
by ``lambdasegment evaluate``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import SimpleITK as sitk
from lambdasegment_cli_helpers import lambdasegment


def test_segment_the_real_isles_case_onto_its_dwi_grid(isles_case: Path, model_dir: Path, tmp_path: Path) -> None:
    dwi = isles_case / "sub-strokecase0001_ses-0001_dwi.nii.gz"
    adc = isles_case / "sub-strokecase0001_ses-0001_adc.nii.gz"
    result = lambdasegment("segment", "--dwi", dwi, "--adc", adc, "--output", tmp_path / "mask.nii.gz",
                           "--report", tmp_path / "report.json", "--device", "cpu", "--model", model_dir)
    assert result.returncode == 0, result.stderr
    written, reference = sitk.ReadImage(str(tmp_path / "mask.nii.gz")), sitk.ReadImage(str(dwi))
    assert written.GetSize() == reference.GetSize()
    np.testing.assert_allclose(written.GetSpacing(), reference.GetSpacing(), atol=1e-6)
    np.testing.assert_allclose(written.GetOrigin(), reference.GetOrigin(), atol=1e-4)
    np.testing.assert_allclose(written.GetDirection(), reference.GetDirection(), atol=1e-6)
    assert set(np.unique(sitk.GetArrayViewFromImage(written))) <= {0, 1}
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["input"]["adc_unit_detected"] in ("mm2/s", "1e-3 mm2/s", "1e-6 mm2/s")
    assert len(report["slice_areas_mm2"]) == reference.GetSize()[2]
