"""segment_study: probability and mask on the DWI grid, from the optimised copy of the package's model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from LambdaSegmentLib.inference import load_model_package, predict_probability, segment_study
from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import load_study
from LambdaSegmentLib.preprocessing import prepare_input
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask


def test_segment_study_returns_maps_on_the_dwi_grid_equal_to_the_plain_model(tmp_path: Path) -> None:
    package = load_model_package(save_untrained_package(tmp_path / "model", threshold=0.6))
    phantom = make_phantom(size_ijk=(36, 40, 9), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(5.0, -10.0, 20.0))
    study = load_study(dwi=phantom.dwi, adc=phantom.adc)
    calls = []
    result = segment_study(study, package, device="cpu", progress=lambda done, total: calls.append((done, total)))

    for volume in (result.probability, result.mask):
        assert volume.array.shape == study.dwi.array.shape
        assert volume.spacing_mm == study.dwi.spacing_mm and volume.origin_mm == study.dwi.origin_mm
        np.testing.assert_array_equal(volume.direction, study.dwi.direction)
    assert result.mask.array.dtype == np.uint8
    np.testing.assert_array_equal(result.mask.array, (result.probability.array >= 0.6).astype(np.uint8))
    assert result.threshold == 0.6 and result.device == "cpu" and result.num_slabs == 1 and calls == [(1, 1)]

    prepared = prepare_input(study, package.manifest["preprocessing"])
    plain = predict_probability(package.model, prepared.channels, device=torch.device("cpu"))
    brain = result.brain.array.astype(bool)
    np.testing.assert_array_equal(brain, brain_mask(study.dwi))  # the manifest's (default) method
    assert result.brain_mask_method == "dwi_morphology"
    np.testing.assert_allclose(result.probability.array[brain], prepared.to_dwi_grid(plain).array[brain], atol=1e-4)
    assert not result.probability.array[~brain].any()  # nothing outside the brain
    # The package's own model is untouched (BatchNorms still there, weights on the CPU).
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in package.model.modules())
    assert all(p.device.type == "cpu" for p in package.model.parameters())


def test_segment_study_prepares_a_dwi_asymmetry_channel_as_training_does(tmp_path: Path) -> None:
    """A three-channel package ([eADC, DWI, dwi_asymmetry]): the engine feeds its model what
    prepare_input makes from the manifest (the same call the training data goes through), with
    and without the test-time flips."""
    from LambdaSegmentLib.inference.untrained import DEFAULT_PREPROCESSING, SMALL_LAMBDA_UNET

    preprocessing = {**DEFAULT_PREPROCESSING, "channels": ["eadc", "dwi", "dwi_asymmetry"]}
    package = load_model_package(save_untrained_package(tmp_path / "model", config={**SMALL_LAMBDA_UNET, "in_channels": 3},
                                                        preprocessing=preprocessing))
    phantom = make_phantom(size_ijk=(36, 40, 9), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(5.0, -10.0, 20.0))
    study = load_study(dwi=phantom.dwi, adc=phantom.adc)
    result = segment_study(study, package, device="cpu")
    flipped = segment_study(study, package, device="cpu", tta=True)

    prepared = prepare_input(study, preprocessing)
    assert prepared.channels.shape[0] == 3
    plain = predict_probability(package.model, prepared.channels, device=torch.device("cpu"))
    brain = result.brain.array.astype(bool)
    np.testing.assert_allclose(result.probability.array[brain], prepared.to_dwi_grid(plain).array[brain], atol=1e-4)
    assert flipped.probability.array.shape == study.dwi.array.shape and len(flipped.flips) > 1
