"""The brain of a DWI study: where an infarct may be reported.

Clinical DWI comes with the skull on: scalp, orbits, sinuses and skull-base
susceptibility artefacts, some as bright on b≈1000 as an infarct. The model alone
cannot be trusted to know what is brain, so every study gets a brain mask and nothing
outside it is ever called infarct (:func:`LambdaSegmentLib.inference.segment_study`).

Methods (the name is recorded in the model manifest's ``brain_mask`` key):

- ``"dwi_morphology"`` (default): a classical pipeline on the b≈1000 DWI, chosen by
  measurement against the candidates in ``docs/brain-mask.md``. Brain parenchyma is bright on
  b≈1000; skull, air and CSF are dark; scalp, eyes and artefacts are thin, outside or
  detached from the brain. Steps, on a grid of about 2 mm in plane: a threshold at a
  fraction of the brain median; a seed away from the head's edge, eroded in-plane to cut
  scalp and orbit bridges, largest 3D component; geodesic regrowth inside the threshold;
  an in-plane closing bounded near the brain (sulcal CSF); per-slice hole filling
  (ventricles). Every structuring element is in-plane only: a thick-slice acquisition is
  never resampled or smoothed across its slices.
- ``"nonzero"``: the voxels where the DWI is not 0 (for skull-stripped research data).

With ``dwi_morphology``, a study that is already skull-stripped (a large exactly-zero
background around a nonzero region lying almost entirely near the brain found; see
:func:`is_skull_stripped`) passes through unchanged: its mask is its nonzero brain.
"""

from __future__ import annotations

import numpy as np
import SimpleITK as sitk
from scipy import ndimage

from ..errors import BadInputError
from ..io.foreground import brain_foreground
from ..io.volume import Volume
from .slice_axis import find_slice_axis

BRAIN_MASK_METHODS = ("dwi_morphology", "nonzero")
DEFAULT_BRAIN_MASK_METHOD = "dwi_morphology"

#: The mask is made on a grid of about this in-plane spacing (mm; integer block averages
#: of finer DWIs, never across slices), then put back on the DWI grid (nearest neighbour).
WORK_SPACING_MM = 2.0
#: Threshold, as a fraction of the median DWI over the Otsu foreground (brain tissue).
THRESHOLD_FRACTION = 0.4
#: The head (scalp included): above this fraction of the brain median.
HEAD_FRACTION = 0.15
#: The seed of the brain lies at least this deep (mm, in-plane) inside the head: scalp and skull are thicker.
HEAD_EDGE_MM = 7.0
#: In-plane Gaussian smoothing before the threshold (mm).
SMOOTHING_MM = 1.0
#: In-plane erosion radius (mm) that cuts scalp, orbits and bridges from the brain.
EROSION_MM = 7.0
#: Geodesic regrowth of the seed inside the threshold (mm, in-plane): back to the brain's edge.
REGROW_MM = EROSION_MM + HEAD_EDGE_MM
#: Slices at most this thick (mm) let the regrowth cross from slice to slice.
THIN_SLICE_MM = 3.0
#: In-plane closing radius (mm) that takes in sulcal and cisternal CSF.
CLOSING_MM = 6.0
#: The closing may add voxels only this close (mm) to the thresholded brain.
RIM_MM = 2.0

#: A DWI is taken as skull-stripped when at least this fraction of its voxels is exactly 0 ...
STRIPPED_MIN_ZERO_FRACTION = 0.25
#: ... and at least this fraction of the nonzero voxels of its central slices (the middle half
#: of the slices holding any) lies within STRIPPED_TOLERANCE_MM (in-plane) of the
#: ``dwi_morphology`` brain. Skull-on heads with a zeroed background fail it where their scalp
#: survives the zeroing: it lies beyond the skull in every slice. A dim, fat-suppressed scalp
#: zeroed with the air does not, and such a head passes as its nonzero region, the brain and a
#: thin ring (docs/brain-mask.md, "Zero backgrounds"). The end slices are left
#: out because there the morphology is least sure of the brain and a thick slab averages its
#: tapering ends: real ISLES'22 studies averaged into 6 mm slabs cover 0.88-0.92 over all
#: slices and 0.935-0.954 over the central ones (stripped synthetic studies: 0.99-1.0).
STRIPPED_MIN_COVERAGE = 0.90
STRIPPED_TOLERANCE_MM = 5.0


