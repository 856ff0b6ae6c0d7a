"""Labelled studies put on the model grid through the inference preprocessing.

Training and inference share one code path: every study goes through
:func:`LambdaSegmentLib.io.load_study` (units, eADC) and
:func:`LambdaSegmentLib.preprocessing.prepare_input` with the manifest's preprocessing
block; the expert mask follows with ``PreparedInput.to_model_grid`` (nearest neighbour).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from LambdaSegmentLib.io import Study, Volume, load_study, read_volume
from LambdaSegmentLib.preprocessing import prepare_input

from .cases import LabelledCase

if TYPE_CHECKING:
    from LambdaSegmentLib.synthesis.generator import SyntheticStudy


@dataclass(frozen=True)
class PreparedCase:
    """One labelled study on the model grid.

    Attributes:
        name: case name (or ``synthetic-<seed>``).
        channels: float32 (c, t, h, w), the manifest's channel order.
        mask: float32 (t, h, w) in {0, 1}.
    """

    name: str
    channels: np.ndarray
    mask: np.ndarray

    @property
    def num_slices(self) -> int:
        return int(self.channels.shape[1])


def prepare_labelled(name: str, study: Study, mask: Volume, preprocessing: Mapping[str, Any]) -> PreparedCase:
    """A loaded study and its expert mask (on the DWI grid) → :class:`PreparedCase`."""
    return prepare_with_masks(name, study, mask, (), preprocessing)[0]


def prepare_with_masks(name: str, study: Study, mask: Volume, others: Sequence[Volume],
                       preprocessing: Mapping[str, Any]) -> tuple[PreparedCase, list[np.ndarray]]:
    """:func:`prepare_labelled`, and ``others`` (masks on the DWI grid, e.g. a part of the label)
    brought onto the same model grid the same way: bool (t, h, w) each."""
    prepared = prepare_input(study, preprocessing)
    on_grid = [np.asarray(prepared.to_model_grid(m, interpolation="nearest")) > 0.5 for m in (mask, *others)]
    return PreparedCase(name, prepared.channels, on_grid[0].astype(np.float32)), on_grid[1:]


def load_labelled_case(case: LabelledCase, preprocessing: Mapping[str, Any]) -> PreparedCase:
    """Read a case from disk (BadInputError naming the file on bad input) and prepare it."""
    study = load_study(dwi=case.dwi, adc=case.adc, eadc=case.eadc)
    mask = read_volume(case.mask)
    return prepare_labelled(case.name, study, mask, preprocessing)


def load_synthetic(seed: int, ranges: Mapping[str, Any]) -> tuple[Study, "SyntheticStudy"]:
    """``LambdaSegmentLib.synthesis.generate(seed, **ranges)``, loaded like a real study (its
    ADC in its stored unit, converted by ``load_study``, so unit handling is exercised too).

    Returns (study, synthetic): the loaded study and the generator's output (mask, tissue).
    """
    from LambdaSegmentLib.synthesis import generate

    synthetic = generate(int(seed), **dict(ranges))
    study = load_study(dwi=synthetic.dwi, adc=synthetic.adc, adc_unit=synthetic.adc_unit, b_value=synthetic.b_value)
    return study, synthetic


def prepare_synthetic(seed: int, preprocessing: Mapping[str, Any], ranges: Mapping[str, Any]) -> PreparedCase:
    """``LambdaSegmentLib.synthesis.generate(seed, **ranges)`` → :class:`PreparedCase` (see :func:`load_synthetic`)."""
    study, synthetic = load_synthetic(seed, ranges)
    return prepare_labelled(f"synthetic-{seed}", study, synthetic.mask, preprocessing)
