"""Where false positives lie: the brain's edge band, the posterior fossa, or elsewhere.

Used to measure the failure the real scans show (bright bilateral rims at the edge of a
skull-stripped brain, susceptibility in the inferior cerebellum). Exclusive regions, in
this order:

1. ``edge``: within ``edge_mm`` (6 mm) of the brain mask's edge;
2. ``posterior_fossa``: the JHU atlas' vertebro-basilar territories (labels 25-30:
   brainstem and cerebellum), brought onto the study by an affine registration of the
   MNI152 brain mask to the study's brain mask (``synthesis.template``; evaluation-time
   only, it needs the atlas in ``../shared`` and nilearn);
3. ``elsewhere``.

A second split of the same voxels (:func:`false_positive_ml_by_contact`, issue 13's rule 79)
tells the infarct's own border, which a clinician trims, from separate marks, which a clinician
has to find and delete: ``border`` voxels belong to a predicted component that holds a reference
voxel, ``detached`` ones to a component that holds none (lesion-wise F1's false detections).
"""

from __future__ import annotations

import numpy as np
import SimpleITK as sitk

from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.metrics.isles import label_lesions

EDGE_MM = 6.0
POSTERIOR_FOSSA_LABELS = tuple(range(25, 31))  # basilar, superior and inferior cerebellar, both sides


def posterior_fossa_mask(volume: Volume, brain: np.ndarray) -> np.ndarray:
    """bool (nk, nj, ni): the brainstem and cerebellum on ``volume``'s grid.

    Args:
        volume: the study's grid.
        brain: bool brain mask on that grid (the registration target).
    """
    from LambdaSegmentLib.synthesis.template import _register_masks, _template_image, load_territories, load_tissue_template

    template = load_tissue_template()
    template_brain = _template_image(((template.gm + template.wm + template.csf) > 0.5).astype(np.float32), template.affine)
    study_brain = sitk.Cast(volume.with_array(np.asarray(brain, dtype=np.float32)).to_sitk(), sitk.sitkFloat32)
    transform = _register_masks(study_brain, template_brain)
    territories = _template_image(load_territories().astype(np.float32), template.affine)
    labels = sitk.Resample(territories, study_brain, transform, sitk.sitkNearestNeighbor, 0.0, sitk.sitkFloat32)
    labels = np.rint(sitk.GetArrayFromImage(labels)).astype(np.int16)
    return np.isin(labels, POSTERIOR_FOSSA_LABELS) & np.asarray(brain, dtype=bool)


def false_positive_ml_by_region(
    prediction: np.ndarray,
    truth: np.ndarray,
    *,
    depth_mm: np.ndarray,
    posterior_fossa: np.ndarray,
    voxel_volume_mm3: float,
    edge_mm: float = EDGE_MM,
) -> dict[str, float]:
    """False-positive mL (predicted, not in ``truth``) split into edge / posterior fossa / elsewhere.

    Args:
        prediction, truth: binary (nk, nj, ni).
        depth_mm: distance below the brain edge (``inference.postprocess.edge_depth_mm``);
            0 outside the brain, so predictions outside the brain count as ``edge``.
        posterior_fossa: bool, :func:`posterior_fossa_mask`.
        voxel_volume_mm3: one voxel's volume.
    """
    false_positive = (np.asarray(prediction) != 0) & (np.asarray(truth) == 0)
    edge = false_positive & (depth_mm <= edge_mm)
    fossa = false_positive & ~edge & posterior_fossa
    ml = voxel_volume_mm3 / 1000.0
    return {
        "fp_ml": float(false_positive.sum() * ml),
        "fp_edge_ml": float(edge.sum() * ml),
        "fp_posterior_fossa_ml": float(fossa.sum() * ml),
        "fp_elsewhere_ml": float((false_positive & ~edge & ~fossa).sum() * ml),
    }


def false_positive_ml_by_contact(prediction: np.ndarray, truth: np.ndarray, *, voxel_volume_mm3: float) -> dict[str, float]:
    """False-positive mL split into the reference lesions' border and detached marks.

    Components are 26-connected, as :func:`metrics.isles.lesion_detection` counts them, so
    ``fp_detached_ml`` is the volume of lesion-wise F1's false-positive detections.

    Args:
        prediction, truth: binary (nk, nj, ni).
        voxel_volume_mm3: one voxel's volume.

    Returns:
        ``fp_border_ml`` (false-positive voxels of predicted components that hold a reference
        voxel) and ``fp_detached_ml`` (those of components that hold none); they add up to the
        false-positive mL.
    """
    predicted, reference = np.asarray(prediction) != 0, np.asarray(truth) != 0
    labels, _ = label_lesions(predicted)
    touching = np.unique(labels[predicted & reference])
    false_positive = predicted & ~reference
    border = false_positive & np.isin(labels, touching[touching != 0])
    ml = voxel_volume_mm3 / 1000.0
    return {"fp_border_ml": float(border.sum() * ml), "fp_detached_ml": float((false_positive & ~border).sum() * ml)}
