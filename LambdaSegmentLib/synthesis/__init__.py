"""Synthetic stroke DWI studies for training and stress-testing (training-time only).

``generate(seed, **ranges)`` makes one labelled study (DWI b1000, ADC, eADC, infarct
mask) from the MNI152 tissue maps shipped with nilearn and the JHU arterial-territory
atlas (``../shared/data/arterial-atlas``, or ``$LAMBDASEGMENT_ARTERIAL_ATLAS``);
``SyntheticStudies`` serves them on the fly as a torch ``Dataset``. Lesion shapes are
also drawn from the LESYMAP masks (``../shared/data/lesymap-lesions``, or
``$LAMBDASEGMENT_LESYMAP``). ``lesion_signal`` is the one infarct signal model, also for
injecting synthetic infarcts into real images.
"""

from .acquisition import ADC_UNITS
from .dataset import SyntheticStudies
from .generator import DEFAULT_RANGES, SyntheticStudy, check_ranges, generate
from .lesion_signal import LESION_SIGNAL_DEFAULTS, apply_lesion_signal, lesion_signal

__all__ = ["ADC_UNITS", "DEFAULT_RANGES", "LESION_SIGNAL_DEFAULTS", "SyntheticStudies", "SyntheticStudy",
           "apply_lesion_signal", "check_ranges", "generate", "lesion_signal"]
