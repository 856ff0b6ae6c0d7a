"""The contralateral image: each voxel's mirror partner across the study's own midline.

Acute infarcts are almost always one-sided; the bright rims of a DWI (susceptibility
pile-up at the skull base, partial volume at a skull-stripped edge) are bilateral. So a
DWI-bright region whose mirror partner is just as bright is probably not an infarct.

The midline is found from the image, not assumed: the study's anatomical left-right
mirror (a reflection across the LPS x = centre plane, i.e. through the brain's centroid
perpendicular to the patient's L-R axis, whatever the acquisition's orientation) is
registered rigidly onto the study (SimpleITK, mean squares on the brain-median-normalised
DWI inside the brain). The registered mirror, resampled onto the study's grid, is the
contralateral image. It is a *feature*, used twice: by the post-processing's contralateral
check (``inference.postprocess``) and, when a manifest names it, as the ``dwi_asymmetry``
input channel (``preprocessing.prepare``). The model's input is never resampled across
slices; here a thick-slice stack is interpolated across slices only to compare each voxel
with its partner, and the result lies on the DWI grid, smoothed anyway (σ = 1 voxel).

The registration runs on the box that can matter (:func:`registration_region`): the brain
and its mirror image with a margin, at the study's own resolution; only brain voxels enter
the metric, so the background outside the box (most of a large field of view) was work
without effect. The fitted rigid transform is physical (LPS mm) and applies unchanged on
the full grid. What the crop does and does not change, and what it saves:
``benchmarks/contralateral_registration.py``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import SimpleITK as sitk

from ..io.volume import Volume
from .slice_axis import find_slice_axis


def mirror_transform(volume: Volume, brain: np.ndarray) -> sitk.AffineTransform:
    """Reflection across the plane through the brain's centroid perpendicular to LPS x.

    Args:
        volume: the study's grid (any orientation).
        brain: bool (nk, nj, ni) brain mask on that grid (non-empty).
    """
    kji = np.argwhere(brain)
    centre = volume.index_to_lps(kji[:, ::-1].mean(axis=0))
    transform = sitk.AffineTransform(3)
    transform.SetMatrix((-1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0))
    transform.SetCenter(tuple(float(c) for c in centre))
    return transform


def _smooth(image: sitk.Image, sigma_mm: list[float]) -> sitk.Image:
    """Gaussian smoothing with σ (mm) per axis. ITK's recursive Gaussian needs at least 4 voxels
    along an axis: a shorter axis (a stack of 2-3 thick slabs) is left unsmoothed."""
    if min(image.GetSize()) >= 4:
        return sitk.SmoothingRecursiveGaussian(image, sigma_mm)
    for axis, sigma in enumerate(sigma_mm):
        if image.GetSize()[axis] >= 4:
            image = sitk.RecursiveGaussian(image, sigma, False, sitk.RecursiveGaussianImageFilter.ZeroOrder, axis)
    return image


#: The registration's box: the brain and its mirror image, grown by this much (mm): the optimiser's
#: trial steps past the mirrored brain and the smoothing's tails still read the study's own background.
REGISTRATION_MARGIN_MM = 20.0
#: ITK's recursive Gaussians (the pyramid's smoothing, the metric's gradient) need this many voxels per axis.
MIN_ITK_GAUSSIAN_VOXELS = 4


def registration_region(volume: Volume, brain: np.ndarray, mirror: sitk.Transform) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(start, size) in (i, j, k) voxels of the box holding the brain and its mirror image,
    grown by :data:`REGISTRATION_MARGIN_MM` and clipped to the volume.

    Only brain voxels enter the metric, and the rigid correction moves them from where they are
    (the brain) towards where the mirrored image holds brain (the mirror image of the brain):
    the metric reads neither image outside this box, unless the optimiser strays beyond the margin.

    Args:
        volume: the study's grid.
        brain: bool (nk, nj, ni), non-empty.
        mirror: :func:`mirror_transform` of the study.
    """
    kji = np.argwhere(brain)
    low, high = kji.min(axis=0)[::-1], kji.max(axis=0)[::-1]  # (i, j, k)
    corners = [np.where(np.array(upper), high, low) for upper in itertools.product((False, True), repeat=3)]
    lps_to_index = np.linalg.inv(volume.ijk_to_lps_matrix())
    # the mirror is affine: the box of its images of the brain box's 8 corners holds the mirrored brain
    mirrored = np.array([(lps_to_index @ [*mirror.TransformPoint(tuple(volume.index_to_lps(c))), 1.0])[:3] for c in corners])
    margin = np.ceil(REGISTRATION_MARGIN_MM / np.asarray(volume.spacing_mm))
    size = np.asarray(volume.size_ijk)
    start = np.clip(np.floor(np.minimum(low, mirrored.min(axis=0)) - margin), 0, size - 1).astype(int)
    stop = np.clip(np.ceil(np.maximum(high, mirrored.max(axis=0)) + margin), 0, size - 1).astype(int)
    return tuple(int(v) for v in start), tuple(int(v) for v in stop - start + 1)