def brain_mask(dwi: Volume, *, method: str = DEFAULT_BRAIN_MASK_METHOD, foreground: np.ndarray | None = None) -> np.ndarray:
    """Boolean brain mask (nk, nj, ni) on the DWI grid: parenchyma, ventricles and most sulcal CSF.

    Args:
        dwi: the b≈1000 trace DWI (any scanner units; voxels in ``array[k, j, i]``),
            skull-on or skull-stripped, any orientation; spacing in mm.
        method: one of :data:`BRAIN_MASK_METHODS`.
        foreground: ``brain_foreground(dwi)`` when the caller has it (``Study.foreground``);
            used when the working grid is the DWI's own (in-plane spacing near 2 mm), which
            saves computing it again. None: computed here.

    Returns:
        bool array shaped like ``dwi.array``. For a skull-stripped DWI (see
        :func:`is_skull_stripped`) it is exactly ``dwi.array != 0``.

    Raises:
        BadInputError: an unknown method, or a DWI without positive signal.
    """
    if method not in BRAIN_MASK_METHODS:
        raise BadInputError("model manifest", f"unknown brain mask method {method!r}; known: {', '.join(BRAIN_MASK_METHODS)}")
    values = np.asarray(dwi.array, dtype=np.float32)
    nonzero = values != 0
    if not np.any(values > 0):
        raise BadInputError("<memory> (dwi)", "has no positive voxel; a brain mask needs brain signal")
    if method == "nonzero":
        return nonzero
    work = _coarse_in_plane(dwi)
    work_foreground = foreground if work is dwi and foreground is not None else brain_foreground(work)
    brain = _onto_grid(_dwi_morphology_in_box(work, *_bright_tissue(work, work_foreground)), work, dwi)
    return nonzero if is_skull_stripped(dwi, brain) else brain


def is_skull_stripped(dwi: Volume, brain: np.ndarray) -> bool:
    """Whether a DWI is already skull-stripped: a large exactly-zero background
    (:data:`STRIPPED_MIN_ZERO_FRACTION` of the voxels) and a nonzero region lying almost
    entirely (:data:`STRIPPED_MIN_COVERAGE`) within :data:`STRIPPED_TOLERANCE_MM` (in-plane)
    of the brain found by ``dwi_morphology`` (``brain``, bool (nk, nj, ni)).

    The second test keeps a skull-on scan whose scanner zeroed the air outside the head
    (common on some vendors) from passing as skull-stripped: there the nonzero region also
    holds the scalp, beyond the skull and further than that from the brain. It is taken over
    the central half of the slices that hold nonzero voxels (see :data:`STRIPPED_MIN_COVERAGE`).
    """
    nonzero = np.asarray(dwi.array) != 0
    if nonzero.mean() > 1.0 - STRIPPED_MIN_ZERO_FRACTION:
        return False
    slice_axis = find_slice_axis(dwi)
    near = in_plane_distance_mm(~brain, dwi, slice_axis) <= STRIPPED_TOLERANCE_MM
    in_plane = tuple(a for a in range(3) if a != 2 - slice_axis)
    per_slice = nonzero.sum(axis=in_plane)
    occupied = np.flatnonzero(per_slice)
    quarter = (occupied[-1] - occupied[0]) / 4
    index = np.arange(per_slice.size)
    central = (index >= occupied[0] + quarter) & (index <= occupied[-1] - quarter)
    covered = (near & nonzero).sum(axis=in_plane)
    return float(covered[central].sum()) >= STRIPPED_MIN_COVERAGE * float(per_slice[central].sum())


def brain_volume_ml(mask: np.ndarray, dwi: Volume) -> float:
    """Volume (mL) of a brain mask on the DWI grid."""
    return float(np.count_nonzero(mask)) * dwi.voxel_volume_mm3 / 1000.0


def _coarse_in_plane(dwi: Volume) -> Volume:
    """The DWI averaged over in-plane blocks of an integer number of voxels, to an in-plane
    spacing near :data:`WORK_SPACING_MM` (the model's own grid is 2 mm); slices untouched."""
    slice_axis = find_slice_axis(dwi)
    factors = [max(1, int(WORK_SPACING_MM / s + 1e-6)) for s in dwi.spacing_mm]
    factors[slice_axis] = 1
    if factors == [1, 1, 1]:
        return dwi
    image = dwi.with_array(np.asarray(dwi.array, dtype=np.float32)).to_sitk()
    return Volume.from_sitk(sitk.BinShrink(image, factors))


