"""The mirror registration runs on the box holding the brain and its mirror image, in any orientation."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.io.foreground import brain_foreground
from LambdaSegmentLib.preprocessing import symmetry

from test_dwi_asymmetry import head_study  # this folder is on sys.path (pytest's prepend mode)

# columns: the LPS directions of i, j, k; k (the thick axis) runs left-right
SAGITTAL = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


def lps_to_index(volume: Volume, points_lps: np.ndarray) -> np.ndarray:
    """Continuous (i, j, k) indices of LPS points shaped (n, 3)."""
    matrix = np.linalg.inv(volume.ijk_to_lps_matrix())
    return (np.c_[points_lps, np.ones(len(points_lps))] @ matrix.T)[:, :3]


@pytest.mark.parametrize("axis, degrees", [((0.0, 0.0, 1.0), 0.0), ((0.3, -0.5, 0.8), 15.0)], ids=["axial", "oblique"])
def test_the_registration_box_holds_the_brain_and_its_mirror_image(rotation, axis, degrees):
    study, _ = head_study(direction=rotation(axis, degrees))
    dwi, brain = study.dwi, brain_foreground(study.dwi)
    mirror = symmetry.mirror_transform(dwi, brain)
    start, size = symmetry.registration_region(dwi, brain, mirror)
    stop = np.add(start, size)
    assert np.all(np.asarray(start) >= 0) and np.all(stop <= dwi.size_ijk)
    brain_ijk = np.argwhere(brain)[:, ::-1]
    mirrored_lps = np.array([mirror.TransformPoint(tuple(p)) for p in dwi.index_to_lps(brain_ijk)])
    for ijk in (brain_ijk, lps_to_index(dwi, mirrored_lps)):
        inside_volume = np.all((ijk >= 0) & (ijk <= np.asarray(dwi.size_ijk) - 1), axis=1)
        assert np.all((ijk[inside_volume] >= start) & (ijk[inside_volume] <= stop - 1))


def test_a_wide_field_of_view_is_cropped_and_registers_to_the_same_mirror():
    """The same head in a field of view 2.5x as wide (zeros around it, the same LPS positions):
    the registration runs on a box much smaller than the grid, and the contralateral image on
    the original voxels is the original's (up to the sampler picking other points)."""
    study, (infarct, partner, _bilateral) = head_study()
    dwi = study.dwi
    pad = 48  # voxels on each in-plane side
    wide = Volume(np.pad(dwi.array, ((0, 0), (pad, pad), (pad, pad))), dwi.spacing_mm,
                  tuple(dwi.index_to_lps(np.array([-pad, -pad, 0]))), dwi.direction)
    brain = brain_foreground(dwi)
    wide_brain = np.pad(brain, ((0, 0), (pad, pad), (pad, pad)))
    _start, size = symmetry.registration_region(wide, wide_brain, symmetry.mirror_transform(wide, wide_brain))
    assert np.prod(size) < 0.5 * np.prod(wide.size_ijk)
    own, other = symmetry.contralateral_dwi(dwi, brain)
    wide_own, wide_other = (array[:, pad:-pad, pad:-pad] for array in symmetry.contralateral_dwi(wide, wide_brain))
    np.testing.assert_allclose(wide_own, own, atol=1e-5)
    assert np.abs(wide_other - other)[brain].mean() < 0.02
    assert (wide_own - wide_other)[infarct].mean() > 0.7 and (wide_own - wide_other)[partner].mean() < -0.7


def test_a_thick_sagittal_stack_is_compared_with_its_mirror_across_its_slices():
    """5 mm slices running left-right: the mirror maps slices onto other slices (and between them)."""
    study, (infarct, partner, bilateral) = head_study(direction=SAGITTAL, shape_kji=(24, 64, 64))
    asymmetry = symmetry.dwi_asymmetry(study.dwi, brain_foreground(study.dwi))
    assert asymmetry[infarct].mean() > 0.7
    assert asymmetry[partner].mean() < -0.7
    assert abs(asymmetry[bilateral].mean()) < 0.15


def test_the_registration_is_deterministic():
    study, _ = head_study(direction=SAGITTAL, shape_kji=(24, 64, 64))
    brain = brain_foreground(study.dwi)
    first = symmetry.contralateral_dwi(study.dwi, brain)
    second = symmetry.contralateral_dwi(study.dwi, brain)
    np.testing.assert_array_equal(first[1], second[1])
