"""How the scanner sees the head: slice geometry, slab profile, bias field, noise, ADC units.

Thick slices are simulated physically: each slice is the weighted mean of thin samples
across its slab profile (never a resampling of a finished volume across the slice axis),
and the ADC is computed from the noisy slab-averaged b0 and b1000 signals, so partial
volume and low-SNR noise reach the ADC map the way they do on a scanner.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from LambdaSegmentLib.io.units import ADC_UNIT_TO_CANONICAL

#: The units a synthetic ADC may be stored in (the library's names).
ADC_UNITS = tuple(ADC_UNIT_TO_CANONICAL)


@dataclass(frozen=True)
class SliceGeometry:
    """The acquisition grid of one synthetic study (ITK conventions, LPS mm).

    Attributes:
        size_ijk: voxels along (i, j, k); k is the slice axis.
        spacing_mm: (in-plane, in-plane, slice-centre distance = thickness + gap).
        thickness_mm: slab thickness (FWHM of the slab profile).
        origin_mm: LPS position of voxel (0, 0, 0).
        direction: 3x3, columns are the LPS unit vectors of i, j, k.
        slab_offsets_mm: thin-sample offsets along k across one slab, shape (s,).
        slab_weights: their weights (sum 1), shape (s,).
    """

    size_ijk: tuple[int, int, int]
    spacing_mm: tuple[float, float, float]
    thickness_mm: float
    origin_mm: tuple[float, float, float]
    direction: np.ndarray
    slab_offsets_mm: np.ndarray
    slab_weights: np.ndarray

    def slice_points_lps(self, k: int) -> np.ndarray:
        """LPS mm of the thin samples of slice ``k``: (s, nj, ni, 3)."""
        ni, nj, _ = self.size_ijk
        si, sj, sk = self.spacing_mm
        jj, ii = np.meshgrid(np.arange(nj, dtype=np.float32) * sj, np.arange(ni, dtype=np.float32) * si, indexing="ij")
        in_plane = ii[..., None] * self.direction[:, 0] + jj[..., None] * self.direction[:, 1]  # (nj, ni, 3)
        depth = k * sk + self.slab_offsets_mm  # (s,)
        points = np.asarray(self.origin_mm, dtype=np.float32) + in_plane[None] + depth[:, None, None, None] * self.direction[:, 2]
        return points.astype(np.float32)


def rotation_matrix(angles_rad: np.ndarray) -> np.ndarray:
    """Rotation about x, then y, then z by the three angles (radians)."""
    ax, ay, az = angles_rad
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
    rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
    return rz @ ry @ rx


def make_geometry(
    rng: np.random.Generator,
    centre_lps: np.ndarray,
    in_plane_mm: float,
    thickness_mm: float,
    gap_mm: float,
    tilt_deg: float,
    fov_mm: float,
    coverage_mm: float,
    flip_j: bool,
) -> SliceGeometry:
    """An axial (``tilt_deg`` = 0) or oblique slice stack centred near ``centre_lps``."""
    # oblique: tilted about the left-right axis (AC-PC-like), with a little roll and yaw
    angles = np.deg2rad([tilt_deg * rng.choice([-1.0, 1.0]), rng.uniform(-1, 1) * tilt_deg / 4, rng.uniform(-1, 1) * tilt_deg / 4])
    direction = rotation_matrix(angles)
    if flip_j:  # many NIfTI conversions store rows posterior-to-anterior
        direction[:, 1] *= -1.0
    step = thickness_mm + gap_mm
    n_in_plane = int(round(fov_mm / in_plane_mm))
    n_slices = max(1, int(round(coverage_mm / step)))
    size = (n_in_plane, n_in_plane, n_slices)
    spacing = np.asarray([in_plane_mm, in_plane_mm, step])
    origin = centre_lps - direction @ (spacing * (np.asarray(size) - 1) / 2.0)
    # slab profile: a smoothed rectangle of FWHM = thickness, sampled every <= 1.5 mm
    n_samples = max(2, int(np.ceil(1.3 * thickness_mm / 1.5)))
    offsets = np.linspace(-0.65, 0.65, n_samples) * thickness_mm
    sharpness = rng.uniform(2.0, 6.0)
    weights = np.exp(-np.log(2.0) * np.abs(2.0 * offsets / thickness_mm) ** sharpness)
    return SliceGeometry(
        size_ijk=size,
        spacing_mm=tuple(float(s) for s in spacing),
        thickness_mm=float(thickness_mm),
        origin_mm=tuple(float(o) for o in origin),
        direction=direction,
        slab_offsets_mm=offsets.astype(np.float32),
        slab_weights=(weights / weights.sum()).astype(np.float32),
    )


def rician(rng: np.random.Generator, signal: np.ndarray, sigma: float) -> np.ndarray:
    """Magnitude of the signal plus complex Gaussian noise of standard deviation ``sigma``."""
    real = signal + rng.normal(0.0, sigma, signal.shape).astype(np.float32)
    imaginary = rng.normal(0.0, sigma, signal.shape).astype(np.float32)
    return np.sqrt(real * real + imaginary * imaginary)
