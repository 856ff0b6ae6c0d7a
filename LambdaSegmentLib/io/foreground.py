"""The brain (head) foreground of a DWI: the voxels statistics are taken over.

ADC unit detection and intensity normalisation both need "brain voxels". A b≈1000
DWI is bright in brain tissue and dark in air, bone, fat-suppressed scalp and most CSF,
so Otsu's threshold on the DWI separates tissue from the rest on skull-stripped and
on clinical (not skull-stripped) scans alike. It is a statistics mask, not a
segmentation: CSF largely falls outside it, which is what the statistics want.
"""

from __future__ import annotations

import numpy as np
import SimpleITK as sitk

from .volume import Volume


def brain_foreground(dwi: Volume) -> np.ndarray:
    """Boolean mask (nk, nj, ni) of the DWI voxels above Otsu's threshold.

    Falls back to all positive voxels when Otsu leaves fewer than 0.1 % of the volume
    (e.g. one very bright artefact voxel). Empty only when the DWI has no positive voxel.
    """
    values = np.asarray(dwi.array, dtype=np.float32)
    positive = values[values > 0]
    if positive.size:
        # A few extreme voxels (artefacts) would squeeze all tissue into Otsu's lowest bin.
        values = np.minimum(values, np.percentile(positive, 99.9))
    image = dwi.with_array(values).to_sitk()
    # OtsuThreshold marks voxels above the threshold with outsideValue.
    foreground = sitk.GetArrayFromImage(sitk.OtsuThreshold(image, 0, 1, 256)).astype(bool)
    if foreground.sum() < 0.001 * foreground.size:
        foreground = np.asarray(dwi.array) > 0
    return foreground
