"""No infarct outside the brain: ``segment_study`` zeroes probability and mask outside the
brain mask, on a skull-on synthetic study given an infarct-like artefact in the scalp."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from LambdaSegmentLib.inference import load_model_package, segment_study
from LambdaSegmentLib.io import load_study
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask
from LambdaSegmentLib.synthesis import generate


@pytest.mark.needs_atlas
def test_predictions_outside_the_brain_mask_are_zero() -> None:
    synthetic = generate(3004, skull_stripped=False, in_plane_spacing_mm=2.0, slice_thickness_mm=6.0,
                         oblique_probability=1.0, lesion_kind="territorial", adc_unit="1e-3 mm2/s")
    truth = np.asarray(synthetic.tissue.array) > 0
    dwi = np.asarray(synthetic.dwi.array, dtype=np.float32).copy()
    adc = np.asarray(synthetic.adc.array, dtype=np.float32).copy()
    # An infarct look-alike in the scalp: bright on DWI, low ADC (what a fat or vessel artefact
    # can look like), in the middle slice, just outside the brain.
    k = dwi.shape[0] // 2
    rows, columns = np.nonzero(truth[k])
    j, i = rows.min() - 6, int(np.median(columns))
    brain_level = float(np.median(dwi[truth]))
    dwi[k - 1 : k + 2, j - 3 : j + 3, i - 3 : i + 3] = 2.5 * brain_level
    adc[k - 1 : k + 2, j - 3 : j + 3, i - 3 : i + 3] = 0.4
    study = load_study(dwi=synthetic.dwi.with_array(dwi), adc=synthetic.adc.with_array(adc))
    package = load_model_package()

    result = segment_study(study, package, device="cpu")
    brain = brain_mask(study.dwi)
    np.testing.assert_array_equal(result.brain.array.astype(bool), brain)
    assert not brain[k, j - 3 : j + 3, i - 3 : i + 3].any()  # the artefact is outside the brain mask
    assert not result.probability.array[~brain].any() and not result.mask.array[~brain].any()
    assert result.mask.array[brain].any()  # the real infarct is still found
    assert result.brain_volume_ml == pytest.approx(brain.sum() * study.dwi.voxel_volume_mm3 / 1000)

    # Without the brain mask (every nonzero voxel counts as brain) the network does mark voxels
    # outside the brain here: the mask is what removes them. (Its mask may not: the artefact sits
    # on the midline, where the contralateral check can drop it as bilateral.)
    unmasked = dataclasses.replace(package, manifest={**package.manifest, "brain_mask": "nonzero"})
    raw = segment_study(study, unmasked, device="cpu")
    assert raw.brain_mask_method == "nonzero"
    network = raw.unseeded_probability if raw.unseeded_probability is not None else raw.probability
    assert (network.array[~brain] >= raw.threshold).any()
    # Inside the brain the network's output is the same; the post-processing may differ a little,
    # because its edge depth and its contralateral registration are measured on the brain mask.
    np.testing.assert_array_equal(result.probability.array[brain], raw.probability.array[brain])
