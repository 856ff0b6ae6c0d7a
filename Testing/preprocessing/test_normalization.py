"""The named intensity normalisations a model manifest can record."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.preprocessing.normalization import NORMALIZATIONS, normalize


def test_brain_median_clip4_divides_by_the_brain_median_and_bounds_artefacts() -> None:
    brain = np.array([True, True, True, False, False])
    dwi = np.array([100.0, 100.0, 250.0, 900.0, -5.0])  # 900: a skull-base artefact outside the brain
    out = normalize("brain_median_clip4", dwi, brain)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [1.0, 1.0, 2.5, 4.0, 0.0])


def test_brain_median_clip4_keeps_lesion_contrast_that_plain_median_keeps() -> None:
    rng = np.random.default_rng(0)
    dwi = rng.uniform(50, 350, size=1000)
    brain = np.ones_like(dwi, bool)
    plain, clipped = normalize("brain_median", dwi, brain), normalize("brain_median_clip4", dwi, brain)
    inside = plain <= 4.0
    np.testing.assert_allclose(clipped[inside], plain[inside], rtol=1e-6)


def test_every_median_normalisation_refuses_an_image_without_brain_signal() -> None:
    for name in ("brain_median", "brain_median_clip4"):
        with pytest.raises(BadInputError, match="no brain signal"):
            normalize(name, np.zeros(10), np.ones(10, bool))
    assert {"none", "brain_median", "brain_median_clip4", "brain_zscore", "clip01"} <= set(NORMALIZATIONS)