def registration_images(volume: Volume, brain: np.ndarray, mirror: sitk.Transform, smooth: sitk.Image,
                        mirrored: sitk.Image) -> tuple[sitk.Image, sitk.Image, sitk.Image]:
    """The smoothed study, its mirror and the brain mask (uint8), cropped to
    :func:`registration_region`. Geometry is kept, so a transform fitted on them is a
    transform of the full grid."""
    start, size = registration_region(volume, brain, mirror)
    mask = volume.with_array(brain.astype(np.uint8)).to_sitk()
    fixed, moving, mask = (sitk.RegionOfInterest(image, size, start) for image in (smooth, mirrored, mask))
    return fixed, moving, mask


def register_mirror(fixed: sitk.Image, moving: sitk.Image, mask: sitk.Image, centre_mm: tuple[float, float, float],
                    *, iterations: int = 60, seed: int = 1) -> sitk.Euler3DTransform:
    """The rigid transform (LPS mm; rotation about ``centre_mm``) that lays ``moving`` onto ``fixed``.

    Mean squares inside ``mask`` over a regular sample of 25 % of the voxels (ITK's sampler
    jitters each sample point; ``seed`` fixes it), regular-step gradient descent, a two-level
    pyramid (shrink 2 with σ = 1 voxel, then the images as given) when every axis has
    :data:`MIN_ITK_GAUSSIAN_VOXELS` voxels, else one level without ITK's Gaussian gradient filters.

    Args:
        fixed, moving: float images on one grid (:func:`registration_images`).
        mask: uint8, 1 where the metric is taken.
        centre_mm: LPS centre of rotation (the mirror plane's point).
        iterations: optimiser iterations per level.
        seed: the sampler's seed.
    """
    registration = sitk.ImageRegistrationMethod()
    registration.SetMetricAsMeanSquares()
    registration.SetMetricFixedMask(mask)
    registration.SetMetricSamplingStrategy(registration.REGULAR)
    registration.SetMetricSamplingPercentage(0.25, seed=seed)
    registration.SetInterpolator(sitk.sitkLinear)
    registration.SetOptimizerAsRegularStepGradientDescent(
        learningRate=2.0, minStep=1e-3, numberOfIterations=iterations, relaxationFactor=0.6
    )
    registration.SetOptimizerScalesFromPhysicalShift()
    rigid = sitk.Euler3DTransform()
    rigid.SetCenter(tuple(float(c) for c in centre_mm))
    registration.SetInitialTransform(rigid, inPlace=False)
    if min(fixed.GetSize()) >= MIN_ITK_GAUSSIAN_VOXELS:
        registration.SetShrinkFactorsPerLevel([2, 1])
        registration.SetSmoothingSigmasPerLevel([1.0, 0.0])
    else:  # a stack of 2-3 thick slabs: ITK's recursive Gaussians (pyramid, gradients) need 4 voxels per axis
        registration.SetShrinkFactorsPerLevel([1])
        registration.SetSmoothingSigmasPerLevel([0.0])
        registration.SetMetricUseFixedImageGradientFilter(False)
        registration.SetMetricUseMovingImageGradientFilter(False)
    registration.SmoothingSigmasAreSpecifiedInPhysicalUnitsOff()
    fitted = registration.Execute(fixed, moving)
    if isinstance(fitted, sitk.CompositeTransform):  # SimpleITK wraps the result; the rigid is its only member
        fitted = fitted.GetNthTransform(0)
    return sitk.Euler3DTransform(fitted)


