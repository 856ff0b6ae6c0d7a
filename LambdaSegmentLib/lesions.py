"""Lesion volumes, connected lesions, the per-lesion review table, per-slice areas and
hemisphere volumes of a mask.

The single source of these numbers for the CLI, the reports and the Slicer module.
A mask is a :class:`~LambdaSegmentLib.io.Volume` whose non-zero voxels are lesion.
Volumes are counted on the mask's own grid, as 3D Slicer's Segment Statistics does:
mL = voxel count × voxel volume (mm³) / 1000.

Connectivity: lesions are connected components with **full connectivity** (26
neighbours in 3D: voxels touching by a face, an edge or a corner belong to one lesion),
SimpleITK's ``ConnectedComponent(fullyConnected=True)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import SimpleITK as sitk
from scipy import ndimage

from .errors import BadInputError
from .io.grid import grid_differences
from .io.units import ADC_CORE_THRESHOLD
from .io.volume import Volume
from .preprocessing.slice_axis import find_slice_axis

MM3_PER_ML = 1000.0
#: A lesion is "left" or "right" when at least this fraction of its voxels lies on that
#: side of the midline plane, otherwise "both".
HEMISPHERE_MAJORITY = 0.9


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


def _labelled(mask: Volume) -> sitk.Image:
    """Connected lesions as a label image (full connectivity), 1 = largest."""
    binary = mask.with_array(_binary(mask).astype(np.uint8)).to_sitk()
    return sitk.RelabelComponent(sitk.ConnectedComponent(binary, True), sortByObjectSize=True)


def lesion_labels(mask: Volume) -> np.ndarray:
    """[k, j, i] int array: 0 outside, else the lesion's ``label`` (as in ``connected_lesions``
    and ``lesion_table``)."""
    return sitk.GetArrayFromImage(_labelled(mask))


def connected_lesions(mask: Volume) -> list[Lesion]:
    """The connected lesions (full connectivity), largest first."""
    return _lesions_of(mask, _labelled(mask))


def _lesions_of(mask: Volume, labels: sitk.Image) -> list[Lesion]:
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


def _midline_x_mm(mask: Volume) -> float:
    """LPS x of the centre of the image's field of view (the default midline)."""
    centre_index = (np.asarray(mask.size_ijk, dtype=np.float64) - 1) / 2
    return float(mask.index_to_lps(centre_index)[0])


def _voxel_indices(selected: np.ndarray, box: tuple[slice, ...] | None = None) -> np.ndarray:
    """(n, 3) i, j, k indices of the true voxels of ``selected`` ([k, j, i]; inside ``box`` when given)."""
    k, j, i = np.nonzero(selected)
    if box is not None:
        k, j, i = k + box[0].start, j + box[1].start, i + box[2].start
    return np.stack([i, j, k], axis=-1)


def _side_counts(mask: Volume, ijk: np.ndarray, midline_x_mm: float) -> tuple[float, float]:
    """(left, right) counts of the voxels ``ijk`` (n, 3); a voxel centred on the plane counts
    half to each side."""
    x = mask.index_to_lps(ijk)[:, 0] if len(ijk) else np.zeros(0)
    on_plane = np.isclose(x, midline_x_mm, atol=1e-6)
    left = float(np.sum(x[~on_plane] > midline_x_mm) + 0.5 * np.sum(on_plane))
    right = float(np.sum(x[~on_plane] < midline_x_mm) + 0.5 * np.sum(on_plane))
    return left, right


def hemisphere_volumes_ml(mask: Volume, *, midline_x_mm: float | None = None) -> dict[str, float]:
    """Lesion volume (mL) left and right of a sagittal plane x = ``midline_x_mm`` (LPS).

    LPS x grows toward the patient's left. Default midline: the x of the centre of the
    image's field of view (scans are planned centred on the head; no brain-midline
    detection is attempted). A voxel whose centre lies exactly on the plane counts half
    to each side.
    """
    midline = _midline_x_mm(mask) if midline_x_mm is None else float(midline_x_mm)
    left, right = _side_counts(mask, _voxel_indices(_binary(mask)), midline)
    voxel_ml = mask.voxel_volume_mm3 / MM3_PER_ML
    return {"left": left * voxel_ml, "right": right * voxel_ml}


