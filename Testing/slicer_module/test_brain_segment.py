"""The optional "Brain" segment of the Slicer module on a real MRML scene (slicer-core): off by
default, the library's brain mask on the DWI grid when asked for, in the direct run and in
the child-process job, and removed again when a later run does not ask for it."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.preprocessing.brain_mask import brain_mask
from LambdaSegmentLib.slicer_bridge import segment_mask_on_grid, volume_from_node

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def study(mrml, lambda_segment_module):
    dwi, adc, _lesion_voxels = lambda_segment_module.makeSyntheticStudyNodes(mrml.scene)
    return dwi, adc


def test_the_brain_segment_is_off_by_default(logic, study, lambda_segment_module):
    """Off in the parameter node, the panel's checkbox and the Logic (slicer-core has no
    parameter-node storage for the Logic, so the wrapper's default is read from its source)."""
    import inspect
    from xml.etree import ElementTree

    from lambdasegment_mrml import REPO_ROOT

    source = inspect.getsource(lambda_segment_module.LambdaSegmentParameterNode)
    assert "showBrainMask: bool = False" in source
    checkbox = next(w for w in ElementTree.parse(REPO_ROOT / "LambdaSegment" / "Resources" / "UI" / "LambdaSegment.ui").iter("widget")
                    if w.get("name") == "showBrainMaskCheckBox")
    assert checkbox.find("property[@name='checked']/bool").text == "false"
    assert inspect.signature(logic.segmentStroke).parameters["showBrainMask"].default is False
    node, _volume_ml = logic.segmentStroke(*study, device="cpu")
    assert node.GetSegmentation().GetSegment("Brain") is None


def test_the_brain_segment_holds_the_librarys_brain_mask_and_bounds_the_infarct(logic, study):
    dwi, adc = study
    node, _volume_ml = logic.segmentStroke(dwi, adc, device="cpu", showBrainMask=True)
    segmentation = node.GetSegmentation()
    assert segmentation.GetNumberOfSegments() == 2 and segmentation.GetSegment("Brain").GetName() == "Brain"
    brain = segment_mask_on_grid(node, "Brain", dwi).array.astype(bool)
    np.testing.assert_array_equal(brain, brain_mask(volume_from_node(dwi)))
    assert brain.any() and not brain.all()
    infarct = segment_mask_on_grid(node, "Infarct", dwi).array.astype(bool)
    assert not (infarct & ~brain).any()
    assert node.GetDisplayNode().GetSegmentVisibility2DFill("Brain") is False  # an outline over the DWI

    # A later run into the same segmentation without the brain mask removes the old one.
    again, _ = logic.segmentStroke(dwi, adc, device="cpu", outputSegmentationNode=node)
    assert again is node and node.GetSegmentation().GetSegment("Brain") is None


def test_the_background_job_brings_the_brain_mask_back(logic, study):
    dwi, adc = study
    job = logic.startSegmentStroke(dwi, adc, "auto", "cpu")
    assert job.wait().running is False
    node, _volume_ml = logic.finishSegmentStroke(job, showBrainMask=True)
    brain = segment_mask_on_grid(node, "Brain", dwi).array.astype(bool)
    np.testing.assert_array_equal(brain, brain_mask(volume_from_node(dwi)))
