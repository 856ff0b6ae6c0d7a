"""The slice axis and the acquisition plane come from the geometry alone."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.preprocessing import acquisition_plane, find_slice_axis

SAGITTAL = np.array([[0.0, 0, 1], [1, 0, 0], [0, -1, 0]])  # i→P, j→I, k→L (slices along k)
CORONAL = np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]])  # i→L, j→I, k→P


def volume(spacing, direction=np.eye(3), shape_kji=(10, 20, 20)) -> Volume:
    return Volume(np.zeros(shape_kji, np.float32), spacing, (0, 0, 0), direction)


@pytest.mark.parametrize(
    ("spacing", "shape_kji", "expected"),
    [
        ((0.9, 0.9, 6.0), (10, 20, 20), 2),  # thick slices stored along k
        ((6.0, 0.9, 0.9), (20, 20, 10), 0),  # thick slices stored along i
        ((0.9, 6.0, 0.9), (20, 10, 20), 1),
        ((2.0, 2.0, 2.0), (73, 112, 112), 2),  # isotropic (ISLES'22): tie → k, the acquisition axis
        ((2.0, 2.0, 2.0), (112, 112, 73), 2),  # a tie goes to k even when k is not the shortest axis
        ((3.0, 3.0, 1.0), (50, 20, 30), 1),  # tie without k → the tied axis with the fewest voxels
    ],
)
def test_slice_axis_is_the_largest_spacing_with_ties_to_k(spacing, shape_kji, expected):
    assert find_slice_axis(volume(spacing, shape_kji=shape_kji)) == expected


def test_planes_are_named_from_the_slice_direction(rotation):
    assert acquisition_plane(volume((0.9, 0.9, 6.0))) == "axial"
    assert acquisition_plane(volume((0.9, 0.9, 5.0), SAGITTAL)) == "sagittal"
    assert acquisition_plane(volume((0.9, 0.9, 5.0), CORONAL)) == "coronal"
    # sagittal stored with the slices along i
    assert acquisition_plane(volume((5.0, 0.9, 0.9), np.array([[-1.0, 0, 0], [0, 1, 0], [0, 0, -1]]), (20, 20, 10))) == "sagittal"
    assert acquisition_plane(volume((0.9, 0.9, 6.0), rotation((1, 0, 0), 8.0))) == "axial"  # a small AC-PC tilt
    assert acquisition_plane(volume((0.9, 0.9, 6.0), rotation((1, 1, 0), 30.0))) == "oblique"
