"""The ADC-threshold rule every model is compared with.

Infarct = ADC < 0.62×10⁻³ mm²/s (the ischemic-core threshold of commercial software such
as RAPID; Purushotham et al., Int J Stroke 2015) **and** DWI brighter than 1.2× the brain median, where
the median is taken over the DWI's brain foreground (Otsu, the same statistics mask the
preprocessing uses). Voxels without ADC data (ADC ≤ 0) are never infarct.
"""

from __future__ import annotations

import numpy as np

from LambdaSegmentLib.io import Study, Volume
from LambdaSegmentLib.io.units import ADC_CORE_THRESHOLD  # 10⁻³ mm²/s
DWI_BRIGHTNESS_FACTOR = 1.2  # × brain median


def adc_threshold_rule(study: Study) -> Volume:
    """The rule's uint8 mask (1 = infarct) on the study's DWI grid; ``study.adc`` is in 10⁻³ mm²/s."""
    dwi = np.asarray(study.dwi.array, dtype=np.float64)
    adc = np.asarray(study.adc.array, dtype=np.float64)
    brain = study.foreground
    median = float(np.median(dwi[brain])) if brain.any() else 0.0
    mask = (adc > 0) & (adc < ADC_CORE_THRESHOLD) & (dwi > DWI_BRIGHTNESS_FACTOR * median)
    return study.dwi.with_array(mask.astype(np.uint8))
