"""``LambdaSegmentLib.slicer_bridge``: MRML volume nodes <-> ``Volume`` with exact geometry (real MRML, no app)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import SimpleITK as sitk

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.io.grid import same_grid
from LambdaSegmentLib.slicer_bridge import (
    flip_ras_lps,
    node_grid,
    segment_labelmap_volume_ml,
    segment_mask_on_grid,
    set_segment_from_mask,
    slicer_terminology_entry,
    update_node_from_volume,
    volume_from_node,
)

from lambdasegment_mrml import add_volume_node, oblique_direction, slicer

SPACING = (0.9, 0.9, 6.0)  # thick-slice clinical DWI
ORIGIN_RAS = (101.25, -87.5, -33.0)


@pytest.fixture
def dwi_node(mrml):
    rng = np.random.default_rng(7)
    array = rng.normal(500.0, 80.0, size=(5, 12, 16)).astype(np.float32)  # (k, j, i)
    return add_volume_node(mrml.scene, "DWI b1000", array, SPACING, ORIGIN_RAS, oblique_direction())


def test_library_import_does_not_import_slicer():
    code = "import sys, LambdaSegmentLib.slicer_bridge; sys.exit(int('slicer' in sys.modules or 'vtk' in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_ras_lps_flip_is_its_own_exact_inverse():
    origin, direction = np.array([1.1, -2.3, 3.7]), oblique_direction()
    flipped_origin, flipped_direction = flip_ras_lps(origin, direction)
    assert flipped_origin.tolist() == [-1.1, 2.3, 3.7]
    back_origin, back_direction = flip_ras_lps(flipped_origin, flipped_direction)
    assert np.array_equal(back_origin, origin) and np.array_equal(back_direction, direction)


def test_volume_from_node_maps_every_voxel_to_the_lps_position_of_mrmls_ijk_to_ras(dwi_node):
    volume = volume_from_node(dwi_node)
    ijk_to_ras = slicer.util.arrayFromVTKMatrix(_ijk_to_ras_matrix(dwi_node))
    corners = np.array([[0, 0, 0], [15, 0, 0], [0, 11, 0], [0, 0, 4], [15, 11, 4], [3.5, 7.25, 2]])
    ras = (ijk_to_ras @ np.c_[corners, np.ones(len(corners))].T).T[:, :3]
    assert np.allclose(volume.index_to_lps(corners), ras * [-1, -1, 1], atol=1e-9)
    assert volume.spacing_mm == SPACING
    assert np.array_equal(volume.array, slicer.util.arrayFromVolume(dwi_node))


def test_volume_from_node_agrees_with_simpleitk_reading_mrmls_own_nrrd(dwi_node, tmp_path):
    path = str(tmp_path / "dwi.nrrd")
    storage = slicer.vtkMRMLVolumeArchetypeStorageNode()
    storage.SetFileName(path)
    assert storage.WriteData(dwi_node)
    from_file = Volume.from_sitk(sitk.ReadImage(path))
    volume = volume_from_node(dwi_node)
    assert np.array_equal(volume.array, from_file.array)
    assert np.allclose(volume.spacing_mm, from_file.spacing_mm, atol=1e-9)
    assert np.allclose(volume.origin_mm, from_file.origin_mm, atol=1e-6)
    assert np.allclose(volume.direction, from_file.direction, atol=1e-9)


def test_volume_node_volume_round_trip_is_bit_exact(mrml):
    rng = np.random.default_rng(3)
    original = Volume(
        rng.integers(0, 3000, size=(4, 9, 10)).astype(np.int16), SPACING, (-12.3, 45.6, 78.9), oblique_direction(33, -7)
    )
    node = update_node_from_volume(mrml.scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode"), original)
    back = volume_from_node(node)
    assert back.array.dtype == original.array.dtype and np.array_equal(back.array, original.array)
    assert back.spacing_mm == original.spacing_mm
    assert back.origin_mm == original.origin_mm
    assert np.array_equal(back.direction, original.direction)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda scene: None, "no volume selected"),
        (lambda scene: scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", "empty"), "no voxel data"),
        (lambda scene: _vector_volume(scene), "3 values per voxel"),
        (lambda scene: _labelmap(scene), "must be a scalar volume"),
        (lambda scene: _transformed_volume(scene), "harden"),
    ],
)
def test_volume_from_node_refuses_what_is_not_one_3d_scalar_image(mrml, make, problem):
    with pytest.raises(BadInputError, match=problem):
        volume_from_node(make(mrml.scene), role="DWI")


def test_node_grid_reads_the_geometry_without_copying_voxels(dwi_node):
    grid = node_grid(dwi_node)
    assert grid.array.strides == (0, 0, 0) and grid.array.shape == (5, 12, 16)
    volume = volume_from_node(dwi_node)
    assert np.array_equal(grid.ijk_to_lps_matrix(), volume.ijk_to_lps_matrix())


def test_terminology_entry_is_slicers_tag_format_for_infarct_of_the_brain():
    fields = slicer_terminology_entry().split("~")
    assert len(fields) == 7
    assert fields[1] == "SCT^49755003^Morphologically Altered Structure"
    assert fields[2] == "SCT^55641003^Infarct"
    assert fields[5] == "SCT^12738006^Brain"


def test_segment_written_from_a_mask_keeps_the_dwi_geometry_and_voxels(mrml, dwi_node):
    mask = volume_from_node(dwi_node).with_array(np.zeros((5, 12, 16), np.uint8))
    mask.array[1:4, 2:9, 3:7] = 1
    segmentation_node = mrml.scene.AddNewNodeByClass("vtkMRMLSegmentationNode")
    segmentation_node.SetReferenceImageGeometryParameterFromVolumeNode(dwi_node)
    segment_id = segmentation_node.GetSegmentation().AddEmptySegment("Infarct")
    set_segment_from_mask(segmentation_node, segment_id, mask, dwi_node)
    back = segment_mask_on_grid(segmentation_node, segment_id, dwi_node)
    assert np.array_equal(back.array, mask.array) and same_grid(back, mask)
    expected_ml = 3 * 7 * 4 * float(np.prod(SPACING)) / 1000
    assert segment_labelmap_volume_ml(segmentation_node, segment_id) == pytest.approx(expected_ml, rel=1e-12)


def test_segment_volume_counts_only_its_own_label_in_a_shared_labelmap(mrml, dwi_node):
    segmentation_node = mrml.scene.AddNewNodeByClass("vtkMRMLSegmentationNode")
    segmentation_node.SetReferenceImageGeometryParameterFromVolumeNode(dwi_node)
    grid = volume_from_node(dwi_node)
    ids = [segmentation_node.GetSegmentation().AddEmptySegment(name) for name in ("Infarct", "Other")]
    first, second = np.zeros((5, 12, 16), np.uint8), np.zeros((5, 12, 16), np.uint8)
    first[0, 0:2, 0:3] = 1  # 6 voxels
    second[4, 5:10, 5:10] = 1  # 25 voxels, same shared labelmap, another label value
    set_segment_from_mask(segmentation_node, ids[0], grid.with_array(first), dwi_node)
    set_segment_from_mask(segmentation_node, ids[1], grid.with_array(second), dwi_node)
    voxel_ml = float(np.prod(SPACING)) / 1000
    assert segment_labelmap_volume_ml(segmentation_node, ids[0]) == pytest.approx(6 * voxel_ml)
    assert segment_labelmap_volume_ml(segmentation_node, ids[1]) == pytest.approx(25 * voxel_ml)


def test_a_mask_on_another_grid_is_refused(mrml, dwi_node):
    segmentation_node = mrml.scene.AddNewNodeByClass("vtkMRMLSegmentationNode")
    segment_id = segmentation_node.GetSegmentation().AddEmptySegment("Infarct")
    wrong = Volume(np.ones((5, 12, 16), np.uint8), (1.0, 1.0, 6.0))
    with pytest.raises(BadInputError, match="not on this volume's grid"):
        set_segment_from_mask(segmentation_node, segment_id, wrong, dwi_node)


def _ijk_to_ras_matrix(node):
    import vtk

    matrix = vtk.vtkMatrix4x4()
    node.GetIJKToRASMatrix(matrix)
    return matrix


def _vector_volume(scene):
    node = scene.AddNewNodeByClass("vtkMRMLVectorVolumeNode", "rgb")
    slicer.util.updateVolumeFromArray(node, np.zeros((2, 3, 4, 3), np.float32))
    return node


def _labelmap(scene):
    node = scene.AddNewNodeByClass("vtkMRMLLabelMapVolumeNode", "labels")
    slicer.util.updateVolumeFromArray(node, np.zeros((2, 3, 4), np.uint8))
    return node


def _transformed_volume(scene):
    node = add_volume_node(scene, "moved", np.zeros((2, 3, 4), np.float32), SPACING, ORIGIN_RAS, np.eye(3))
    transform = scene.AddNewNodeByClass("vtkMRMLLinearTransformNode", "registration")
    node.SetAndObserveTransformNodeID(transform.GetID())
    return node
