"""A package's partner network (issue 13's rule 48, `lambdaunet-dwi-pair`): a second network whose probability
is averaged with the package's own before the seed step and the post-processing; attached with
its SHA-256 recorded, verified on every load, and run by segment_study for every caller."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import load_model_package, segment_study
from LambdaSegmentLib.inference.package import attach_partner_network, attach_seed_network
from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.inference.postprocess import keep_seeded_components
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import load_study

from lambdasegment_package_helpers import manifest_of, set_manifest


def three_packages(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Three different untrained packages: the one that segments, its partner, a seed network."""
    return (save_untrained_package(tmp_path / "package", seed=0),
            save_untrained_package(tmp_path / "partner", seed=1),
            save_untrained_package(tmp_path / "seed", seed=2))


@pytest.fixture(scope="module")
def study():
    phantom = make_phantom(size_ijk=(36, 40, 9), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(5.0, -10.0, 20.0))
    return load_study(dwi=phantom.dwi, adc=phantom.adc)


def test_an_attached_partner_is_copied_recorded_loaded_and_reported(tmp_path: Path) -> None:
    package_dir, partner_dir, _seed = three_packages(tmp_path)
    attach_partner_network(package_dir, partner_dir)

    block = manifest_of(package_dir)["partner_network"]
    assert block == {"directory": "partner", "weights_sha256": load_model_package(partner_dir).sha256}
    package = load_model_package(package_dir)
    assert package.partner is not None and package.partner.directory == package_dir / "partner" and package.seed is None
    assert package.identity()["partner_network"] == {"name": package.partner.name, "version": package.partner.version,
                                                     "sha256": block["weights_sha256"]}
    assert load_model_package(package_dir, seed_network=False).partner is None  # its own network alone
    attach_partner_network(package_dir, partner_dir)  # again: replaced, never nested
    assert not (package_dir / "partner" / "partner").exists()


def test_a_swapped_missing_or_nested_partner_is_refused(tmp_path: Path) -> None:
    package_dir, partner_dir, seed_dir = three_packages(tmp_path)
    attach_partner_network(package_dir, partner_dir)
    shutil.rmtree(package_dir / "partner")
    save_untrained_package(package_dir / "partner", seed=5)  # a valid package, but not the one recorded
    with pytest.raises(BadInputError, match="records for its partner network") as error:
        load_model_package(package_dir)
    assert str(package_dir / "partner" / "weights.pt") in str(error.value)
    shutil.rmtree(package_dir / "partner")
    with pytest.raises(BadInputError, match="partner network directory .* not found"):
        load_model_package(package_dir)
    # a partner that carries a seed network of its own: refused before anything is copied
    attach_seed_network(partner_dir, seed_dir, 0.5)
    before = manifest_of(package_dir)
    with pytest.raises(BadInputError, match="a partner network may not carry a seed network of its own"):
        attach_partner_network(package_dir, partner_dir)
    assert manifest_of(package_dir) == before and not (package_dir / "partner").exists()


@pytest.mark.parametrize(
    "block, message",
    [
        ({"directory": "../elsewhere"}, "must name a sub-directory"),
        ({"directory": "partner", "threshold": 0.5}, "exactly directory, weights_sha256"),
        ({"directory": "seed"}, "name the same directory"),
    ],
)
def test_a_malformed_partner_entry_is_refused_naming_the_manifest(tmp_path: Path, block: dict, message: str) -> None:
    package_dir, partner_dir, seed_dir = three_packages(tmp_path)
    attach_seed_network(package_dir, seed_dir, 0.5)
    attach_partner_network(package_dir, partner_dir)
    set_manifest(package_dir, partner_network={**block, "weights_sha256": manifest_of(package_dir)["partner_network"]["weights_sha256"]})
    with pytest.raises(BadInputError, match=message) as error:
        load_model_package(package_dir)
    assert str(package_dir / "manifest.json") in str(error.value)


