"""Lesion volumes, connected lesions, per-slice areas and hemisphere volumes of a mask.

The single source of these numbers for the CLI, the reports and the Slicer module.
A mask is a :class:`~LambdaSegmentLib.io.Volume` whose non-zero voxels are lesion.
Volumes are counted on the mask's own grid, as 3D Slicer's Segment Statistics does:
mL = voxel count × voxel volume (mm³) / 1000.

Connectivity: lesions are connected components with **full connectivity** (26
neighbours in 3D: voxels touching by a face, an edge or a corner belong to one lesion),
SimpleITK's ``ConnectedComponent(fullyConnected=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import SimpleITK as sitk

from .io.volume import Volume
from .preprocessing.slice_axis import find_slice_axis

MM3_PER_ML = 1000.0


@dataclass(frozen=True)
class Lesion:
    """One connected lesion.

    Attributes:
        label: 1 for the largest lesion, 2 for the next, … (ties keep scan order).
        voxels: number of voxels.
        volume_ml: volume in mL.
        centroid_lps: centre of mass of its voxel centres, LPS mm.
    """

    label: int
    voxels: int
    volume_ml: float
    centroid_lps: tuple[float, float, float]


def _binary(mask: Volume) -> np.ndarray:
    return np.asarray(mask.array) != 0


def lesion_volume_ml(mask: Volume) -> float:
    """Total lesion volume in mL (non-zero voxels × voxel volume / 1000)."""
    return int(_binary(mask).sum()) * mask.voxel_volume_mm3 / MM3_PER_ML


def connected_lesions(mask: Volume) -> list[Lesion]:
    """The connected lesions (full connectivity), largest first."""
    binary = mask.with_array(_binary(mask).astype(np.uint8)).to_sitk()
    labels = sitk.RelabelComponent(sitk.ConnectedComponent(binary, True), sortByObjectSize=True)
    statistics = sitk.LabelShapeStatisticsImageFilter()
    statistics.SetComputePerimeter(False)  # unused here, and the costliest statistic on large masks
    statistics.Execute(labels)
    lesions = []
    for label in sorted(statistics.GetLabels()):
        voxels = int(statistics.GetNumberOfPixels(label))
        lesions.append(
            Lesion(
                label=int(label),
                voxels=voxels,
                volume_ml=voxels * mask.voxel_volume_mm3 / MM3_PER_ML,
                centroid_lps=tuple(float(c) for c in statistics.GetCentroid(label)),
            )
        )
    return lesions


def slice_areas_mm2(mask: Volume, slice_axis: int | None = None) -> list[float]:
    """Lesion area (mm²) in each slice, in slice-index order along ``slice_axis``.

    Args:
        slice_axis: ITK axis (0 i, 1 j, 2 k); default the acquisition's slice axis
            (:func:`LambdaSegmentLib.preprocessing.find_slice_axis`).
    """
    axis = find_slice_axis(mask) if slice_axis is None else int(slice_axis)
    in_plane_area_mm2 = float(np.prod([s for a, s in enumerate(mask.spacing_mm) if a != axis]))
    numpy_axis = 2 - axis
    other_axes = tuple(a for a in range(3) if a != numpy_axis)
    counts = _binary(mask).sum(axis=other_axes)
    return [int(count) * in_plane_area_mm2 for count in counts]


def hemisphere_volumes_ml(mask: Volume, *, midline_x_mm: float | None = None) -> dict[str, float]:
    """Lesion volume (mL) left and right of a sagittal plane x = ``midline_x_mm`` (LPS).

    LPS x grows toward the patient's left. Default midline: the x of the centre of the
    image's field of view (scans are planned centred on the head; no brain-midline
    detection is attempted). A voxel whose centre lies exactly on the plane counts half
    to each side.
    """
    binary = _binary(mask)
    if midline_x_mm is None:
        centre_index = (np.asarray(mask.size_ijk, dtype=np.float64) - 1) / 2
        midline_x_mm = float(mask.index_to_lps(centre_index)[0])
    k, j, i = np.nonzero(binary)
    x = mask.index_to_lps(np.stack([i, j, k], axis=-1))[:, 0] if k.size else np.zeros(0)
    voxel_ml = mask.voxel_volume_mm3 / MM3_PER_ML
    on_plane = np.isclose(x, midline_x_mm, atol=1e-6)
    left = float(np.sum(x[~on_plane] > midline_x_mm) + 0.5 * np.sum(on_plane))
    right = float(np.sum(x[~on_plane] < midline_x_mm) + 0.5 * np.sum(on_plane))
    return {"left": left * voxel_ml, "right": right * voxel_ml}