def smoothed_dwi(dwi: Volume, brain: np.ndarray, *, smoothing_voxels: float = 1.0) -> sitk.Image:
    """The study's DWI divided by its median over ``brain``, 0 outside ``brain``, smoothed with
    σ = ``smoothing_voxels`` voxels per axis (float32, on the DWI grid)."""
    values = np.asarray(dwi.array, dtype=np.float32)
    median = float(np.median(values[brain])) if brain.any() else 1.0
    normalised = dwi.with_array(np.where(brain, values / max(median, 1e-6), 0.0).astype(np.float32)).to_sitk()
    sigma = [smoothing_voxels * s for s in dwi.spacing_mm]
    return _smooth(normalised, sigma) if smoothing_voxels > 0 else normalised


@dataclass(frozen=True)
class ContralateralRegistration:
    """The study's registered left-right mirror: where each voxel's contralateral partner lies.

    The partner of the point x (LPS mm) is ``mirror(fitted(x))``: the rigid correction, then
    the reflection. Resampling an image through both (``sitk.Resample`` maps each output point
    through its transform into the input) lays its mirror image onto the study's grid.

    Attributes:
        smooth: the study's smoothed, brain-median-normalised DWI (:func:`smoothed_dwi`), float32
            on the DWI grid; also the grid every image is resampled onto.
        mirror: the reflection (:func:`mirror_transform`), or None for an empty brain.
        fitted: the rigid correction (:func:`register_mirror`), or None for an empty brain.
    """

    smooth: sitk.Image
    mirror: sitk.Transform | None
    fitted: sitk.Transform | None

    def resample(self, image: sitk.Image, interpolator: int = sitk.sitkLinear) -> np.ndarray:
        """``image`` (on the study's grid) mirrored onto the study's grid, 0 where the mirror leaves
        the field of view; all zeros for an empty brain (no midline to mirror across)."""
        if self.mirror is None or self.fitted is None:
            return np.zeros_like(sitk.GetArrayFromImage(image))
        mirrored = sitk.Resample(image, self.smooth, self.mirror, interpolator, 0.0)
        return sitk.GetArrayFromImage(sitk.Resample(mirrored, self.smooth, self.fitted, interpolator, 0.0))

    def pair(self) -> tuple[np.ndarray, np.ndarray]:
        """(dwi_smoothed, contralateral_smoothed), float32 (nk, nj, ni): :func:`contralateral_dwi`."""
        return (sitk.GetArrayFromImage(self.smooth).astype(np.float32),
                self.resample(self.smooth).astype(np.float32))

    def mirrored_labels(self, labels: np.ndarray) -> np.ndarray:
        """int32 (nk, nj, ni): the label found at each voxel's contralateral partner (nearest
        neighbour; 0 outside the field of view). ``labels`` is an int array on the study's grid."""
        image = sitk.GetImageFromArray(np.asarray(labels, dtype=np.int32))
        image.CopyInformation(self.smooth)
        return self.resample(image, sitk.sitkNearestNeighbor).astype(np.int32)


def register_contralateral(dwi: Volume, brain: np.ndarray, *, smoothing_voxels: float = 1.0,
                           iterations: int = 60) -> ContralateralRegistration:
    """Register the study's left-right mirror onto the study (see the module docstring).

    Args:
        dwi: the b≈1000 trace image (any unit; only ratios are used).
        brain: bool (nk, nj, ni) brain mask on the DWI grid; the metric is taken inside it.
        smoothing_voxels: Gaussian σ in voxels (per axis, so anisotropic voxels are smoothed
            over one voxel in each direction) of the registered images.
        iterations: optimiser iterations of the rigid registration (per pyramid level).
    """
    brain = np.asarray(brain, dtype=bool)
    smooth = smoothed_dwi(dwi, brain, smoothing_voxels=smoothing_voxels)
    if not brain.any():
        return ContralateralRegistration(smooth, None, None)
    mirror = mirror_transform(dwi, brain)
    mirrored = sitk.Resample(smooth, smooth, mirror, sitk.sitkLinear, 0.0)
    fitted = register_mirror(*registration_images(dwi, brain, mirror, smooth, mirrored), mirror.GetCenter(),
                             iterations=iterations)
    return ContralateralRegistration(smooth, mirror, fitted)


