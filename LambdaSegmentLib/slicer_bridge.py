"""Between 3D Slicer's MRML nodes and the library's ``Volume``: geometry, arrays, segment volumes.

The single place where Slicer's RAS world meets the library's LPS world. A volume node
stores its geometry as spacing, an origin in RAS and the RAS directions of the i, j, k
axes (columns of ``IJKToRAS``); ``Volume`` stores the same in LPS. RAS and LPS differ by
the sign of the first two coordinates, so ``flip_ras_lps`` (its own inverse) converts
both ways and both directions are bit-exact: spacing is copied, never recomputed from
matrix column norms.

Voxel arrays keep the same [k, j, i] order on both sides (VTK's point order, i fastest,
equals SimpleITK's NumPy order).

Nothing here imports ``slicer`` or ``vtk`` when the library is imported: the headless
library must not depend on Slicer. The functions import them when called, so they work
inside Slicer and under the ``slicer-core`` wheel used by the tests.
"""

from __future__ import annotations

import numpy as np

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume

RAS_LPS_FLIP = np.diag([-1.0, -1.0, 1.0])
"""Maps RAS to LPS coordinates and back (an involution)."""

def flip_ras_lps(origin: np.ndarray, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Origin (3,) and direction matrix (3, 3; columns = i, j, k axes) from RAS to LPS, or back.

    Negating the first two rows is exact in floating point, so a round trip returns the
    very same numbers.
    """
    return RAS_LPS_FLIP @ np.asarray(origin, dtype=np.float64), RAS_LPS_FLIP @ np.asarray(direction, dtype=np.float64)


def _node_name(node: object) -> str:
    return node.GetName() if node is not None and hasattr(node, "GetName") else "<no node>"


def volume_from_node(volume_node: object, *, role: str = "volume") -> Volume:
    """A ``Volume`` (LPS, array [k, j, i], a copy) from a 3D scalar volume node.

    Raises BadInputError (a ValueError) naming the node when it is missing, has no voxels,
    holds more than one value per voxel (4D, vector or multi-b-value DWI data) or sits
    under a transform (whose effect the voxel grid would silently lose).
    """
    from vtk.util import numpy_support

    if volume_node is None:
        raise BadInputError(role, "no volume selected")
    name = _node_name(volume_node)
    if not volume_node.IsA("vtkMRMLScalarVolumeNode") or volume_node.IsA("vtkMRMLLabelMapVolumeNode"):
        raise BadInputError(name, f"the {role} must be a scalar volume, not a {volume_node.GetClassName()}")
    image = volume_node.GetImageData()
    if image is None or image.GetPointData() is None or image.GetPointData().GetScalars() is None:
        raise BadInputError(name, f"the {role} has no voxel data")
    components = image.GetNumberOfScalarComponents()
    if components != 1:
        raise BadInputError(
            name,
            f"the {role} has {components} values per voxel (a 4D, vector or multi-b-value volume); "
            "choose a single 3D image (the b=1000 trace for DWI)",
        )
    size_ijk = image.GetDimensions()
    if min(size_ijk) < 1:
        raise BadInputError(name, f"the {role} has no voxels (size {size_ijk})")
    if volume_node.GetParentTransformNode() is not None:
        raise BadInputError(
            name,
            f"the {role} is under the transform '{volume_node.GetParentTransformNode().GetName()}'; "
            "harden it (Data module, right-click > Harden transform) or remove it first",
        )
    scalars = numpy_support.vtk_to_numpy(image.GetPointData().GetScalars())
    array = np.array(scalars, copy=True).reshape(size_ijk[::-1])  # (k, j, i)
    return node_grid(volume_node).with_array(array)


def node_grid(volume_node: object) -> Volume:
    """The voxel grid of a volume node as a ``Volume`` whose array is a zero-copy stand-in (no voxels read).

    For geometry checks only; its values are all 0.
    """
    import vtk

    image = volume_node.GetImageData()
    size_ijk = image.GetDimensions() if image is not None else (0, 0, 0)
    direction_matrix = vtk.vtkMatrix4x4()
    volume_node.GetIJKToRASDirectionMatrix(direction_matrix)
    direction_ras = np.array([[direction_matrix.GetElement(r, c) for c in range(3)] for r in range(3)])
    origin_lps, direction_lps = flip_ras_lps(np.array(volume_node.GetOrigin()), direction_ras)
    placeholder = np.broadcast_to(np.zeros((), np.uint8), tuple(size_ijk[::-1]))
    return Volume(placeholder, tuple(volume_node.GetSpacing()), tuple(origin_lps), direction_lps)


def update_node_from_volume(volume_node: object, volume: Volume) -> object:
    """Set a volume node's voxels and geometry to ``volume``'s (exact); returns the node."""
    import vtk
    from vtk.util import numpy_support

    origin_ras, direction_ras = flip_ras_lps(np.asarray(volume.origin_mm), volume.direction)
    array = np.ascontiguousarray(volume.array)
    if array.dtype == np.bool_:
        array = array.astype(np.uint8)
    image = vtk.vtkImageData()
    image.SetDimensions(*volume.size_ijk)
    scalars = numpy_support.numpy_to_vtk(array.reshape(-1), deep=True)
    image.GetPointData().SetScalars(scalars)
    direction_matrix = vtk.vtkMatrix4x4()
    for r in range(3):
        for c in range(3):
            direction_matrix.SetElement(r, c, float(direction_ras[r, c]))
    was_modifying = volume_node.StartModify()
    volume_node.SetSpacing(*volume.spacing_mm)
    volume_node.SetOrigin(*(float(x) for x in origin_ras))
    volume_node.SetIJKToRASDirectionMatrix(direction_matrix)
    volume_node.SetAndObserveImageData(image)
    volume_node.EndModify(was_modifying)
    return volume_node


def slicer_terminology_entry() -> str:
    """The infarct segment's terminology as Slicer's tag string (from ``io.writing.SEGMENT_TERMINOLOGY``).

    Format: context~category~type~type modifier~anatomic context~region~region modifier,
    each code as scheme^value^meaning.
    """
    from LambdaSegmentLib.io.writing import SEGMENT_TERMINOLOGY as term

    def code(entry: list[str] | None) -> str:
        return "^".join(entry) if entry else "^^"

    return "~".join(
        [
            term["contextName"],
            code(term["category"]),
            code(term["type"]),
            code(term.get("typeModifier")),
            term.get("anatomicContextName", ""),
            code(term.get("anatomicRegion")),
            code(term.get("anatomicRegionModifier")),
        ]
    )


def segment_labelmap_volume_ml(segmentation_node: object, segment_id: str) -> float:
    """Volume in mL of a segment's own binary labelmap: voxel count x voxel volume / 1000.

    What Segment Statistics reports: the segment's binary labelmap representation in its
    own geometry (not resampled), counting the voxels that belong to this segment (shared
    labelmaps hold several segments under different label values).
    """
    from vtk.util import numpy_support

    import slicer

    segment = segmentation_node.GetSegmentation().GetSegment(segment_id)
    if segment is None:
        raise BadInputError(_node_name(segmentation_node), f"has no segment with ID {segment_id!r}")
    if not segmentation_node.CreateBinaryLabelmapRepresentation():  # no-op when it is the source representation
        raise BadInputError(_node_name(segmentation_node), "its segments cannot be converted to a binary labelmap")
    labelmap = slicer.vtkOrientedImageData()
    segmentation_node.GetBinaryLabelmapRepresentation(segment_id, labelmap)
    scalars = labelmap.GetPointData().GetScalars() if labelmap.GetPointData() is not None else None
    extent = labelmap.GetExtent()
    if scalars is None or extent[1] < extent[0] or extent[3] < extent[2] or extent[5] < extent[4]:
        return 0.0  # an empty segment has an empty labelmap
    count = int(np.count_nonzero(numpy_support.vtk_to_numpy(scalars)))
    return count * float(np.prod(labelmap.GetSpacing())) / 1000.0


def segment_mask_on_grid(segmentation_node: object, segment_id: str, reference_node: object) -> Volume:
    """A segment as a uint8 0/1 ``Volume`` on ``reference_node``'s voxel grid (e.g. the DWI)."""
    import slicer

    array = slicer.util.arrayFromSegmentBinaryLabelmap(segmentation_node, segment_id, reference_node)
    reference = volume_from_node(reference_node, role="reference volume")
    return reference.with_array((np.asarray(array) > 0).astype(np.uint8))


def set_segment_from_mask(segmentation_node: object, segment_id: str, mask: Volume, reference_node: object) -> None:
    """Replace a segment's voxels with ``mask`` (nonzero = inside), which must lie on ``reference_node``'s grid."""
    import slicer

    from LambdaSegmentLib.io.grid import grid_differences

    differences = grid_differences(node_grid(reference_node), mask)
    if differences:
        raise BadInputError(_node_name(reference_node), f"the mask is not on this volume's grid: {'; '.join(differences)}")
    slicer.util.updateSegmentBinaryLabelmapFromArray(
        (np.asarray(mask.array) > 0).astype(np.uint8), segmentation_node, segment_id, reference_node
    )


def slice_offset_through(slice_node: object, point_ras: np.ndarray) -> float:
    """The slice offset (mm) at which ``slice_node``'s view passes through ``point_ras``.

    A slice view's plane is its ``SliceToRAS`` matrix's third column (the normal) through its
    translation; MRML's slice offset is the translation's coordinate along the unit normal. The
    plane through the point therefore has offset normal · point, whatever the view's
    orientation (axial, or rotated to an oblique volume's plane). Reads the node, changes nothing.
    """
    matrix = np.array([[slice_node.GetSliceToRAS().GetElement(r, c) for c in range(4)] for r in range(4)])
    normal = matrix[:3, 2] / np.linalg.norm(matrix[:3, 2])
    return float(normal @ np.asarray(point_ras, dtype=np.float64))


def centre_slice_views_on(point_ras: np.ndarray, slice_nodes: list[object]) -> list[float]:
    """Move every slice view so that it shows ``point_ras`` at its centre; returns their new offsets.

    Uses MRML's own ``JumpSliceByCentering`` (Slicer's "jump to" of markups), which keeps each
    view's orientation and puts its plane through the point.
    """
    offsets = []
    for node in slice_nodes:
        node.JumpSliceByCentering(*(float(c) for c in point_ras))
        offsets.append(slice_offset_through(node, point_ras))
    return offsets


def lps_to_ras_point(point_lps: np.ndarray) -> np.ndarray:
    """A point from LPS to RAS millimetres (or back)."""
    return RAS_LPS_FLIP @ np.asarray(point_lps, dtype=np.float64)