def test_segment_study_averages_the_two_networks_then_seeds_and_thresholds(tmp_path: Path, study) -> None:
    """The probability is the mean of the two networks' own probabilities (each as its package
    alone computes it), the seed step picks among the averaged map's components, and the mask is
    cut from what it keeps; one progress count runs over the three networks' passes."""
    package_dir, partner_dir, seed_dir = three_packages(tmp_path)
    alone = {name: segment_study(study, load_model_package(directory), device="cpu")
             for name, directory in (("own", package_dir), ("partner", partner_dir), ("seed", seed_dir))}
    brain = alone["own"].brain.array.astype(bool)
    mean = 0.5 * (alone["own"].probability.array + alone["partner"].probability.array)
    threshold = float(np.quantile(mean[brain], 0.7))
    seed_threshold = float(np.quantile(alone["seed"].probability.array[brain], 0.9))
    set_manifest(package_dir, threshold=threshold)
    attach_partner_network(package_dir, partner_dir)
    pair = segment_study(study, load_model_package(package_dir), device="cpu")
    np.testing.assert_allclose(pair.probability.array, mean, atol=1e-6)
    np.testing.assert_array_equal(pair.mask.array, (pair.probability.array >= threshold).astype(np.uint8))

    attach_seed_network(package_dir, seed_dir, seed_threshold)
    calls = []
    result = segment_study(study, load_model_package(package_dir), device="cpu", progress=lambda *call: calls.append(call))

    seed = (alone["seed"].probability.array >= seed_threshold) & brain
    np.testing.assert_allclose(result.unseeded_probability.array, mean, atol=1e-6)
    expected = keep_seeded_components(result.unseeded_probability.array, threshold, brain, seed)
    np.testing.assert_array_equal(result.probability.array, expected)
    np.testing.assert_array_equal(result.mask.array, (expected >= threshold).astype(np.uint8))
    assert 0 < result.mask.array.sum() < pair.mask.array.sum()
    assert calls == [(1, 3), (2, 3), (3, 3)]
    for volume in (result.probability, result.mask):
        assert volume.spacing_mm == study.dwi.spacing_mm
        np.testing.assert_array_equal(volume.direction, study.dwi.direction)


def test_the_flips_and_their_disagreement_are_averaged_over_both_networks(tmp_path: Path, study) -> None:
    package_dir, partner_dir, _seed = three_packages(tmp_path)
    own = segment_study(study, load_model_package(package_dir), device="cpu", tta=True, uncertainty=True)
    partner = segment_study(study, load_model_package(partner_dir), device="cpu", tta=True, uncertainty=True)
    attach_partner_network(package_dir, partner_dir)

    pair = segment_study(study, load_model_package(package_dir), device="cpu", tta=True, uncertainty=True)

    assert pair.tta and len(pair.flips) == 3
    np.testing.assert_allclose(pair.probability.array, 0.5 * (own.probability.array + partner.probability.array), atol=1e-6)
    brain = pair.brain.array.astype(bool)
    np.testing.assert_allclose(pair.disagreement.array[brain],
                               0.5 * (own.disagreement.array + partner.disagreement.array)[brain], atol=1e-6)


def test_the_attach_script_attaches_a_partner_and_refuses_a_threshold_for_it(tmp_path: Path, load_script, capsys) -> None:
    package_dir, partner_dir, _seed = three_packages(tmp_path)
    script = load_script("scripts/attach_network.py")
    with pytest.raises(SystemExit):
        script.main([str(package_dir), str(partner_dir), "--as", "partner", "--threshold", "0.5"])
    assert "meaningless with --as partner" in capsys.readouterr().err and load_model_package(package_dir).partner is None
    assert script.main([str(package_dir), str(partner_dir), "--as", "partner"]) == 0
    assert "partner network" in capsys.readouterr().out and load_model_package(package_dir).partner is not None
