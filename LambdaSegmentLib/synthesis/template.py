"""The anatomical template: MNI152 tissue maps from the nilearn wheel and, at training
time only, the JHU arterial-territory atlas registered onto them.

Everything here is read-only data loaded once per process (``functools.cache``); nothing
is downloaded. Arrays are indexed ``[x, y, z]`` on the template's 1 mm voxel grid
(nibabel order) and ``affine`` maps voxel indices to RAS millimetres (MNI space).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from LambdaSegmentLib.errors import BadInputError

# ../shared/data/arterial-atlas next to the repository; LAMBDASEGMENT_ARTERIAL_ATLAS overrides.
ATLAS_ENV = "LAMBDASEGMENT_ARTERIAL_ATLAS"
DEFAULT_ATLAS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "arterial-atlas" / "ArterialAtlas.nii.gz"

# Level-1 labels of the JHU atlas (ArterialAtlasLabels.txt): 1-30 arterial territories, 31-32 lateral ventricles.
TERRITORY_NAMES = {
    1: "ACA-L", 2: "ACA-R", 3: "MLS-L", 4: "MLS-R", 5: "LLS-L", 6: "LLS-R",
    7: "MCAF-L", 8: "MCAF-R", 9: "MCAP-L", 10: "MCAP-R", 11: "MCAT-L", 12: "MCAT-R",
    13: "MCAO-L", 14: "MCAO-R", 15: "MCAI-L", 16: "MCAI-R", 17: "PCAT-L", 18: "PCAT-R",
    19: "PCAO-L", 20: "PCAO-R", 21: "PCTP-L", 22: "PCTP-R", 23: "ACTP-L", 24: "ACTP-R",
    25: "B-L", 26: "B-R", 27: "SC-L", 28: "SC-R", 29: "IC-L", 30: "IC-R",
}
VENTRICLE_LABELS = (31, 32)
# Level-2 grouping: the major arterial supply of each level-1 territory (same hemisphere).
MAJOR_TERRITORY = {
    **{label: "ACA" for label in (1, 2, 3, 4)},
    **{label: "MCA" for label in range(5, 17)},
    **{label: "PCA" for label in range(17, 25)},
    **{label: "VB" for label in range(25, 31)},
}
# Deep perforator territories, where lacunes occur.
LACUNAR_TERRITORIES = (3, 4, 5, 6, 21, 22, 23, 24, 25, 26)


@dataclass(frozen=True)
class TissueTemplate:
    """MNI152 (ICBM 2009a symmetric) tissue probabilities on a 1 mm grid.

    Attributes:
        gm, wm, csf: float32 (x, y, z) partial-volume fractions in [0, 1], gm + wm + csf <= 1.
        affine: 4x4 voxel index -> RAS mm.
    """

    gm: np.ndarray
    wm: np.ndarray
    csf: np.ndarray
    affine: np.ndarray


@functools.cache
def load_tissue_template() -> TissueTemplate:
    """The GM/WM maps and brain mask shipped inside the nilearn wheel (no download)."""
    from nilearn import datasets

    gm_image = datasets.load_mni152_gm_template(resolution=1)
    gm = np.asarray(gm_image.get_fdata(), dtype=np.float32)
    wm = np.asarray(datasets.load_mni152_wm_template(resolution=1).get_fdata(), dtype=np.float32)
    brain = np.asarray(datasets.load_mni152_brain_mask(resolution=1).get_fdata(), dtype=np.float32)
    total = gm + wm
    scale = np.where(total > 1.0, 1.0 / np.maximum(total, 1e-6), 1.0).astype(np.float32)
    gm, wm = gm * scale, wm * scale
    # CSF: what the brain mask holds beyond GM and WM (ventricles, sulci, cisterns).
    csf = np.clip(brain - gm - wm, 0.0, 1.0).astype(np.float32)
    for array in (gm, wm, csf):
        array.setflags(write=False)
    return TissueTemplate(gm=gm, wm=wm, csf=csf, affine=np.asarray(gm_image.affine, dtype=np.float64))


def atlas_path() -> Path:
    """Where the arterial atlas is read from (env ``LAMBDASEGMENT_ARTERIAL_ATLAS`` or ../shared)."""
    return Path(os.environ.get(ATLAS_ENV, DEFAULT_ATLAS))


def load_territories() -> np.ndarray:
    """JHU arterial territories (labels 1-32) on the tissue template's grid, int16 (x, y, z).

    The atlas sits on a padded 1 mm grid whose affine does not put it in MNI millimetres,
    so it is registered (affine, on brain masks) to the template once per process.
    Training-time only: raises ``BadInputError`` when the atlas is absent.
    """
    return _territories_from(atlas_path())


@functools.cache
def _territories_from(path: Path) -> np.ndarray:
    if not path.exists():
        raise BadInputError(
            str(path),
            "the JHU arterial-territory atlas is needed to synthesise training data and was not found; "
            f"put ArterialAtlas.nii.gz there or set {ATLAS_ENV} (inference never needs it)",
        )
    template = load_tissue_template()
    atlas = sitk.ReadImage(str(path), sitk.sitkFloat32)
    fixed = _template_image(template.gm + template.wm + template.csf * (template.gm + template.wm > 0.05), template.affine)
    moving_mask = sitk.Cast(sitk.BinaryThreshold(atlas, 0.5, 100.0), sitk.sitkFloat32)
    transform = _register_masks(fixed, moving_mask)
    labels = sitk.Resample(atlas, fixed, transform, sitk.sitkNearestNeighbor, 0.0, sitk.sitkFloat32)
    # back to nibabel (x, y, z) order
    territories = np.rint(sitk.GetArrayFromImage(labels)).astype(np.int16).transpose(2, 1, 0)
    territories.setflags(write=False)
    return territories


def _template_image(array_xyz: np.ndarray, affine_ras: np.ndarray) -> sitk.Image:
    """An ITK (LPS) image of a template-grid array."""
    image = sitk.GetImageFromArray(np.ascontiguousarray(array_xyz.transpose(2, 1, 0), dtype=np.float32))
    lps = np.diag([-1.0, -1.0, 1.0]) @ affine_ras[:3, :4]
    spacing = np.linalg.norm(lps[:3, :3], axis=0)
    image.SetSpacing(tuple(float(s) for s in spacing))
    image.SetOrigin(tuple(float(o) for o in lps[:3, 3]))
    image.SetDirection(tuple((lps[:3, :3] / spacing).flatten()))
    return image


def _register_masks(fixed: sitk.Image, moving: sitk.Image) -> sitk.Transform:
    """Affine transform (fixed physical -> moving physical) aligning two smoothed brain masks."""
    # shrink by 4 where the image is large enough (the smoothing needs >= 4 voxels per axis after it)
    shrink = [max(1, min(4, n // 8)) for n in fixed.GetSize()]
    fixed_small = sitk.SmoothingRecursiveGaussian(sitk.Shrink(fixed, shrink), 2.0)
    moving_small = sitk.SmoothingRecursiveGaussian(sitk.Shrink(moving, [max(1, min(4, n // 8)) for n in moving.GetSize()]), 2.0)
    initial = sitk.CenteredTransformInitializer(
        fixed_small, moving_small, sitk.AffineTransform(3), sitk.CenteredTransformInitializerFilter.MOMENTS
    )
    registration = sitk.ImageRegistrationMethod()
    registration.SetMetricAsMeanSquares()
    registration.SetInterpolator(sitk.sitkLinear)
    registration.SetOptimizerAsRegularStepGradientDescent(
        learningRate=1.0, minStep=1e-4, numberOfIterations=200, relaxationFactor=0.7
    )
    registration.SetOptimizerScalesFromPhysicalShift()
    registration.SetInitialTransform(initial, inPlace=False)
    return registration.Execute(fixed_small, moving_small)


@functools.cache
def load_head_distance() -> np.ndarray:
    """Signed distance (mm) to the brain surface on the template grid: < 0 inside, > 0 outside.

    Skull and scalp of skull-on studies are shells at given distances outside the brain.
    """
    from scipy import ndimage

    template = load_tissue_template()
    brain = (template.gm + template.wm + template.csf) > 0.5
    distance = ndimage.distance_transform_edt(~brain) - ndimage.distance_transform_edt(brain)
    distance = distance.astype(np.float32)
    distance.setflags(write=False)
    return distance


SKULL_BASE_SITES = ("orbitofrontal", "temporal", "posterior_fossa", "inferior_cerebellum", "occipital_pole")


@functools.cache
def skull_base_region(sites: tuple[str, ...] = SKULL_BASE_SITES) -> np.ndarray:
    """Template voxels where susceptibility artefacts pile up: near the surface of the
    orbitofrontal cortex, the temporal poles and base, the inferior cerebellum (air-filled
    sinuses, mastoids, petrous bone, the foramen magnum's bone-air-CSF interfaces) and the
    occipital poles (the venous sinuses' confluence and the occipital bone); ``sites``: which
    of :data:`SKULL_BASE_SITES` (all by default)."""
    unknown = set(sites) - set(SKULL_BASE_SITES)
    if unknown:
        raise ValueError(f"unknown skull-base site(s) {sorted(unknown)}; known: {SKULL_BASE_SITES}")
    template = load_tissue_template()
    distance = load_head_distance()
    ijk = np.indices(distance.shape, dtype=np.float32)
    x, y, z = (template.affine[a, a] * ijk[a] + template.affine[a, 3] for a in range(3))
    near_surface = (distance > -8.0) & (distance < 1.0)
    masks = {
        "orbitofrontal": (y > 10.0) & (z > -30.0) & (z < -5.0),
        "temporal": (np.abs(x) > 30.0) & (y > -30.0) & (y < 20.0) & (z > -45.0) & (z < -10.0),
        "posterior_fossa": (np.abs(x) > 15.0) & (y < -40.0) & (z < -30.0),  # mastoid air cells, petrous bone
        "inferior_cerebellum": (y < -35.0) & (z < -42.0),
        "occipital_pole": (y < -85.0) & (z < 25.0),
    }
    region = near_surface & np.logical_or.reduce([masks[site] for site in sites])
    region.setflags(write=False)
    return region
