"""The review tools of "Segment stroke" on real MRML (slicer-core): the lesion table, its refresh
after an edit, the export, and the jump of the slice views to a lesion on an oblique volume.

The Qt table widget is not tested here (no Qt); it only shows ``resultSummary``'s rows and
calls ``centreSliceViewsOn`` with a row's ``jump_lps_mm``, both tested below.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.lesions import lesion_table
from LambdaSegmentLib.slicer_bridge import segment_mask_on_grid, slice_offset_through, volume_from_node
from LambdaSegmentLib.slicer_job import segment_volumes

from lambdasegment_mrml import slicer

pytestmark = pytest.mark.timeout(300)
RUN = {"model": {"name": "hand-made", "version": "0", "sha256": "0" * 64, "training_data": "none"}, "device": "cpu",
       "seconds": 0.0, "threshold": 0.5, "adc_unit_detected": "1e-3 mm2/s", "b_value": 1000.0,
       "low_confidence_mean_probability": 0.7}


LARGE = (slice(4, 7), slice(50, 65), slice(55, 70))  # [k, j, i] boxes inside the synthetic brain,
SMALL = (5, slice(70, 74), slice(60, 64))  # away from its own infarct


@pytest.fixture
def study(mrml, lambda_segment_module):
    """The module's oblique synthetic DWI + ADC (10^-3 mm^2/s) nodes; the ADC of the hand-made
    lesions' boxes is set to normal brain (0.8) exactly, so no noisy voxel falls below 0.62."""
    from LambdaSegmentLib.slicer_bridge import update_node_from_volume

    dwi, adc, _voxels = lambda_segment_module.makeSyntheticStudyNodes(mrml.scene)
    values = volume_from_node(adc)
    values.array[LARGE] = 0.8
    values.array[SMALL] = 0.8
    update_node_from_volume(adc, values)
    return dwi, adc


def two_lesions(dwi_node):
    """A hand-made result: a large confident lesion and a small doubtful one, on the DWI grid."""
    grid = volume_from_node(dwi_node)
    mask = np.zeros(grid.array.shape, np.uint8)
    probability = np.zeros(grid.array.shape, np.float32)
    mask[LARGE] = 1
    probability[LARGE] = 0.9
    mask[SMALL] = 1
    probability[SMALL] = 0.55
    return grid.with_array(mask), grid.with_array(probability)


def test_the_table_in_the_scene_is_the_librarys_table_for_the_same_mask(logic, study, untrained_package):
    dwi, adc = study
    node, _ml = logic.segmentStroke(dwi, adc, device="cpu")
    loaded, segmentation, package = segment_volumes(volume_from_node(dwi), volume_from_node(adc), package_dir=untrained_package)
    expected = lesion_table(segmentation.mask, probability=segmentation.probability, adc=loaded.adc,
                            low_confidence_below=package.low_confidence_below)
    in_scene = logic.lesionTable(node)
    assert expected, "the untrained model predicts some lesion here, so the comparison means something"
    assert [row.as_dict() for row in in_scene] == [row.as_dict() for row in expected]
    summary = logic.resultSummary(node)
    assert summary["lesions"] == [row.as_dict() for row in expected]
    assert summary["predicted_volume_ml"] == pytest.approx(summary["infarct_volume_ml"])
    assert summary["adc_core_ml"] == pytest.approx(sum(row.adc_core_ml for row in expected))
    assert node.GetNodeReference("LambdaSegmentProbability").GetName() == "Synthetic DWI infarct AI probability"