def contralateral_dwi(dwi: Volume, brain: np.ndarray, *, smoothing_voxels: float = 1.0, iterations: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """The study's DWI and its registered mirror, both smoothed, on the DWI grid.

    Args:
        dwi: the b≈1000 trace image (any unit; only ratios are used).
        brain: bool (nk, nj, ni) brain mask on the DWI grid; the metric is taken inside it.
        smoothing_voxels: Gaussian σ in voxels (per axis, so anisotropic voxels are smoothed
            over one voxel in each direction), applied to both images.
        iterations: optimiser iterations of the rigid registration (per pyramid level).

    Returns:
        (dwi_smoothed, contralateral_smoothed): float32 (nk, nj, ni); the second is 0 where the
        mirror falls outside the field of view (and everywhere for an empty brain).
    """
    return register_contralateral(dwi, brain, smoothing_voxels=smoothing_voxels, iterations=iterations).pair()


def in_plane_radius_ijk(volume: Volume, radius_mm: float) -> list[int]:
    """(i, j, k) voxels (ITK order) of an in-plane radius of ``radius_mm`` on ``volume``'s grid,
    rounded per axis, 0 along its slice axis: a neighbourhood that never crosses slices."""
    radius = [int(round(radius_mm / s)) for s in volume.spacing_mm]
    radius[find_slice_axis(volume)] = 0
    return radius


def contralateral_search(contralateral: np.ndarray, dwi: Volume, search_mm: float) -> np.ndarray:
    """The brightest contralateral value within ``search_mm`` in-plane of each voxel.

    A bilateral rim is rarely an exact mirror image: the two temporal poles or orbitofrontal
    edges differ by a few millimetres in shape and position, and the rigid registration leaves
    a millimetre or two of its own. Compared voxel by voxel, one side's rim can then face dark
    tissue and pass as one-sided. Against the brightest partner nearby it cannot; an infarct's
    mirror region is normal tissue, about as bright everywhere within a few millimetres.

    The neighbourhood is an in-plane ellipse (radius ``search_mm`` along each in-plane axis,
    rounded to whole voxels), never across slices: a thick-slice stack's neighbour slices lie
    5-6 mm away.

    Args:
        contralateral: float32 (nk, nj, ni), :func:`contralateral_dwi`'s second image.
        dwi: the study's grid (spacing and slice axis).
        search_mm: the in-plane radius (mm); 0 returns ``contralateral`` unchanged.

    Returns:
        float32 (nk, nj, ni) on the DWI grid.
    """
    if search_mm <= 0:
        return contralateral
    radius = in_plane_radius_ijk(dwi, search_mm)
    if not any(radius):
        return contralateral
    image = sitk.GetImageFromArray(np.asarray(contralateral, dtype=np.float32))
    return sitk.GetArrayFromImage(sitk.GrayscaleDilate(image, radius, sitk.sitkBall)).astype(np.float32)


#: Bound of the ``dwi_asymmetry`` channel, in brain-median units (see :func:`dwi_asymmetry`).
ASYMMETRY_CLIP = 4.0


def dwi_asymmetry(dwi: Volume, brain: np.ndarray) -> np.ndarray:
    """The ``dwi_asymmetry`` input channel: smoothed DWI minus its registered contralateral mirror.

    Both images are :func:`contralateral_dwi`'s pair: the DWI divided by its median over
    ``brain`` (so in the same brain-median units as the DWI channel), 0 outside the brain,
    smoothed with σ = 1 voxel per axis. Their difference is set to 0 outside ``brain`` and
    clipped to ±:data:`ASYMMETRY_CLIP`:

    - a one-sided infarct (1.3-3x the brain median on b≈1000) reads about +0.3 to +2, its
      mirror partner the same negated; normal tissue and bilateral bright rims or skull-base
      pile-up read about 0;
    - one-sided artefacts can reach about +7 (up to 8x the median on real scans); the clip
      bounds them at the DWI channel's own bound (``brain_median_clip4``): Lambda+ is roughly
      quadratic in its input, so the model's input stays bounded. The range is symmetric
      because the channel is: mirroring the study mirrors the channel without changing its sign.

    Args:
        dwi: the b≈1000 trace (any unit; only ratios to the brain median are used).
        brain: bool (nk, nj, ni) on the DWI grid: the voxels the median, the registration
            metric and the channel are taken over.

    Returns:
        float32 (nk, nj, ni) on the DWI grid.
    """
    brain = np.asarray(brain, dtype=bool)
    own, contralateral = contralateral_dwi(dwi, brain)
    difference = np.where(brain, own - contralateral, 0.0)
    return np.clip(difference, -ASYMMETRY_CLIP, ASYMMETRY_CLIP).astype(np.float32)
