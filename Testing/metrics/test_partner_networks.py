"""``benchmarks/real_scan_cv.py --partner-packages``: two networks as one, their probabilities
averaged before the seed step and the post-processing (issue 13's rule 48), by the product's
own partner network on a copy of the fold package (``paired_package``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from LambdaSegmentLib.inference import load_model_package, segment_study
from LambdaSegmentLib.inference.package import attach_seed_network
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import load_study
from LambdaSegmentLib.synthesis import generate


@pytest.fixture(scope="module")
def cv(load_script):
    return load_script("benchmarks/real_scan_cv.py")


@pytest.fixture(scope="module")
def small_study():
    """A skull-stripped synthetic study on a coarse grid (4 mm in-plane, 6 mm slices): seconds to segment."""
    made = generate(4801, skull_stripped=True, in_plane_spacing_mm=4.0, slice_thickness_mm=6.0)
    return load_study(dwi=made.dwi, adc=made.adc), np.asarray(made.mask.array) > 0


@pytest.mark.needs_atlas
def test_the_partner_probability_is_the_mean_of_both_networks(cv, small_study, tmp_path: Path) -> None:
    study, truth = small_study
    own = load_model_package(save_untrained_package(tmp_path / "own", seed=1))
    partner = load_model_package(save_untrained_package(tmp_path / "partner", seed=2))
    expected = 0.5 * (np.asarray(segment_study(study, own, device="cpu").probability.array)
                      + np.asarray(segment_study(study, partner, device="cpu").probability.array))

    pair = cv.paired_package(own, partner, tmp_path / "pair")
    prepared = cv.prepare("small", study, truth, pair, regions=False)

    np.testing.assert_allclose(prepared.probability, expected, atol=1e-6)
    alone = cv.prepare("small", study, truth, own, regions=False)
    assert not np.allclose(alone.probability, prepared.probability)  # the partner did change it
    # with the flips, both networks' flip means are averaged too
    flipped = cv.prepare("small", study, truth, pair, regions=False, flips=True)
    np.testing.assert_allclose(flipped.flipped_probability, 0.5 * (
        np.asarray(segment_study(study, own, device="cpu", tta=True).probability.array)
        + np.asarray(segment_study(study, partner, device="cpu", tta=True).probability.array)), atol=1e-6)


def test_a_partner_with_a_seed_network_of_its_own_is_refused(cv, tmp_path: Path) -> None:
    own = load_model_package(save_untrained_package(tmp_path / "own", seed=1))
    seeded_dir = save_untrained_package(tmp_path / "seeded", seed=2)
    attach_seed_network(seeded_dir, save_untrained_package(tmp_path / "seed", seed=3), 0.5)
    with pytest.raises(SystemExit, match="seed networks or partners"):
        cv.paired_package(own, load_model_package(seeded_dir), tmp_path / "pair")
