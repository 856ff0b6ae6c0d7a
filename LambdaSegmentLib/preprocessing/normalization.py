"""Intensity normalisations, by the names a model manifest records.

The manifest's ``preprocessing.normalization`` maps a channel ("dwi", "eadc", "adc")
to one of these names; training and inference both read it, so the model sees the same
intensities in both (nnU-Net's plans idea). Statistics are taken over the DWI's brain
foreground (:func:`LambdaSegmentLib.io.foreground.brain_foreground`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import BadInputError

Normalization = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _none(values: np.ndarray, brain: np.ndarray) -> np.ndarray:
    return values


def _brain_median(values: np.ndarray, brain: np.ndarray) -> np.ndarray:
    """values / median over brain voxels (normal DWI brain → ≈ 1, lesions ≈ 1.3–3)."""
    inside = values[brain]
    median = float(np.median(inside)) if inside.size else 0.0
    if not median > 0:
        raise BadInputError(None, f"cannot normalise by the brain median: it is {median:g} (no brain signal)")
    return values / median


def _brain_median_clip4(values: np.ndarray, brain: np.ndarray) -> np.ndarray:
    """values / brain median, clipped to 0–4.

    Infarcts are ≈ 1.3–3× the brain median on b=1000 DWI; what lies above 4 is artefact
    (skull-base susceptibility, fat, vessels: up to ~8× on real scans). Lambda+ is roughly
    quadratic in its input and a LambdaUNet stacks eight of them, so unbounded outliers
    outside the training range can overflow in eval mode; the clip bounds the input.
    """
    return np.clip(_brain_median(values, brain), 0.0, 4.0)


def _brain_zscore(values: np.ndarray, brain: np.ndarray) -> np.ndarray:
    """(values − mean) / standard deviation over brain voxels."""
    inside = values[brain]
    std = float(inside.std()) if inside.size else 0.0
    if not std > 0:
        raise BadInputError(None, "cannot z-score normalise: the brain voxels have no spread")
    return (values - float(inside.mean())) / std


def _clip01(values: np.ndarray, brain: np.ndarray) -> np.ndarray:
    """Clipped to 0–1 (eADC is S_b/S_0; noise can push it slightly outside)."""
    return np.clip(values, 0.0, 1.0)


NORMALIZATIONS: dict[str, Normalization] = {
    "none": _none,
    "brain_median": _brain_median,
    "brain_median_clip4": _brain_median_clip4,
    "brain_zscore": _brain_zscore,
    "clip01": _clip01,
}


def normalize(method: str, values: np.ndarray, brain: np.ndarray) -> np.ndarray:
    """Apply the named normalisation to ``values`` (any shape) with the brain mask of the same shape.

    Raises:
        BadInputError: unknown method name (the manifest is wrong), or no brain signal.
    """
    if method not in NORMALIZATIONS:
        raise BadInputError("model manifest", f"unknown normalisation {method!r}; known: {', '.join(NORMALIZATIONS)}")
    return NORMALIZATIONS[method](np.asarray(values, dtype=np.float64), brain).astype(np.float32)