def test_an_edit_that_deletes_a_lesion_removes_its_row_and_keeps_the_ai_volume_beside(logic, study, tmp_path):
    dwi, adc = study
    mask, probability = two_lesions(dwi)
    node = logic.writeSegmentation(dwi, adc, mask, dict(RUN), probability=probability)
    before = logic.resultSummary(node)
    assert [(row["voxels"], row["low_confidence"]) for row in before["lesions"]] == [(675, False), (16, True)]
    assert before["lesions"][0]["mean_probability"] == pytest.approx(0.9) and before["lesions"][1]["mean_probability"] == pytest.approx(0.55)
    voxel_ml = 0.9 * 0.9 * 6.0 / 1000
    assert before["adc_core_ml"] == pytest.approx(0.0)  # the hand-made lesions lie where the ADC is normal brain (0.8)
    assert before["predicted_volume_ml"] == pytest.approx(691 * voxel_ml)

    edited = segment_mask_on_grid(node, "Infarct", dwi)
    edited.array[SMALL] = 0  # the reviewer erases the doubtful lesion (as a Segment Editor effect stores it)
    slicer.util.updateSegmentBinaryLabelmapFromArray(edited.array, node, "Infarct", dwi)

    after = logic.resultSummary(node)
    assert [row["voxels"] for row in after["lesions"]] == [675]
    assert after["lesions"][0] == before["lesions"][0]
    assert after["infarct_volume_ml"] == pytest.approx(675 * voxel_ml)
    assert after["predicted_volume_ml"] == pytest.approx(691 * voxel_ml)  # the AI's volume stays beside the edited one
    report = json.loads(logic.exportReport(node, tmp_path / "report.json").read_text(encoding="utf-8"))
    assert [lesion["voxels"] for lesion in report["lesions"]] == [675]
    assert report["input"]["predicted_volume_ml"] == pytest.approx(691 * voxel_ml)
    assert report["adc_core_ml"] == pytest.approx(0.0) and report["low_confidence_mean_probability"] == 0.7
    rows = logic.exportReport(node, tmp_path / "report.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 2 and "lesion_low_confidence" in rows[0]


def test_the_core_follows_the_adc_of_the_edited_segment(logic, study):
    dwi, adc = study
    mask, probability = two_lesions(dwi)
    values = volume_from_node(adc)
    values.array[4:7, 50:65, 55:63] = 0.5  # 3 x 15 x 8 voxels of the large lesion below 0.62 x 10^-3 mm^2/s
    from LambdaSegmentLib.slicer_bridge import update_node_from_volume

    update_node_from_volume(adc, values)
    node = logic.writeSegmentation(dwi, adc, mask, dict(RUN), probability=probability)
    summary = logic.resultSummary(node)
    voxel_ml = 0.9 * 0.9 * 6.0 / 1000
    assert summary["lesions"][0]["adc_core_ml"] == pytest.approx(360 * voxel_ml)
    assert summary["adc_core_ml"] == pytest.approx(360 * voxel_ml) == pytest.approx(summary["predicted_adc_core_ml"])


def slice_nodes(scene, volume_node):
    """Red/Yellow/Green views (axial, sagittal, coronal) and one rotated to the volume's oblique plane."""
    nodes = []
    for name, orientation in (("Red", "Axial"), ("Yellow", "Sagittal"), ("Green", "Coronal"), ("Aligned", "Axial")):
        node = scene.AddNewNodeByClass("vtkMRMLSliceNode")
        node.SetLayoutName(name)
        node.SetOrientation(orientation)
        node.SetDimensions(256, 256, 1)
        node.SetFieldOfView(250.0, 250.0, 1.0)
        nodes.append(node)
    nodes[-1].RotateToVolumePlane(volume_node)
    return nodes


def test_clicking_a_lesion_centres_every_slice_view_on_it_at_the_right_offset_on_an_oblique_volume(logic, study, mrml):
    dwi, adc = study
    mask, probability = two_lesions(dwi)
    node = logic.writeSegmentation(dwi, adc, mask, dict(RUN), probability=probability)
    views = slice_nodes(mrml.scene, dwi)
    small = logic.resultSummary(node)["lesions"][1]
    offsets = logic.centreSliceViewsOn(small["jump_lps_mm"])

    ijk_to_ras = slicer.util.arrayFromVTKMatrix(_ijk_to_ras(dwi))
    point_ras = np.array([-small["jump_lps_mm"][0], -small["jump_lps_mm"][1], small["jump_lps_mm"][2]])
    ijk = np.linalg.solve(ijk_to_ras, np.append(point_ras, 1.0))[:3]
    np.testing.assert_allclose(ijk, np.round(ijk), atol=1e-6)  # a voxel centre ...
    i, j, k = np.round(ijk).astype(int)
    assert mask.array[k, j, i] == 1  # ... of the lesion
    for view, offset in zip(views, offsets):
        slice_to_ras = slicer.util.arrayFromVTKMatrix(view.GetSliceToRAS())
        normal = slice_to_ras[:3, 2] / np.linalg.norm(slice_to_ras[:3, 2])
        np.testing.assert_allclose(slice_to_ras[:3, 3], point_ras, atol=1e-6)  # centred on the lesion
        assert view.GetSliceOffset() == pytest.approx(normal @ point_ras, abs=1e-6) == pytest.approx(offset, abs=1e-6)
    aligned = views[-1]
    normal = slicer.util.arrayFromVTKMatrix(aligned.GetSliceToRAS())[:3, 2]
    k_axis = ijk_to_ras[:3, 2] / np.linalg.norm(ijk_to_ras[:3, 2])
    assert abs(normal @ k_axis) == pytest.approx(1.0, abs=1e-9)  # the view lies in the oblique acquisition plane
    on_slice_k = (ijk_to_ras @ np.array([0.0, 0.0, k, 1.0]))[:3]  # any point of acquired slice k, computed here
    assert aligned.GetSliceOffset() == pytest.approx(normal @ on_slice_k, abs=1e-6)
    assert slice_offset_through(aligned, on_slice_k + 5.0 * ijk_to_ras[:3, 0]) == pytest.approx(aligned.GetSliceOffset(), abs=1e-6)


def _ijk_to_ras(volume_node):
    import vtk

    matrix = vtk.vtkMatrix4x4()
    volume_node.GetIJKToRASMatrix(matrix)
    return matrix


def test_the_widget_text_shows_the_ai_volume_beside_an_edited_one_and_marks_low_confidence(lambda_segment_module):
    module = lambda_segment_module
    assert module.volumeBesideAi(12.3, 12.3) == "12.30 mL"
    assert module.volumeBesideAi(10.0, 12.3) == "10.00 mL (AI: 12.30 mL)"
    assert module.volumeBesideAi(None, None) == "n/a"
    row = {"label": 2, "volume_ml": 0.0864, "adc_core_ml": 0.0, "mean_probability": 0.55, "low_confidence": True, "hemisphere": "left"}
    assert module.lesionTableCells(row) == ["2", "0.09", "0.00", "0.55 (low)", "left"]
    assert len(module.lesionTableCells(row)) == len(module.LESION_TABLE_COLUMNS)
    unknown = {**row, "adc_core_ml": None, "mean_probability": None, "low_confidence": None}
    assert module.lesionTableCells(unknown)[2:4] == ["n/a", "n/a"]
