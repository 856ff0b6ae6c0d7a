"""The real ISLES'22 case (oblique 2 mm NIfTI) loaded the way Slicer loads files, against the library's reader.

Skips when ``../shared`` is absent (``isles_case`` fixture).
"""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.io import read_volume
from LambdaSegmentLib.lesions import lesion_volume_ml
from LambdaSegmentLib.slicer_bridge import segment_labelmap_volume_ml, set_segment_from_mask, volume_from_node

PREFIX = "sub-strokecase0001_ses-0001_"


def _load(mrml, path, name):
    node = mrml.volumes.AddArchetypeVolume(str(path), name)  # Slicer's "Add data" for a volume file
    assert node is not None, f"MRML could not read {path}"
    return node


def test_mrml_loading_and_the_bridge_give_the_librarys_image_in_physical_space(mrml, isles_case):
    """Slicer's reader may store the voxels in another order (here: slices reversed, as the
    file's axes are left-handed), so the check is physical: every voxel of the library's
    volume lands on a voxel centre of the Slicer-loaded one and has the same value there."""
    path = isles_case / f"{PREFIX}dwi.nii.gz"
    from_slicer = volume_from_node(_load(mrml, path, "DWI"))
    from_library = read_volume(path)
    assert not np.allclose(from_library.direction, np.eye(3), atol=1e-3)  # the case really is oblique
    ijk = np.stack(np.meshgrid(*(np.arange(n) for n in from_library.size_ijk), indexing="ij"), axis=-1).reshape(-1, 3)
    lps = from_library.index_to_lps(ijk)
    lps_to_slicer_ijk = np.linalg.inv(from_slicer.ijk_to_lps_matrix())
    slicer_ijk = (np.c_[lps, np.ones(len(lps))] @ lps_to_slicer_ijk.T)[:, :3]
    assert np.abs(slicer_ijk - np.round(slicer_ijk)).max() < 1e-3  # voxel centres coincide (float32 header)
    i, j, k = np.round(slicer_ijk).astype(int).T
    assert np.array_equal(from_slicer.array[k, j, i], from_library.array[ijk[:, 2], ijk[:, 1], ijk[:, 0]])


def test_expert_mask_volume_in_the_scene_equals_the_librarys(mrml, isles_case):
    dwi = _load(mrml, isles_case / f"{PREFIX}dwi.nii.gz", "DWI")
    expert = read_volume(isles_case / f"{PREFIX}msk.nii.gz")
    segmentation = mrml.scene.AddNewNodeByClass("vtkMRMLSegmentationNode", "expert")
    segmentation.SetReferenceImageGeometryParameterFromVolumeNode(dwi)
    segment_id = segmentation.GetSegmentation().AddEmptySegment("Infarct")
    loaded = volume_from_node(_load(mrml, isles_case / f"{PREFIX}msk.nii.gz", "expert mask"))  # same voxel order as the DWI
    mask = loaded.with_array((np.asarray(loaded.array) > 0).astype(np.uint8))
    set_segment_from_mask(segmentation, segment_id, mask, dwi)
    assert segment_labelmap_volume_ml(segmentation, segment_id) == pytest.approx(lesion_volume_ml(expert), rel=1e-9)
    assert lesion_volume_ml(expert) > 0


def test_the_module_recognises_the_real_adc_unit(lambda_segment_module, mrml, isles_case, tmp_path):
    from LambdaSegmentLib.inference.untrained import save_untrained_package

    logic = lambda_segment_module.LambdaSegmentLogic()
    logic.modelPackageDir = str(save_untrained_package(tmp_path / "package"))
    dwi = _load(mrml, isles_case / f"{PREFIX}dwi.nii.gz", "DWI")
    adc = _load(mrml, isles_case / f"{PREFIX}adc.nii.gz", "ADC")
    problem, detected = logic.describeInputs(dwi, adc)
    assert problem == "" and "ADC in 10⁻³ mm²/s" in detected  # ISLES'22 ADC maps: brain median ~0.8-1.0
