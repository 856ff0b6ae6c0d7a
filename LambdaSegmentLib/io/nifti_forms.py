"""A NIfTI's two voxel-to-world mappings (qform and sform), compared with what SimpleITK read.

A NIfTI-1 header may store the mapping twice: the qform (a rotation, voxel sizes from
``pixdim`` and an offset) and the sform (any affine), each valid when its code is above 0.
When both are valid and disagree, programs pick differently: nibabel (and the tools built
on it) use the sform; SimpleITK 2.5 / ITK 5.4 use the sform only when its code is 1
("scanner") or the two agree, and the sform is a rotation times scales, and the qform
otherwise; its voxel size always comes from ``pixdim`` (checked by experiment in
``Testing/io/test_nifti_forms.py``). So one file can give a mask that lies shifted or
mirrored in another program: a classic cause of flipped masks.

:func:`form_disagreement` compares the two mappings and the one SimpleITK actually
produced, and says which was used and how far apart they are, in millimetres at the
volume's corners and in degrees.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import SimpleITK as sitk

from .grid import ORIGIN_TOLERANCE_VOXELS

#: NIfTI xform codes, as the warning names them.
XFORM_NAMES = {1: "scanner", 2: "aligned", 3: "Talairach", 4: "MNI 152", 5: "template"}
#: Orientations closer than this (degrees) are called the same.
SAME_ORIENTATION_DEG = 0.05
#: ITK's LPS and NIfTI's RAS differ by the signs of x and y.
LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])


def read_affine_ras(image: sitk.Image) -> np.ndarray:
    """The 4x4 voxel (i, j, k) to RAS mm mapping of an image as SimpleITK read it."""
    spacing = np.asarray(image.GetSpacing()[:3])
    direction = np.asarray(image.GetDirection()).reshape(image.GetDimension(), image.GetDimension())[:3, :3]
    matrix = np.eye(4)
    matrix[:3, :3] = direction * spacing
    matrix[:3, 3] = image.GetOrigin()[:3]
    return LPS_TO_RAS @ matrix


def corner_displacement_mm(first: np.ndarray, second: np.ndarray, size_ijk: tuple[int, int, int]) -> float:
    """Largest distance (mm) between where two 4x4 voxel-to-world mappings put the centres
    of the volume's eight corner voxels."""
    corners = np.array([[*corner, 1.0] for corner in itertools.product(*[(0, n - 1) for n in size_ijk])])
    return float(np.linalg.norm((corners @ first.T - corners @ second.T)[:, :3], axis=1).max())


def rotation_between(first: np.ndarray, second: np.ndarray) -> float | None:
    """Angle (degrees) between the orientations of two affines (scales and shears removed by
    polar decomposition); None when one is the mirror image of the other."""
    rotations = []
    for affine in (first, second):
        u, _, vt = np.linalg.svd(affine[:3, :3])
        rotations.append(u @ vt)
    if np.linalg.det(rotations[0]) * np.linalg.det(rotations[1]) < 0:
        return None
    cosine = (np.trace(rotations[0].T @ rotations[1]) - 1.0) / 2.0
    return float(np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))))


def form_disagreement(header: Any, image: sitk.Image) -> str | None:
    """What is wrong with a NIfTI's orientation, as one phrase, or None when all agree.

    Args:
        header: the file's ``nibabel.Nifti1Header``.
        image: the file as SimpleITK read it (3D or 4D).

    Returns:
        None when the valid forms agree with each other and with what SimpleITK read
        (within 1 % of the smallest voxel at every corner of the volume); otherwise which
        form SimpleITK used and how far the mappings are apart, or, when neither form is
        valid, how SimpleITK oriented the volume.
    """
    size_ijk = tuple(int(n) for n in image.GetSize()[:3])
    spacing = np.asarray(image.GetSpacing()[:3])
    tolerance_mm = ORIGIN_TOLERANCE_VOXELS * float(spacing.min())
    read = read_affine_ras(image)
    forms = {}
    for name, (affine, code) in (("qform", header.get_qform(coded=True)), ("sform", header.get_sform(coded=True))):
        if affine is not None and int(code) > 0:
            forms[name] = (np.asarray(affine, dtype=np.float64), int(code))
    apart = {name: corner_displacement_mm(affine, read, size_ijk) for name, (affine, _) in forms.items()}
    if len(forms) == 2:
        (q_affine, q_code), (s_affine, s_code) = forms["qform"], forms["sform"]
        distance = corner_displacement_mm(q_affine, s_affine, size_ijk)
        if distance <= tolerance_mm:
            return None
        angle = rotation_between(q_affine, s_affine)
        orientation = ("one is the mirror image of the other (left and right, or another axis, swapped)" if angle is None
                       else f"orientations {angle:.3g}° apart" if angle >= SAME_ORIENTATION_DEG else "same orientation")
        used = [name for name in ("qform", "sform") if apart[name] <= tolerance_mm]
        if used:
            name = used[-1] if len(used) == 1 else "sform"
            how = f"read with the {name}'s geometry (code {forms[name][1]}, {XFORM_NAMES.get(forms[name][1], 'unknown')})"
        else:
            closer = min(apart, key=apart.get)
            how = (f"read with neither: the {closer}'s orientation and origin with the voxel size of pixdim "
                   f"({_mm(spacing)} mm), {apart['qform']:.3g} mm from the qform and {apart['sform']:.3g} mm from the sform")
        return (f"the NIfTI qform (code {q_code}) and sform (code {s_code}) disagree: voxel centres up to {distance:.3g} mm "
                f"apart at the volume's corners, {orientation}; {how}. Other programs may use the other one: "
                "check that the mask lies on the lesion")
    if not forms:
        return ("its NIfTI header sets no orientation (qform and sform codes are both 0): SimpleITK read it as "
                f"{_axes(read)}, other programs may flip left-right or front-back: check the mask's side")
    if len(forms) == 1:
        name, (affine, _) = next(iter(forms.items()))
        if apart[name] > tolerance_mm:
            scales = np.linalg.norm(affine[:3, :3], axis=0)
            return (f"SimpleITK read it up to {apart[name]:.3g} mm (at the volume's corners) away from its {name}: it takes "
                    f"the voxel size from pixdim ({_mm(spacing)} mm), the {name} says {_mm(scales)} mm. "
                    "Other programs may use the other one: check that the mask lies on the lesion")
    return None


def _axes(affine: np.ndarray) -> str:
    """Anatomical direction of increasing i, j, k of a RAS affine, e.g. "i → left, j → posterior, k → superior"."""
    names = (("left", "right"), ("posterior", "anterior"), ("inferior", "superior"))
    parts = []
    for axis, column in zip("ijk", affine[:3, :3].T):
        dominant = int(np.argmax(np.abs(column)))
        parts.append(f"{axis} → {names[dominant][int(column[dominant] > 0)]}")
    return ", ".join(parts)


def _mm(values: np.ndarray) -> str:
    return " x ".join(f"{float(v):.4g}" for v in values)
