"""A simple geometric stroke phantom for plumbing checks (tests, the demo's fallback study).

An ellipsoidal "brain" with CSF-filled "ventricles" (dark on DWI, ADC 3 x 10^-3 mm²/s)
and one spherical infarct in the patient's left hemisphere: bright on DWI, low ADC. It exercises geometry, units and file handling; it is not
realistic anatomy (the project's realistic generator is ``LambdaSegmentLib.synthesis``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from LambdaSegmentLib.io import Volume

BRAIN_ADC_MM2_PER_S = 0.8e-3
INFARCT_ADC_MM2_PER_S = 0.45e-3
CSF_ADC_MM2_PER_S = 3.0e-3


@dataclass(frozen=True)
class Phantom:
    """DWI (b=1000, arbitrary units), ADC (mm²/s) and the true infarct mask, on one grid."""

    dwi: Volume
    adc: Volume
    mask: Volume


def rotation_about_lps(angles_deg: tuple[float, float, float]) -> np.ndarray:
    """Rotation matrix: about x (L), then y (P), then z (S), angles in degrees."""
    ax, ay, az = np.deg2rad(angles_deg)
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
    rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
    return rz @ ry @ rx


def make_phantom(
    *,
    size_ijk: tuple[int, int, int] = (48, 56, 14),
    spacing_mm: tuple[float, float, float] = (3.0, 3.0, 6.0),
    tilt_deg: tuple[float, float, float] = (0.0, 0.0, 0.0),
    infarct_radius_mm: float = 14.0,
    seed: int = 0,
) -> Phantom:
    """A phantom on the grid given by size, spacing and a tilt of the axial grid (degrees about L, P, S).

    The grid is centred on LPS (0, 0, 0); the brain is an ellipsoid of semi-axes 65 x 80 x
    60 mm (L, P, S) clipped to the field of view (leave background around it: brain
    detection needs some); CSF an ellipsoid of 12 x 30 x 15 mm at (0, 5, 5); the infarct
    is centred at x = +30 mm (patient left), y = -10 mm, z = 0.
    """
    rng = np.random.default_rng(seed)
    direction = rotation_about_lps(tilt_deg)
    spacing = np.asarray(spacing_mm, dtype=np.float64)
    size = np.asarray(size_ijk)
    origin = -direction @ (spacing * (size - 1) / 2)
    k, j, i = np.meshgrid(*(np.arange(n) for n in size[::-1]), indexing="ij")
    ijk = np.stack([i, j, k], axis=-1).astype(np.float64)
    lps = origin + (ijk * spacing) @ direction.T  # (nk, nj, ni, 3)
    brain = ((lps / np.array([65.0, 80.0, 60.0])) ** 2).sum(-1) <= 1
    infarct = brain & (np.linalg.norm(lps - np.array([30.0, -10.0, 0.0]), axis=-1) <= infarct_radius_mm)
    csf = (((lps - np.array([0.0, 5.0, 5.0])) / np.array([12.0, 30.0, 15.0])) ** 2).sum(-1) <= 1
    dwi = np.where(brain, 400.0, 0.0) + np.where(infarct, 450.0, 0.0) - np.where(csf, 300.0, 0.0)
    dwi = np.abs(dwi + rng.normal(0, 12, dwi.shape)).astype(np.float32)
    adc = np.where(brain, BRAIN_ADC_MM2_PER_S, 0.0) - np.where(infarct, BRAIN_ADC_MM2_PER_S - INFARCT_ADC_MM2_PER_S, 0.0)
    adc = np.where(csf, CSF_ADC_MM2_PER_S, adc)
    adc = np.clip(adc + np.where(brain, rng.normal(0, 0.03e-3, adc.shape), 0), 0, None).astype(np.float32)
    geometry = dict(spacing_mm=tuple(spacing), origin_mm=tuple(origin), direction=direction)
    return Phantom(Volume(dwi, **geometry), Volume(adc, **geometry), Volume(infarct.astype(np.uint8), **geometry))
