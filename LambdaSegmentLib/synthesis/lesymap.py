"""Real stroke lesion shapes: the 131 LESYMAP masks, moved onto the generator's template.

The masks (``../shared/data/lesymap-lesions/lesions/Subject_NNN.nii.gz``, or the folder
in ``$LAMBDASEGMENT_LESYMAP``) are chronic left-hemisphere lesions drawn on the ``ch2``
(Colin27) template at 1 mm. ``ch2.nii.gz`` is registered to the MNI152 T1 shipped with
nilearn once per process (SimpleITK affine, Mattes mutual information inside the MNI
brain); a study's lesion is one mask mirrored to either hemisphere, shrunk about its
centroid towards an acute size, intersected with GM + WM and eroded to an exact volume
(the voxels deepest inside the shrunk mask are kept). Training-time data only: without
the folder ``lesymap_lesion`` raises ``BadInputError`` naming the path.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import SimpleITK as sitk
from scipy import ndimage

from LambdaSegmentLib.errors import BadInputError

from .fields import CroppedField, smooth_noise
from .template import _template_image, load_tissue_template

LESYMAP_ENV = "LAMBDASEGMENT_LESYMAP"
DEFAULT_LESYMAP = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "lesymap-lesions"


def lesymap_path() -> Path:
    """The LESYMAP folder (env ``LAMBDASEGMENT_LESYMAP`` or ../shared/data/lesymap-lesions)."""
    return Path(os.environ.get(LESYMAP_ENV, DEFAULT_LESYMAP))


@functools.cache
def _lesymap_files(folder: Path) -> tuple[Path, ...]:
    files = tuple(sorted((folder / "lesions").glob("Subject_*.nii.gz")))
    if not (folder / "ch2.nii.gz").exists() or not files:
        raise BadInputError(
            str(folder),
            "the LESYMAP lesion masks (lesions/Subject_*.nii.gz and ch2.nii.gz) are needed for real lesion shapes "
            f"and were not found; put them there, set {LESYMAP_ENV}, or set lesymap_probability=0",
        )
    return files


@functools.cache
def _ch2_to_template(folder: Path) -> sitk.Transform:
    """Affine transform mapping template (MNI) physical LPS points into ch2 physical points."""
    from nilearn import datasets

    mni = datasets.load_mni152_template(resolution=1)
    fixed = _template_image(np.asarray(mni.get_fdata(), dtype=np.float32), np.asarray(mni.affine, dtype=np.float64))
    moving = sitk.ReadImage(str(folder / "ch2.nii.gz"), sitk.sitkFloat32)
    template = load_tissue_template()
    brain = _template_image(((template.gm + template.wm + template.csf) > 0.5).astype(np.float32), template.affine)
    fixed_small = sitk.Shrink(fixed, [2, 2, 2])
    moving_small = sitk.Shrink(moving, [2, 2, 2])
    mask_small = sitk.Cast(sitk.Shrink(brain, [2, 2, 2]) > 0.5, sitk.sitkUInt8)
    registration = sitk.ImageRegistrationMethod()
    registration.SetMetricAsMattesMutualInformation(32)
    registration.SetMetricSamplingStrategy(registration.NONE)  # every voxel: deterministic
    registration.SetMetricFixedMask(mask_small)
    registration.SetInterpolator(sitk.sitkLinear)
    registration.SetOptimizerAsRegularStepGradientDescent(1.0, 1e-4, 150, relaxationFactor=0.7)
    registration.SetOptimizerScalesFromPhysicalShift()
    registration.SetShrinkFactorsPerLevel([2, 1])
    registration.SetSmoothingSigmasPerLevel([2.0, 1.0])
    # ch2 is already close to MNI: start from the identity about the brain's centre
    initial = sitk.AffineTransform(3)
    registration.SetInitialTransform(initial, inPlace=False)
    return registration.Execute(fixed_small, moving_small)


def lesymap_lesion(
    rng: np.random.Generator, volume_ml: float, gm: np.ndarray, wm: np.ndarray
) -> tuple[CroppedField, dict]:
    """One real lesion shape on the 1 mm template grid with (about) ``volume_ml`` mL.

    Args:
        rng: the study's generator.
        volume_ml: wanted volume; met exactly unless the shrunk mask holds less tissue.
        gm, wm: template tissue fractions (x, y, z).
    Returns:
        A cropped lesion-fraction field (soft 0.6 mm edge, like the other shapes) and what
        was drawn: subject, mirrored, scale, volume_ml, side ("left"/"right").
    Raises:
        BadInputError: the LESYMAP folder is absent.
    """
    folder = lesymap_path()
    files = _lesymap_files(folder)
    transform = _ch2_to_template(folder)
    index = int(rng.integers(len(files)))
    mirrored = bool(rng.random() < 0.5)
    mask = sitk.ReadImage(str(files[index]), sitk.sitkFloat32)
    mask_array = sitk.GetArrayFromImage(mask)  # (z, y, x) of ch2
    original_ml = float((mask_array > 0.5).sum()) / 1000.0
    # shrink (never enlarge much) about the centroid towards the wanted volume
    scale = float(np.clip((volume_ml / max(original_ml, 1e-3)) ** (1.0 / 3.0) * rng.uniform(1.0, 1.25), 0.25, 1.1))
    template = load_tissue_template()
    reference = _template_image(np.zeros(gm.shape, dtype=np.float32), template.affine)
    kji = np.argwhere(mask_array > 0.5)
    centroid_ch2 = np.asarray(mask.TransformContinuousIndexToPhysicalPoint(kji.mean(axis=0)[::-1].tolist()))
    inverse = transform.GetInverse()
    centroid = np.asarray(inverse.TransformPoint(centroid_ch2.tolist()))  # template LPS
    if mirrored:  # the template is symmetric about x = 0 (LPS x = -RAS x)
        centroid[0] = -centroid[0]
    # template point p -> (un-mirror) -> unshrink about the centroid -> ch2
    matrix = np.eye(3) / scale
    if mirrored:
        matrix = np.diag([-1.0, 1.0, 1.0]) @ matrix
    centre_source = centroid * np.asarray([-1.0, 1.0, 1.0]) if mirrored else centroid
    pre = sitk.AffineTransform(3)
    pre.SetMatrix(matrix.flatten().tolist())
    pre.SetTranslation((centre_source - matrix @ centroid).tolist())
    composite = sitk.CompositeTransform([transform, pre])  # applied last-first: pre, then transform
    # resample only around the lesion: a box of the scaled extent about the centroid
    half = (kji.max(axis=0) - kji.min(axis=0))[::-1] * scale / 2.0 + 6.0
    lo_lps, hi_lps = centroid - half, centroid + half
    corners = np.asarray([[a, b, c] for a in (lo_lps[0], hi_lps[0]) for b in (lo_lps[1], hi_lps[1]) for c in (lo_lps[2], hi_lps[2])])
    ijk = np.asarray([reference.TransformPhysicalPointToContinuousIndex(c.tolist()) for c in corners])
    start = np.clip(np.floor(ijk.min(axis=0)).astype(int), 0, np.asarray(gm.shape) - 1)
    stop = np.clip(np.ceil(ijk.max(axis=0)).astype(int) + 1, start + 1, np.asarray(gm.shape))
    crop = sitk.RegionOfInterest(reference, (stop - start).tolist(), start.tolist())
    fraction = sitk.GetArrayFromImage(sitk.Resample(mask, crop, composite, sitk.sitkLinear, 0.0)).transpose(2, 1, 0)
    box = tuple(slice(int(a), int(b)) for a, b in zip(start, stop))
    tissue = (gm[box] + wm[box]) > 0.5
    shape = (fraction > 0.5) & tissue
    n_voxels = int(min(round(volume_ml * 1000), shape.sum()))
    region = np.zeros(shape.shape, dtype=bool)
    if n_voxels > 0:
        # erosion to an exact volume: keep the voxels deepest inside the shape (with a
        # little noise, so the eroded border is irregular like the real one)
        score = ndimage.distance_transform_edt(shape) + 0.7 * smooth_noise(rng, shape.shape, 1.5)
        score = np.where(shape, score, -np.inf)
        threshold = np.partition(score.ravel(), -n_voxels)[-n_voxels]
        region = (score >= threshold) & shape
    values = ndimage.gaussian_filter(region.astype(np.float32), 0.6)
    side = "right" if mirrored else "left"
    info = {"subject": files[index].name.split(".")[0], "mirrored": mirrored, "scale": round(scale, 3),
            "volume_ml": float(region.sum()) / 1000.0, "side": side}
    return CroppedField(values=values, start=tuple(int(s) for s in start), stride=1), info
