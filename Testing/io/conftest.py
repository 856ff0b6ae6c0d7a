"""Small synthetic studies for the I/O tests, built in memory (no data files)."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.io import Volume


def _rotation(axis: tuple[float, float, float], degrees: float) -> np.ndarray:
    """Proper rotation matrix about ``axis`` (Rodrigues)."""
    axis_array = np.asarray(axis, dtype=np.float64)
    x, y, z = axis_array / np.linalg.norm(axis_array)
    angle = np.radians(degrees)
    cross = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + np.sin(angle) * cross + (1 - np.cos(angle)) * cross @ cross


def _head_phantom(
    shape_kji: tuple[int, int, int] = (10, 40, 36),
    spacing_mm: tuple[float, float, float] = (0.9, 0.9, 6.0),
    direction: np.ndarray | None = None,
    origin_mm: tuple[float, float, float] = (-20.0, -15.0, 10.0),
    seed: int = 0,
) -> tuple[Volume, Volume, Volume]:
    """(DWI b1000, ADC in 10⁻³ mm²/s, lesion mask) of an ellipsoidal "brain".

    Parenchyma ADC 0.8, a CSF blob ADC 3.0 (dark on DWI), a lesion ADC 0.5 (bright on
    DWI); 0 outside the brain, as scanners store masked maps.
    """
    rng = np.random.default_rng(seed)
    k, j, i = np.meshgrid(*[np.linspace(-1, 1, n) for n in shape_kji], indexing="ij")
    brain = (i**2 + j**2 + k**2) < 0.8
    csf = ((i - 0.2) ** 2 + j**2) < 0.05
    lesion = brain & ~csf & (((i + 0.4) ** 2 + (j - 0.2) ** 2 + (k * 0.5) ** 2) < 0.03)
    adc = np.where(brain, 0.8, 0.0) + rng.normal(0, 0.03, shape_kji) * brain
    adc[brain & csf] = 3.0
    adc[lesion] = 0.5
    dwi = np.where(brain, 200.0 * np.exp(-1.0 * (adc - 0.8)), 0.0) + rng.normal(0, 2, shape_kji) * brain
    dwi[lesion] = 400.0
    direction = np.eye(3) if direction is None else direction
    geometry = dict(spacing_mm=spacing_mm, origin_mm=origin_mm, direction=direction)
    return (
        Volume(dwi.astype(np.float32), **geometry),
        Volume(adc.astype(np.float32), **geometry),
        Volume(lesion.astype(np.uint8), **geometry),
    )


@pytest.fixture
def head_phantom():
    """Factory: ``head_phantom(shape_kji=..., spacing_mm=..., direction=..., origin_mm=..., seed=...)``."""
    return _head_phantom


@pytest.fixture
def rotation():
    """Factory: ``rotation(axis, degrees)`` → 3×3 proper rotation matrix."""
    return _rotation
