"""Lesion volumes (mL), connected lesions, per-slice areas and hemisphere volumes."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.lesions import connected_lesions, hemisphere_volumes_ml, lesion_volume_ml, slice_areas_mm2


def mask_volume(shape_kji=(6, 20, 30), spacing=(0.9, 0.9, 6.0), origin=(0.0, 0.0, 0.0), direction=np.eye(3)) -> Volume:
    return Volume(np.zeros(shape_kji, np.uint8), spacing, origin, direction)


def test_volume_is_voxel_count_times_voxel_volume_in_ml():
    mask = mask_volume()
    mask.array[2:4, 5:10, 10:20] = 1  # 2 × 5 × 10 = 100 voxels of 0.9 × 0.9 × 6 mm³
    assert lesion_volume_ml(mask) == pytest.approx(100 * 0.9 * 0.9 * 6.0 / 1000)
    labels = mask.with_array(mask.array * 7)  # any non-zero value is lesion
    assert lesion_volume_ml(labels) == lesion_volume_ml(mask)
    assert lesion_volume_ml(mask_volume()) == 0.0


def test_lesions_touching_by_a_corner_are_one_lesion_full_connectivity():
    mask = mask_volume(spacing=(1.0, 1.0, 1.0))
    mask.array[1, 1, 1] = 1
    mask.array[2, 2, 2] = 1  # corner contact with the first voxel → same lesion
    mask.array[1:3, 10:13, 20:24] = 1  # 24 voxels, far away
    lesions = connected_lesions(mask)
    assert [lesion.voxels for lesion in lesions] == [24, 2]  # largest first
    assert [lesion.label for lesion in lesions] == [1, 2]
    assert lesions[0].volume_ml == pytest.approx(0.024)
    assert connected_lesions(mask_volume()) == []


def test_lesion_centroid_is_in_lps_millimetres_on_an_oblique_grid():
    angle = np.radians(30)
    direction = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]])
    mask = mask_volume(spacing=(0.9, 0.9, 6.0), origin=(10.0, -20.0, 5.0), direction=direction)
    mask.array[3, 4:6, 7:9] = 1  # centre at (i, j, k) = (7.5, 4.5, 3)
    (lesion,) = connected_lesions(mask)
    np.testing.assert_allclose(lesion.centroid_lps, mask.index_to_lps(np.array([7.5, 4.5, 3.0])), atol=1e-9)


def test_slice_areas_follow_the_slice_axis_and_add_up_to_the_volume():
    mask = mask_volume()
    mask.array[1, 0:2, 0:5] = 1
    mask.array[4, 0:3, 0:5] = 1
    areas = slice_areas_mm2(mask)  # slice axis k (6 mm)
    assert areas == pytest.approx([0, 10 * 0.81, 0, 0, 15 * 0.81, 0])
    assert sum(areas) * 6.0 / 1000 == pytest.approx(lesion_volume_ml(mask))
    sagittal = Volume(np.transpose(mask.array, (2, 1, 0)).copy(), (6.0, 0.9, 0.9))  # slices along i
    assert slice_areas_mm2(sagittal) == pytest.approx(areas)
    assert len(slice_areas_mm2(mask, slice_axis=0)) == 30


def test_hemispheres_split_at_the_field_of_view_centre_with_lps_x_toward_patient_left():
    mask = mask_volume(shape_kji=(4, 10, 10), spacing=(1.0, 1.0, 1.0), origin=(-4.5, 0.0, 0.0))  # x from -4.5 to 4.5
    mask.array[0, 0, 0:3] = 1  # x < 0: patient right
    mask.array[0, 0, 7:10] = 1  # x > 0: patient left
    mask.array[1, 0, 8] = 1
    assert hemisphere_volumes_ml(mask) == pytest.approx({"left": 0.004, "right": 0.003})
    assert hemisphere_volumes_ml(mask, midline_x_mm=-10.0) == pytest.approx({"left": 0.007, "right": 0.0})
    odd = mask_volume(shape_kji=(1, 1, 3), spacing=(1.0, 1.0, 1.0), origin=(-1.0, 0.0, 0.0))
    odd.array[:] = 1  # the middle voxel sits on the midline: half to each side
    assert hemisphere_volumes_ml(odd) == pytest.approx({"left": 0.0015, "right": 0.0015})
