"""All metrics of one case in one record, and their mean over cases (the paper's averaging)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from .isles import absolute_lesion_count_difference, absolute_volume_difference_ml, lesion_detection, volume_dice
from .paper import per_slice_dice, pixel_scores


@dataclass(frozen=True)
class CaseScores:
    """Every reported metric for one case.

    Attributes:
        dsc: the paper's per-slice DSC (ε = 1e-4, mean over slices).
        recall, precision, f1: the paper's pixel-level scores (both empty = 1).
        volume_dice: 2|P∩G| / (|P| + |G|) over the volume.
        lesion_f1: ISLES'22 lesion-wise F1 (26-connected components).
        abs_volume_difference_ml: |ΔV| in mL.
        abs_lesion_count_difference: |Δ lesion count|.
        predicted_volume_ml, true_volume_ml: lesion volumes in mL.
        true_lesions, predicted_lesions: connected-lesion counts.
    """

    dsc: float
    recall: float
    precision: float
    f1: float
    volume_dice: float
    lesion_f1: float
    abs_volume_difference_ml: float
    abs_lesion_count_difference: int
    predicted_volume_ml: float
    true_volume_ml: float
    true_lesions: int
    predicted_lesions: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def score_case(prediction: np.ndarray, truth: np.ndarray, *, voxel_volume_mm3: float, slice_axis: int) -> CaseScores:
    """All metrics of a binary 3D prediction against the expert mask on the same grid.

    Args:
        prediction, truth: binary arrays of one shape (nonzero = lesion).
        voxel_volume_mm3: volume of one voxel (product of the spacings).
        slice_axis: the *array* axis indexing slices (for the per-slice DSC).
    """
    p, g = np.asarray(prediction) != 0, np.asarray(truth) != 0
    pixels = pixel_scores(p, g)
    detection = lesion_detection(p, g)
    voxel_ml = float(voxel_volume_mm3) / 1000.0
    return CaseScores(
        dsc=per_slice_dice(p, g, slice_axis=slice_axis),
        recall=pixels.recall,
        precision=pixels.precision,
        f1=pixels.f1,
        volume_dice=volume_dice(p, g),
        lesion_f1=detection.f1,
        abs_volume_difference_ml=absolute_volume_difference_ml(p, g, voxel_volume_mm3),
        abs_lesion_count_difference=absolute_lesion_count_difference(p, g),
        predicted_volume_ml=int(p.sum()) * voxel_ml,
        true_volume_ml=int(g.sum()) * voxel_ml,
        true_lesions=detection.true_count,
        predicted_lesions=detection.predicted_count,
    )


def mean_scores(cases: list[CaseScores]) -> dict[str, float]:
    """Mean of every metric over cases (the paper averages per-patient scores)."""
    if not cases:
        raise ValueError("no cases to average")
    return {f.name: float(np.mean([getattr(case, f.name) for case in cases])) for f in fields(CaseScores)}
