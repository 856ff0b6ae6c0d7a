"""The through-plane (slice) axis of an acquisition, and its plane, from the geometry alone.

Rule: the slice axis is the ITK axis (0 = i, 1 = j, 2 = k) with the largest spacing;
ties (within 0.1 %) go to k, the axis along which scanners and converters store the
acquired slices; a tie that excludes k goes to the tied axis with the fewest voxels.
The plane is named from the LPS direction of the slice axis: along L–R sagittal,
P–A coronal, S–I axial, and "oblique" when it is more than
:data:`OBLIQUE_THRESHOLD_DEGREES` away from all three.
"""

from __future__ import annotations

import numpy as np

from ..io.volume import Volume

SPACING_TIE_TOLERANCE = 1e-3
OBLIQUE_THRESHOLD_DEGREES = 10.0
PLANE_OF_NORMAL_AXIS = ("sagittal", "coronal", "axial")  # normal along L, P, S


def find_slice_axis(volume: Volume) -> int:
    """ITK index of the slice axis: 0 (i), 1 (j) or 2 (k)."""
    spacing = np.asarray(volume.spacing_mm)
    tied = [axis for axis in range(3) if spacing[axis] >= spacing.max() * (1 - SPACING_TIE_TOLERANCE)]
    if 2 in tied:
        return 2
    sizes = volume.size_ijk
    return min(tied, key=lambda axis: (sizes[axis], -axis))


def slice_normal_lps(volume: Volume, slice_axis: int | None = None) -> np.ndarray:
    """Unit LPS vector along the slice axis (direction of increasing slice index)."""
    axis = find_slice_axis(volume) if slice_axis is None else slice_axis
    return volume.direction[:, axis] / np.linalg.norm(volume.direction[:, axis])


def obliquity_degrees(volume: Volume, slice_axis: int | None = None) -> float:
    """Angle (degrees) between the slice axis and the nearest patient axis (L, P or S)."""
    normal = slice_normal_lps(volume, slice_axis)
    return float(np.degrees(np.arccos(np.clip(np.abs(normal).max(), -1.0, 1.0))))


def acquisition_plane(volume: Volume, slice_axis: int | None = None) -> str:
    """ "axial", "sagittal", "coronal" or "oblique" (tilted more than the threshold)."""
    normal = slice_normal_lps(volume, slice_axis)
    if obliquity_degrees(volume, slice_axis) > OBLIQUE_THRESHOLD_DEGREES:
        return "oblique"
    return PLANE_OF_NORMAL_AXIS[int(np.argmax(np.abs(normal)))]
