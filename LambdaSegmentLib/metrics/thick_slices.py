"""The thick-slice evaluation setting: consecutive thin slices averaged into thick slabs.

The paper's clinical data had thick slices; ISLES'22 is 2 mm. Averaging 3 consecutive
2 mm slices gives 6 mm slabs, as a scanner's slab profile would: the *signals* are
averaged (S_b = DWI and S_0 = DWI / eADC), and ADC and eADC are recomputed from the slab
signals (``load_study``'s b0 + b1000 route), because averaging ADC itself is not what a
thick acquisition measures. The expert mask of a slab is the majority of its slices.
Only whole groups are kept (a remainder of fewer slices at the end is dropped).
"""

from __future__ import annotations

import numpy as np

from LambdaSegmentLib.io import Study, Volume, load_study
from LambdaSegmentLib.preprocessing import find_slice_axis


def average_slabs(volume: Volume, slices_per_slab: int, slice_axis: int | None = None) -> Volume:
    """Mean of each group of ``slices_per_slab`` consecutive slices along the slice axis.

    ``slice_axis`` is an ITK axis (0 i, 1 j, 2 k; default from the geometry). The slab
    grid has ``slices_per_slab`` × the slice spacing and its first slab centred on the
    centre of the first group; float32.
    """
    if slices_per_slab < 1:
        raise ValueError(f"slices_per_slab must be >= 1, got {slices_per_slab}")
    axis_itk = find_slice_axis(volume) if slice_axis is None else slice_axis
    axis_np = 2 - axis_itk
    array = np.asarray(volume.array, dtype=np.float64)
    groups = array.shape[axis_np] // slices_per_slab
    if groups == 0:
        raise ValueError(f"{array.shape[axis_np]} slices cannot make one slab of {slices_per_slab}")
    kept = np.take(array, np.arange(groups * slices_per_slab), axis=axis_np)
    shape = list(kept.shape)
    shape[axis_np : axis_np + 1] = [groups, slices_per_slab]
    averaged = kept.reshape(shape).mean(axis=axis_np + 1).astype(np.float32)
    spacing = list(volume.spacing_mm)
    first_centre = np.zeros(3)
    first_centre[axis_itk] = (slices_per_slab - 1) / 2
    origin = volume.index_to_lps(first_centre)
    spacing[axis_itk] *= slices_per_slab
    return Volume(averaged, tuple(spacing), tuple(float(v) for v in origin), volume.direction)


def s0_signal(study: Study) -> np.ndarray:
    """float64 (nk, nj, ni): the study's b0 signal S0 = DWI / eADC, 0 where the eADC is 0."""
    eadc = np.asarray(study.eadc.array, dtype=np.float64)
    dwi = np.asarray(study.dwi.array, dtype=np.float64)
    return np.where(eadc > 0, dwi / np.maximum(eadc, 1e-6), 0.0)


def thick_slice_study(study: Study, truth: Volume, slices_per_slab: int = 3, slice_axis: int | None = None) -> tuple[Study, Volume]:
    """``study`` and its expert mask as a thick-slab acquisition (see the module docstring).

    ``slice_axis`` is the ITK axis (0 i, 1 j, 2 k) averaged into slabs; default the study's
    slice axis (another axis of a thin isotropic study makes, e.g., sagittal slabs).
    Returns the slab study (ADC/eADC recomputed from slab signals) and the majority mask (uint8).
    """
    axis = find_slice_axis(study.dwi) if slice_axis is None else slice_axis
    s0 = s0_signal(study)
    slab_b1000 = average_slabs(study.dwi, slices_per_slab, axis)
    slab_b0 = average_slabs(study.dwi.with_array(s0.astype(np.float32)), slices_per_slab, axis)
    slab_study = load_study(b0=slab_b0, b1000=slab_b1000, b_value=study.b_value)
    return slab_study, majority_slabs(truth, slices_per_slab, axis)


def majority_slabs(mask: Volume, slices_per_slab: int, slice_axis: int) -> Volume:
    """A mask's slabs (:func:`average_slabs` along the ITK axis ``slice_axis``), each voxel
    labelled where the majority of its slices are (uint8): the thick slabs' reference."""
    slabs = average_slabs(mask.with_array((np.asarray(mask.array) != 0).astype(np.float32)), slices_per_slab, slice_axis)
    return slabs.with_array((slabs.array >= 0.5).astype(np.uint8))
