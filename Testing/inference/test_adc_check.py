"""The post-processing's ADC check (issue 13's rule 63) applied by the engine: ``segment_study``
gives the study's own ADC to a package whose manifest sets ``max_relative_adc``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from LambdaSegmentLib.inference import load_model_package, segment_study
from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.inference.postprocess import PostProcessing, postprocess, relative_adc
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import load_study

from lambdasegment_package_helpers import set_manifest


def test_segment_study_drops_the_components_whose_adc_is_not_restricted(tmp_path: Path) -> None:
    """An untrained package thresholded at its in-brain 70th percentile on an oblique phantom:
    with the check on, the mask is exactly ``postprocess`` with the study's ADC, and its kept
    components are those whose median ADC is at most the limit times the brain's median."""
    phantom = make_phantom(size_ijk=(36, 40, 9), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(5.0, -10.0, 20.0))
    study = load_study(dwi=phantom.dwi, adc=phantom.adc)
    package_dir = save_untrained_package(tmp_path / "package", seed=0)
    plain = segment_study(study, load_model_package(package_dir), device="cpu")
    brain = plain.brain.array.astype(bool)
    threshold = float(np.quantile(plain.probability.array[brain], 0.7))
    ratio = relative_adc(study.adc.array, brain)
    limit = float(np.median(ratio[plain.probability.array >= threshold]))  # about half the candidate voxels pass
    set_manifest(package_dir, threshold=threshold, postprocessing={"max_relative_adc": limit})

    checked = segment_study(study, load_model_package(package_dir), device="cpu")

    np.testing.assert_array_equal(checked.probability.array, plain.probability.array)  # the check only cuts the mask
    expected = postprocess(plain.probability, study.dwi, brain, PostProcessing(threshold=threshold, max_relative_adc=limit),
                           adc=study.adc)
    np.testing.assert_array_equal(checked.mask.array, expected.array)
    unchecked = plain.probability.array >= threshold
    assert 0 < checked.mask.array.sum() < unchecked.sum()  # some components kept, some dropped
    assert np.all(checked.mask.array <= unchecked)
