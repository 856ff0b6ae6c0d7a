"""The ADC-threshold rule: ADC < 0.62e-3 mm²/s and DWI > 1.2 × brain median."""

from __future__ import annotations

import numpy as np

from LambdaSegmentLib.io import Volume, load_study
from LambdaSegmentLib.metrics import adc_threshold_rule


def test_rule_marks_only_voxels_that_are_both_dark_on_adc_and_bright_on_dwi() -> None:
    dwi = np.zeros((6, 16, 16), dtype=np.float32)
    adc = np.zeros((6, 16, 16), dtype=np.float32)  # 1e-3 mm²/s
    dwi[:, 1:15, 1:15], adc[:, 1:15, 1:15] = 100.0, 0.8  # brain inside an empty background
    dwi[2, 4:6, 4:6], adc[2, 4:6, 4:6] = 160.0, 0.5  # infarct: bright and dark
    dwi[3, 8:10, 8:10], adc[3, 8:10, 8:10] = 160.0, 0.9  # T2 shine-through: bright, normal ADC
    dwi[4, 1:3, 1:3], adc[4, 1:3, 1:3] = 100.0, 0.4  # dark ADC, normal DWI
    adc[5, 1:15, 1:8] = 3.0  # CSF-like diffusion, so the ADC reads as an ADC (not an eADC)
    spacing = (2.0, 2.0, 4.0)
    study = load_study(dwi=Volume(dwi, spacing), adc=Volume(adc, spacing), adc_unit="1e-3 mm2/s")
    mask = adc_threshold_rule(study)
    expected = np.zeros_like(dwi, dtype=np.uint8)
    expected[2, 4:6, 4:6] = 1
    np.testing.assert_array_equal(mask.array, expected)
    assert mask.spacing_mm == study.dwi.spacing_mm