@dataclass(frozen=True)
class LesionRow:
    """One row of the per-lesion review table (``lesion_table``).

    Attributes:
        label: 1 for the largest lesion, 2 for the next, … (as ``connected_lesions``).
        voxels: number of voxels.
        volume_ml: volume in mL (voxels × voxel volume / 1000).
        first_slice, last_slice: first and last slice index (0-based, as stored) holding
            the lesion, along the acquisition's slice axis.
        centroid_lps_mm, centroid_ras_mm: centre of mass of its voxel centres, in LPS and
            in RAS (x, y negated) millimetres of the scanner's patient coordinates.
        jump_lps_mm: centre of the lesion voxel nearest the centroid (LPS mm): a point that
            is inside the lesion and on an acquired slice, where viewers are centred.
        hemisphere: "left", "right" (≥ ``HEMISPHERE_MAJORITY`` of its voxels on that side
            of the field-of-view-centre midline, as ``hemisphere_volumes_ml``) or "both".
        mean_probability, max_probability: the model's probability averaged / maximal over
            the lesion's voxels (None without a probability map). Not a calibrated risk.
        mean_adc_1e6_mm2_s: mean ADC over the lesion's voxels with ADC data (ADC > 0), in
            10⁻⁶ mm²/s (None without an ADC map or without ADC data in the lesion).
        adc_core_ml: volume (mL) of the lesion's voxels with 0 < ADC < 620 × 10⁻⁶ mm²/s
            (None without an ADC map). Never more than ``volume_ml``.
        low_confidence: ``mean_probability`` below the model's low-confidence threshold
            (None when there is no threshold or no probability map).
    """

    label: int
    voxels: int
    volume_ml: float
    first_slice: int
    last_slice: int
    centroid_lps_mm: tuple[float, float, float]
    centroid_ras_mm: tuple[float, float, float]
    jump_lps_mm: tuple[float, float, float]
    hemisphere: str
    mean_probability: float | None
    max_probability: float | None
    mean_adc_1e6_mm2_s: float | None
    adc_core_ml: float | None
    low_confidence: bool | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples become lists)."""
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}


def _on_mask_grid(mask: Volume, other: Volume | None, role: str) -> np.ndarray | None:
    if other is None:
        return None
    differences = grid_differences(mask, other)
    if differences:
        raise BadInputError(role, f"is not on the mask's grid: {'; '.join(differences)}")
    return np.asarray(other.array, dtype=np.float64)


def lesion_table(
    mask: Volume,
    *,
    probability: Volume | None = None,
    adc: Volume | None = None,
    low_confidence_below: float | None = None,
) -> list[LesionRow]:
    """The per-lesion review table of ``mask``, largest lesion first.

    Args:
        mask: non-zero = lesion.
        probability: the model's probability (0–1) on the mask's grid, or None.
        adc: ADC in the library's canonical 10⁻³ mm²/s (``Study.adc``) on the mask's grid,
            0 (or less) where there is no ADC data; or None.
        low_confidence_below: a lesion whose ``mean_probability`` is below this is marked
            ``low_confidence`` (the model manifest's ``low_confidence_mean_probability``).

    Raises:
        BadInputError: the probability or ADC map is on another grid.
    """
    probabilities = _on_mask_grid(mask, probability, "probability map")
    adc_values = _on_mask_grid(mask, adc, "ADC map")
    labels_image = _labelled(mask)
    lesions = _lesions_of(mask, labels_image)
    if not lesions:
        return []
    labels = sitk.GetArrayViewFromImage(labels_image)  # [k, j, i]
    index = np.arange(1, len(lesions) + 1)
    numpy_slice_axis = 2 - find_slice_axis(mask)
    boxes = ndimage.find_objects(labels)
    midline = _midline_x_mm(mask)
    voxel_ml = mask.voxel_volume_mm3 / MM3_PER_ML
    if probabilities is not None:
        inside = labels > 0  # the lesions' voxels only: ndimage sorts whatever it is given for the maximum
        mean_probability = ndimage.mean(probabilities[inside], labels[inside], index)
        max_probability = ndimage.maximum(probabilities[inside], labels[inside], index)
    if adc_values is not None:
        has_adc = adc_values > 0
        adc_voxels = np.bincount(labels[has_adc], minlength=len(index) + 1)[1:]
        adc_sums = np.bincount(labels[has_adc], weights=adc_values[has_adc], minlength=len(index) + 1)[1:]
        core = has_adc & (adc_values < ADC_CORE_THRESHOLD)
        core_voxels = np.bincount(labels[core], minlength=len(index) + 1)[1:]
    rows = []
    for n, lesion in enumerate(lesions):
        box = boxes[n]
        ijk = _voxel_indices(labels[box] == lesion.label, box)
        left, right = _side_counts(mask, ijk, midline)
        side = "left" if left >= HEMISPHERE_MAJORITY * lesion.voxels else "right" if right >= HEMISPHERE_MAJORITY * lesion.voxels else "both"
        mean_p = float(mean_probability[n]) if probabilities is not None else None
        rows.append(
            LesionRow(
                label=lesion.label,
                voxels=lesion.voxels,
                volume_ml=lesion.volume_ml,
                first_slice=int(box[numpy_slice_axis].start),
                last_slice=int(box[numpy_slice_axis].stop - 1),
                centroid_lps_mm=lesion.centroid_lps,
                centroid_ras_mm=(-lesion.centroid_lps[0], -lesion.centroid_lps[1], lesion.centroid_lps[2]),
                jump_lps_mm=_nearest_voxel_centre(mask, ijk, np.asarray(lesion.centroid_lps)),
                hemisphere=side,
                mean_probability=mean_p,
                max_probability=float(max_probability[n]) if probabilities is not None else None,
                mean_adc_1e6_mm2_s=(
                    float(adc_sums[n] / adc_voxels[n] * 1000.0) if adc_values is not None and adc_voxels[n] else None
                ),
                adc_core_ml=float(core_voxels[n] * voxel_ml) if adc_values is not None else None,
                low_confidence=(
                    bool(mean_p < low_confidence_below) if mean_p is not None and low_confidence_below is not None else None
                ),
            )
        )
    return rows


def _nearest_voxel_centre(mask: Volume, ijk: np.ndarray, point_lps: np.ndarray) -> tuple[float, float, float]:
    positions = mask.index_to_lps(ijk)
    nearest = positions[int(np.argmin(np.linalg.norm(positions - point_lps, axis=-1)))]
    return tuple(float(c) for c in nearest)


def total_adc_core_ml(table: list[LesionRow]) -> float | None:
    """Sum of the lesions' ``adc_core_ml`` (None when the table was made without an ADC map)."""
    if any(row.adc_core_ml is None for row in table):
        return None
    return float(sum(row.adc_core_ml for row in table))
