"""Slab-wise inference equals one-pass inference when the halo covers the receptive field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from LambdaSegmentLib.inference import plan_slabs, predict_probability
from LambdaSegmentLib.inference.engine import plan_for_budget
from LambdaSegmentLib.inference.memory import bytes_per_slice, parameter_bytes
from LambdaSegmentLib.models import create_model

SMALL = dict(widths=(8, 16, 32), value_dim=8, key_dim=4, intra_depth=2)
CPU = torch.device("cpu")


def calibrated(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial BatchNorm statistics from one random batch, then eval mode."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.momentum = None
    with torch.no_grad():
        model.train()(torch.randn(1, 2, 6, 32, 32))
    return model.eval()


def test_slab_cores_partition_the_stack_and_windows_add_the_halo() -> None:
    slabs = plan_slabs(20, max_window=10, halo=4)
    assert [(s.core_start, s.core_stop) for s in slabs] == [(i, i + 2) for i in range(0, 20, 2)]
    assert all(s.start == max(0, s.core_start - 4) and s.stop == min(20, s.core_stop + 4) for s in slabs)
    assert all(s.stop - s.start <= 10 for s in slabs)
    assert plan_slabs(20, max_window=20, halo=4) == plan_slabs(20, max_window=99, halo=4)
    assert len(plan_slabs(20, max_window=20, halo=4)) == 1


def test_window_smaller_than_the_halo_still_outputs_every_slice_once() -> None:
    slabs = plan_slabs(7, max_window=2, halo=3)
    assert [s.core_start for s in slabs] == list(range(7))
    assert all(s.core_stop == s.core_start + 1 for s in slabs)


@pytest.mark.parametrize("name", ["lambda_unet", "lambda_unet_3d", "unet"])
def test_slab_inference_equals_one_pass_inference(name: str) -> None:
    config = SMALL if name != "unet" else dict(widths=(8, 16, 32))
    # in float64, where slab and one pass sum alike up to rounding far below float32's: in float32 the
    # order of a convolution's sums differs by CPU between the two shapes (2.4e-5 apart on an AMD
    # EPYC), as large as a halo's error may be
    model = calibrated(create_model(name, **config)).double()
    channels = np.random.default_rng(0).normal(size=(2, 17, 32, 32))
    one_pass = predict_probability(model, channels, device=CPU)
    halo = model.slice_receptive_radius
    slabs = plan_slabs(17, max_window=2 * halo + 3, halo=halo)
    assert len(slabs) > 3
    calls = []
    slabwise = predict_probability(model, channels, device=CPU, slabs=slabs, progress=lambda d, t: calls.append((d, t)))
    np.testing.assert_allclose(slabwise, one_pass, rtol=0, atol=1e-6)
    assert calls == [(i, len(slabs)) for i in range(1, len(slabs) + 1)]


def test_a_halo_short_of_the_receptive_field_changes_the_result() -> None:
    """Guards the test above: the slab boundaries really matter for a 2.5D model."""
    model = calibrated(create_model("lambda_unet", **SMALL))
    channels = np.random.default_rng(1).normal(size=(2, 12, 32, 32)).astype(np.float32)
    one_pass = predict_probability(model, channels, device=CPU)
    short = predict_probability(model, channels, device=CPU, slabs=plan_slabs(12, max_window=6, halo=1))
    assert np.abs(short - one_pass).max() > 1e-4


def test_cpu_inference_is_deterministic() -> None:
    model = calibrated(create_model("lambda_unet", **SMALL))
    channels = np.random.default_rng(2).normal(size=(2, 6, 32, 32)).astype(np.float32)
    first = predict_probability(model, channels, device=CPU)
    assert np.array_equal(first, predict_probability(model, channels, device=CPU))


def test_memory_budget_bounds_the_window() -> None:
    model = create_model("lambda_unet", **SMALL)
    per_slice = bytes_per_slice(model, 256, 256)
    budget = parameter_bytes(model) + 12 * per_slice
    slabs = plan_for_budget(model, (2, 40, 256, 256), model.slice_receptive_radius, budget)
    assert len(slabs) > 1
    assert max(s.stop - s.start for s in slabs) <= 12
    assert len(plan_for_budget(model, (2, 40, 256, 256), 4, parameter_bytes(model) + 40 * per_slice)) == 1


def test_a_model_that_outputs_nan_is_refused_not_thresholded(tmp_path) -> None:
    """NaN probabilities would silently become 'no infarct'; segment_study refuses them."""
    from LambdaSegmentLib.errors import BadInputError
    from LambdaSegmentLib.inference import load_model_package, segment_study
    from LambdaSegmentLib.inference.phantom import make_phantom
    from LambdaSegmentLib.inference.untrained import save_untrained_package
    from LambdaSegmentLib.io import load_study

    package = load_model_package(save_untrained_package(tmp_path / "model"))
    with torch.no_grad():
        package.model.outc.bias.fill_(float("nan"))
    phantom = make_phantom(size_ijk=(32, 36, 6), spacing_mm=(4.0, 4.0, 6.0))
    with pytest.raises(BadInputError, match="non-finite") as error:
        segment_study(load_study(dwi=phantom.dwi, adc=phantom.adc), package, device="cpu")
    assert error.value.source == str(package.directory)


@pytest.mark.parametrize("logit", [-1e24, 3e6])
def test_a_runaway_logit_is_refused_not_read_as_a_confident_answer(tmp_path, logit: float) -> None:
    """sigmoid(-1e24) = 0 looks like 'no infarct' (the 2.0.0 weights on a 226 mL infarct);
    segment_study refuses a study with any |logit| > RUNAWAY_LOGIT."""
    from LambdaSegmentLib.errors import BadInputError
    from LambdaSegmentLib.inference import load_model_package, segment_study
    from LambdaSegmentLib.inference.phantom import make_phantom
    from LambdaSegmentLib.inference.untrained import save_untrained_package
    from LambdaSegmentLib.io import load_study

    package = load_model_package(save_untrained_package(tmp_path / "model"))
    with torch.no_grad():
        package.model.outc.bias.fill_(logit)
    phantom = make_phantom(size_ijk=(32, 36, 6), spacing_mm=(4.0, 4.0, 6.0))
    with pytest.raises(BadInputError, match="runaway"):
        segment_study(load_study(dwi=phantom.dwi, adc=phantom.adc), package, device="cpu")


def test_large_but_sane_logits_are_kept() -> None:
    model = create_model("lambda_unet", **SMALL).eval()
    with torch.no_grad():
        model.outc.bias.fill_(-500.0)
    probability = predict_probability(model, np.ones((2, 3, 32, 32), dtype=np.float32), device=CPU)
    assert np.isfinite(probability).all() and probability.max() < 1e-6
