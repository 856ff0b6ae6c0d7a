"""Comparing image grids and resampling one image onto another's grid.

Two images are on the same grid when size, spacing, origin and direction agree within
a tolerance that absorbs float32 storage (NIfTI) but no real shift: spacing to 0.1 %,
origin to 1 % of the smallest voxel size, direction cosines to 0.001 (≈ 0.06°).
"""

from __future__ import annotations

import itertools

import numpy as np
import SimpleITK as sitk

from .volume import Volume

SPACING_RELATIVE_TOLERANCE = 1e-3
ORIGIN_TOLERANCE_VOXELS = 0.01
DIRECTION_TOLERANCE = 1e-3


def grid_differences(reference: Volume, other: Volume) -> list[str]:
    """How ``other``'s grid differs from ``reference``'s, as phrases; empty when they match."""
    differences = []
    if reference.size_ijk != other.size_ijk:
        differences.append(f"size {other.size_ijk} vs {reference.size_ijk}")
    spacing_ref, spacing_other = np.asarray(reference.spacing_mm), np.asarray(other.spacing_mm)
    if not np.allclose(spacing_other, spacing_ref, rtol=SPACING_RELATIVE_TOLERANCE, atol=0):
        differences.append(f"spacing {_fmt(spacing_other)} mm vs {_fmt(spacing_ref)} mm")
    shift = float(np.linalg.norm(np.asarray(other.origin_mm) - np.asarray(reference.origin_mm)))
    if shift > ORIGIN_TOLERANCE_VOXELS * float(spacing_ref.min()):
        differences.append(f"origin shifted by {shift:.3g} mm")
    if not np.allclose(other.direction, reference.direction, atol=DIRECTION_TOLERANCE):
        cosines = np.clip(np.sum(other.direction * reference.direction, axis=0), -1.0, 1.0)
        angle = float(np.degrees(np.arccos(cosines)).max())
        differences.append(f"axis directions differ by up to {angle:.3g}°")
    return differences


def same_grid(reference: Volume, other: Volume) -> bool:
    """Whether the two grids match within the tolerances of this module."""
    return not grid_differences(reference, other)


def physical_bounds(volume: Volume) -> tuple[np.ndarray, np.ndarray]:
    """Axis-aligned LPS bounding box (mm) of the voxel boxes' corners: (lower, upper)."""
    corners = np.array(list(itertools.product(*[(-0.5, n - 0.5) for n in volume.size_ijk])))
    points = volume.index_to_lps(corners)
    return points.min(axis=0), points.max(axis=0)


def overlap(reference: Volume, other: Volume) -> bool:
    """Whether the physical extents of the two volumes intersect."""
    low_a, high_a = physical_bounds(reference)
    low_b, high_b = physical_bounds(other)
    return bool(np.all(np.maximum(low_a, low_b) < np.minimum(high_a, high_b)))


def resample_onto(reference: Volume, moving: Volume, *, interpolation: str = "linear", default_value: float = 0.0) -> Volume:
    """``moving`` resampled (SimpleITK, identity transform) onto exactly ``reference``'s grid.

    Args:
        interpolation: "linear" for images, "nearest" for label maps.
        default_value: value where the reference grid lies outside ``moving``.

    Returns:
        A float32 Volume (linear) or one of ``moving``'s type (nearest) on the reference grid.
    """
    interpolator = {"linear": sitk.sitkLinear, "nearest": sitk.sitkNearestNeighbor}[interpolation]
    moving_image = moving.to_sitk()
    if interpolation == "linear":
        moving_image = sitk.Cast(moving_image, sitk.sitkFloat32)
    resampled = sitk.Resample(moving_image, reference.to_sitk(), sitk.Transform(), interpolator, default_value)
    # Copy the reference geometry bit for bit (Resample already uses it; this guards against rounding).
    return reference.with_array(sitk.GetArrayFromImage(resampled))


def _fmt(values: np.ndarray) -> str:
    return "(" + ", ".join(f"{float(v):.4g}" for v in values) + ")"
