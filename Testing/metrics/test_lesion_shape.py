"""``benchmarks/lesion_contrast.py``'s shape measures (issue 13): in-plane thickness and core
share, on lesions drawn by hand (no ISLES'22 data needed)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/lesion_contrast.py")


def test_a_one_voxel_line_is_one_voxel_thick_and_has_no_core(script) -> None:
    inside = np.zeros((3, 12, 12), dtype=bool)
    inside[1, 5, 2:10] = True  # one slice, one voxel wide
    shape = script.lesion_shape(inside, (2.0, 2.0, 5.0), 2)
    assert shape == {"thickness_mm": pytest.approx(2.0), "core_share": 0.0}


def test_a_block_is_as_thick_as_its_narrow_side_in_plane_whatever_its_slices(script) -> None:
    inside = np.zeros((6, 14, 14), dtype=bool)
    inside[1:5, 3:6, 2:12] = True  # 3 x 10 voxels in-plane over 4 slices
    shape = script.lesion_shape(inside, (1.5, 1.5, 6.0), 2)
    assert shape["thickness_mm"] == pytest.approx(3 * 1.5)  # the slices do not thicken it
    assert shape["core_share"] == pytest.approx((1 * 8) / (3 * 10))  # the middle row, less its ends


def test_on_a_sagittal_stack_the_plane_is_that_of_its_own_slice_axis(script) -> None:
    axial = np.zeros((6, 14, 14), dtype=bool)
    axial[1:5, 3:6, 2:12] = True
    sagittal = np.ascontiguousarray(np.transpose(axial, (2, 1, 0)))  # slices now along array axis 2 (ITK axis 0)
    shape = script.lesion_shape(sagittal, (6.0, 1.5, 1.5), 0)
    assert shape == script.lesion_shape(axial, (1.5, 1.5, 6.0), 2)


def test_the_distance_to_csf_counts_csf_like_brain_voxels_only_and_never_the_lesion(script) -> None:
    brain = np.zeros((3, 10, 10), dtype=bool)
    brain[:, 1:9, 1:9] = True
    adc = np.full(brain.shape, 0.8)
    adc[:, 4, 1:9] = 3.0  # a ventricle-like sheet of CSF in row 4
    adc[:, 8, 8] = 3.0
    brain[:, 8, 8] = False  # a CSF-like ADC outside the brain must not count
    truth = np.zeros(brain.shape, dtype=bool)
    truth[1, 7, 2] = True
    adc[1, 7, 3] = 3.0
    truth[1, 7, 3] = True  # a lesion voxel with a CSF-like ADC is never CSF
    distance = script.csf_distance_mm(brain, adc, truth, (1.5, 2.0, 5.0))  # (i, j, k) mm
    assert distance[1, 7, 2] == pytest.approx(3 * 2.0)  # three rows (j, 2 mm) from row 4
    assert distance[1, 4, 5] == 0.0
    assert distance[1, 7, 7] == pytest.approx(3 * 2.0)  # not 2.5 mm, from the voxel outside the brain
    no_csf = script.csf_distance_mm(brain, np.full(brain.shape, 0.8), truth, (1.5, 2.0, 5.0))
    assert np.isinf(no_csf).all()
