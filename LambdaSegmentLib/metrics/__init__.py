"""Segmentation metrics: the paper's (per-slice DSC, pixel recall/precision/F1) and ISLES'22's
(volume Dice, lesion-wise F1, |ΔV| mL, |Δ lesion count|), and the ADC-threshold rule they
are compared with.

Per case: :func:`score_case` → :class:`CaseScores`; over cases: :func:`mean_scores`.
"""

from .adc_rule import adc_threshold_rule
from .case_scores import CaseScores, mean_scores, score_case
from .isles import (
    LesionDetection,
    absolute_lesion_count_difference,
    absolute_volume_difference_ml,
    label_lesions,
    lesion_detection,
    lesion_wise_f1,
    volume_dice,
)
from .paper import PAPER_EPSILON, PixelScores, per_slice_dice, pixel_scores

__all__ = [
    "PAPER_EPSILON",
    "CaseScores",
    "LesionDetection",
    "PixelScores",
    "absolute_lesion_count_difference",
    "absolute_volume_difference_ml",
    "adc_threshold_rule",
    "label_lesions",
    "lesion_detection",
    "lesion_wise_f1",
    "mean_scores",
    "per_slice_dice",
    "pixel_scores",
    "score_case",
    "volume_dice",
]