def _onto_grid(mask: np.ndarray, work: Volume, dwi: Volume) -> np.ndarray:
    """A mask on the working grid, nearest-neighbour onto the DWI grid (identity when they are one)."""
    if work.array.shape == dwi.array.shape:
        return mask
    reference = dwi.with_array(np.zeros(dwi.array.shape, dtype=np.uint8)).to_sitk()
    moved = sitk.Resample(work.with_array(mask.astype(np.uint8)).to_sitk(), reference, sitk.Transform(),
                          sitk.sitkNearestNeighbor, 0, sitk.sitkUInt8)
    return sitk.GetArrayFromImage(moved).astype(bool)


def _bright_tissue(dwi: Volume, foreground: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tissue, head): voxels of the in-plane smoothed DWI above THRESHOLD_FRACTION × the
    brain median, and the head: above HEAD_FRACTION × that median, largest component,
    holes filled per slice. The median is taken over ``foreground``, ``brain_foreground(dwi)``."""
    slice_axis = find_slice_axis(dwi)
    values = np.asarray(dwi.array, dtype=np.float32)
    sigma = [SMOOTHING_MM / s for s in dwi.spacing_mm][::-1]  # array axes (k, j, i)
    sigma[2 - slice_axis] = 0.0
    smooth = ndimage.gaussian_filter(values, sigma, mode="nearest")
    level = float(np.median(values[foreground])) if foreground.any() else float(values.max())
    head = _largest_component(dwi.with_array((smooth > HEAD_FRACTION * level).astype(np.uint8)).to_sitk())
    head = _fill_holes_in_plane(sitk.GetArrayFromImage(head).astype(bool), slice_axis)
    return smooth > THRESHOLD_FRACTION * level, head


def _dwi_morphology_in_box(dwi: Volume, tissue: np.ndarray, head: np.ndarray) -> np.ndarray:
    """:func:`_dwi_morphology` run on the in-plane box around the head and the bright tissue
    only, plus a margin wider than any structuring element, and put back on the whole grid
    (False outside the box); every slice is kept. The result is the whole grid's, voxel for
    voxel: nothing of either mask lies outside the box, the margin holds neither, so each
    step (erosion, regrowth, closing, the head's in-plane distance, per-slice hole filling)
    sees the same neighbourhoods; a box that reaches the field of view's edge stops there, as
    the whole grid does. Why: a 2 mm study of 256² voxels has a 512 mm field of view whose
    head fills a fifth of it, and the morphology's cost follows the voxel count."""
    slice_axis = find_slice_axis(dwi)  # the whole grid's: on a box of an isotropic grid the tie could break otherwise
    margin = max(_radius(dwi, millimetres, slice_axis)[axis] for millimetres in (EROSION_MM, CLOSING_MM, RIM_MM)
                 for axis in range(3) if axis != slice_axis) + 2
    occupied = np.argwhere(tissue | head)
    if occupied.size == 0:
        return _dwi_morphology(dwi, tissue, head, slice_axis)
    parts: list[slice] = []
    for axis in range(3):  # array axes (k, j, i)
        if axis == 2 - slice_axis:
            parts.append(slice(None))
        else:
            parts.append(slice(max(0, int(occupied[:, axis].min()) - margin), int(occupied[:, axis].max()) + margin + 1))
    box = tuple(parts)
    corner_ijk = np.asarray([part.start or 0 for part in parts][::-1], dtype=np.float64)
    cropped = Volume(tissue[box], dwi.spacing_mm, tuple(dwi.index_to_lps(corner_ijk)), dwi.direction)  # the box's own geometry
    brain = np.zeros(tissue.shape, dtype=bool)
    brain[box] = _dwi_morphology(cropped, tissue[box], head[box], slice_axis)
    return brain


def _dwi_morphology(dwi: Volume, tissue: np.ndarray, head: np.ndarray, slice_axis: int) -> np.ndarray:
    """The brain (bool, (nk, nj, ni)) from the bright tissue and the head of :func:`_bright_tissue`;
    ``slice_axis`` the ITK index of the study's slice axis."""
    image = dwi.with_array(tissue.astype(np.uint8)).to_sitk()
    # The seed: bright tissue deep inside the head (the scalp is its outer layer), eroded
    # in-plane so that thin bridges to the orbits and the scalp break, largest 3D component.
    deep = in_plane_distance_mm(head, dwi, slice_axis) >= HEAD_EDGE_MM
    seed = sitk.BinaryErode(dwi.with_array((tissue & deep).astype(np.uint8)).to_sitk(),
                            _radius(dwi, EROSION_MM, slice_axis), sitk.sitkBall)
    core = _largest_component(seed)
    if not np.any(sitk.GetArrayViewFromImage(core)):
        core = _largest_component(image)  # a tiny brain: no erosion
    # Geodesic regrowth inside the threshold, in-plane steps of one voxel: back to the
    # brain's edge, never across a dark gap (skull, CSF) to the scalp.
    steps = int(np.ceil(REGROW_MM / min(dwi.spacing_mm)))
    # Thin slices also regrow across slices (the top and bottom of the brain have no seed of
    # their own); thick ones do not: there the skull at the vertex is averaged away.
    connectivity = _in_plane_cross(slice_axis) if dwi.spacing_mm[slice_axis] > THIN_SLICE_MM else ndimage.generate_binary_structure(3, 1)
    regrown = ndimage.binary_dilation(sitk.GetArrayViewFromImage(core).astype(bool), connectivity,
                                      iterations=steps, mask=tissue)
    brain = _largest_component(dwi.with_array(regrown.astype(np.uint8)).to_sitk())
    # Sulcal and cisternal CSF: a closing, kept within RIM_MM of the brain so that it can
    # never bridge the dark skull gap to the scalp (hole filling would then take the whole head).
    closed = sitk.BinaryMorphologicalClosing(brain, _radius(dwi, CLOSING_MM, slice_axis), sitk.sitkBall)
    near = sitk.BinaryDilate(brain, _radius(dwi, RIM_MM, slice_axis), sitk.sitkBall)
    brain = sitk.Or(sitk.And(closed, near), brain)
    return _fill_holes_in_plane(sitk.GetArrayFromImage(brain).astype(bool), slice_axis)


def in_plane_distance_mm(region: np.ndarray, dwi: Volume, slice_axis: int) -> np.ndarray:
    """In-plane distance (mm) of each voxel of ``region`` to the nearest voxel outside it in
    its slice, the FOV's edge counting as outside (0 outside the region)."""
    sampling = list(dwi.spacing_mm[::-1])  # array axes (k, j, i)
    sampling[2 - slice_axis] = 1e6  # no neighbour across slices
    padded = np.pad(region, [(0, 0) if a == 2 - slice_axis else (1, 1) for a in range(3)])
    distance = ndimage.distance_transform_edt(padded, sampling=sampling)
    return distance[tuple(slice(None) if a == 2 - slice_axis else slice(1, -1) for a in range(3))]


def _radius(dwi: Volume, millimetres: float, slice_axis: int) -> list[int]:
    """Structuring-element radius per ITK axis (i, j, k): ``millimetres`` in-plane (at least a voxel), 0 across slices."""
    radius = [max(1, int(round(millimetres / s))) for s in dwi.spacing_mm]
    radius[slice_axis] = 0
    return radius


def _largest_component(image: sitk.Image) -> sitk.Image:
    labels = sitk.RelabelComponent(sitk.ConnectedComponent(image, False), sortByObjectSize=True)
    return sitk.Equal(labels, 1)


def _in_plane_cross(slice_axis: int) -> np.ndarray:
    """3x3x3 structure (array axes k, j, i) joining each voxel to its in-plane face neighbours only."""
    structure = np.zeros((3, 3, 3), dtype=bool)
    structure[1, 1, 1] = True
    for axis in range(3):
        if axis != 2 - slice_axis:
            index = [1, 1, 1]
            for offset in (0, 2):
                index[axis] = offset
                structure[tuple(index)] = True
    return structure


def _fill_holes_in_plane(mask: np.ndarray, slice_axis: int) -> np.ndarray:
    """Holes filled slice by slice (no connectivity across slices)."""
    return ndimage.binary_fill_holes(mask, structure=_in_plane_cross(slice_axis))
