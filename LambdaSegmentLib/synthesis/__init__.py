"""Synthetic stroke DWI studies for training and stress-testing (training-time only).

``generate(seed, **ranges)`` makes one labelled study (DWI b1000, ADC, eADC, infarct
mask) from the MNI152 tissue maps shipped with nilearn and the JHU arterial-territory
atlas (``../shared/data/arterial-atlas``, or ``$LAMBDASEGMENT_ARTERIAL_ATLAS``);
``SyntheticStudies`` serves them on the fly as a torch ``Dataset``.
"""

from .acquisition import ADC_UNITS
from .dataset import SyntheticStudies
from .generator import DEFAULT_RANGES, SyntheticStudy, generate

__all__ = ["ADC_UNITS", "DEFAULT_RANGES", "SyntheticStudies", "SyntheticStudy", "generate"]
