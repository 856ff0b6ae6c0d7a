"""A package's seed network (issue 13's stage-1 seeds): attached with its SHA-256 recorded,
verified on every load, and applied by segment_study before the manifest's post-processing."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import load_model_package, predict_probability, segment_study
from LambdaSegmentLib.inference.package import attach_seed_network
from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.inference.postprocess import keep_seeded_components
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import load_study
from LambdaSegmentLib.preprocessing import prepare_input

from lambdasegment_package_helpers import manifest_of, set_manifest


def two_packages(tmp_path: Path, threshold: float = 0.5) -> tuple[Path, Path]:
    """Two different untrained packages: the one that segments, and its seed network."""
    return (save_untrained_package(tmp_path / "package", seed=0, threshold=threshold),
            save_untrained_package(tmp_path / "stage1", seed=1))


def test_an_attached_seed_network_is_copied_recorded_and_loaded(tmp_path: Path) -> None:
    package_dir, seed_dir = two_packages(tmp_path)
    attach_seed_network(package_dir, seed_dir, 0.45)

    block = manifest_of(package_dir)["seed_network"]
    assert block == {"directory": "seed", "threshold": 0.45, "weights_sha256": load_model_package(seed_dir).sha256}
    package = load_model_package(package_dir)
    assert package.seed is not None and package.seed.directory == package_dir / "seed" and package.seed_threshold == 0.45
    for expected, actual in zip(load_model_package(seed_dir).model.state_dict().values(), package.seed.model.state_dict().values()):
        assert torch.equal(expected, actual)
    identity = package.identity()
    assert identity["sha256"] == package.sha256
    assert identity["seed_network"] == {"name": package.seed.name, "version": package.seed.version,
                                        "sha256": block["weights_sha256"], "threshold": 0.45}
    assert "seed_network" not in load_model_package(seed_dir).identity()  # the source package is untouched
    # attaching again replaces the seed network, never nests it
    attach_seed_network(package_dir, seed_dir, 0.6)
    assert load_model_package(package_dir).seed_threshold == 0.6 and not (package_dir / "seed" / "seed").exists()


def test_a_swapped_or_altered_seed_network_is_refused(tmp_path: Path) -> None:
    package_dir, seed_dir = two_packages(tmp_path)
    attach_seed_network(package_dir, seed_dir, 0.5)
    # another valid package put in the seed's place: its own manifest agrees, the package's record does not
    shutil.rmtree(package_dir / "seed")
    save_untrained_package(package_dir / "seed", seed=2)
    with pytest.raises(BadInputError, match="differs from the .* records for its seed network") as error:
        load_model_package(package_dir)
    assert str(package_dir / "seed" / "weights.pt") in str(error.value)
    # the seed's weights altered: its own manifest's hash refuses them first
    attach_seed_network(package_dir, seed_dir, 0.5)
    with open(package_dir / "seed" / "weights.pt", "ab") as stream:
        stream.write(b"\0")
    with pytest.raises(BadInputError, match="SHA-256 .* differs from the manifest's"):
        load_model_package(package_dir)
    shutil.rmtree(package_dir / "seed")
    with pytest.raises(BadInputError, match="seed network directory .* not found"):
        load_model_package(package_dir)


@pytest.mark.parametrize(
    "block, message",
    [
        ({"directory": "../elsewhere", "threshold": 0.5}, "must name a sub-directory"),
        ({"directory": "/abs", "threshold": 0.5}, "must name a sub-directory"),
        ({"directory": "seed", "threshold": 1.5}, "threshold must be a probability"),
        ({"directory": "seed", "threshold": True}, "threshold must be a probability"),
        ({"directory": "seed"}, "exactly directory, threshold, weights_sha256"),
    ],
)
def test_a_malformed_seed_network_entry_is_refused_naming_the_manifest(tmp_path: Path, block: dict, message: str) -> None:
    package_dir, seed_dir = two_packages(tmp_path)
    attach_seed_network(package_dir, seed_dir, 0.5)
    digest = manifest_of(package_dir)["seed_network"]["weights_sha256"]
    set_manifest(package_dir, seed_network={**block, **({"weights_sha256": digest} if "threshold" in block else {})})
    with pytest.raises(BadInputError, match=message) as error:
        load_model_package(package_dir)
    assert str(package_dir / "manifest.json") in str(error.value)


def test_a_seed_network_with_a_seed_of_its_own_is_refused(tmp_path: Path) -> None:
    package_dir, seed_dir = two_packages(tmp_path)
    third = save_untrained_package(tmp_path / "third", seed=3)
    attach_seed_network(seed_dir, third, 0.5)
    before = manifest_of(package_dir)
    with pytest.raises(BadInputError, match="may not carry a seed network of its own"):
        attach_seed_network(package_dir, seed_dir, 0.5)
    assert manifest_of(package_dir) == before and not (package_dir / "seed").exists()  # nothing changed
    # nested by hand: refused on load
    shutil.copytree(seed_dir, package_dir / "seed")
    set_manifest(package_dir, seed_network={"directory": "seed", "threshold": 0.5,
                                            "weights_sha256": load_model_package(seed_dir).sha256})
    with pytest.raises(BadInputError, match="may not carry a seed network of its own"):
        load_model_package(package_dir)


def segmented_alone(tmp_path: Path) -> tuple:
    """An oblique phantom study, :func:`two_packages`, and each package's own segmentation of it
    (before any seed network is attached): (study, package_dir, seed_dir, plain, seed_alone)."""
    phantom = make_phantom(size_ijk=(36, 40, 9), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(5.0, -10.0, 20.0))
    study = load_study(dwi=phantom.dwi, adc=phantom.adc)
    package_dir, seed_dir = two_packages(tmp_path)
    plain = segment_study(study, load_model_package(package_dir), device="cpu")
    seed_alone = segment_study(study, load_model_package(seed_dir), device="cpu")
    return study, package_dir, seed_dir, plain, seed_alone


def test_segment_study_keeps_only_the_components_the_seed_network_detects(tmp_path: Path) -> None:
    """The engine runs both networks and keeps exactly the components of the package's own
    thresholded map that hold a voxel where the seed network reaches its threshold; the
    probability it returns is 0 elsewhere, and the mask is cut from it. Thresholds at the two
    untrained networks' in-brain medians, so that some components are seeded and some not."""
    study, package_dir, seed_dir, plain, seed_alone = segmented_alone(tmp_path)
    brain = plain.brain.array.astype(bool)
    own_threshold = float(np.quantile(plain.probability.array[brain], 0.7))
    seed_threshold = float(np.quantile(seed_alone.probability.array[brain], 0.9))
    set_manifest(package_dir, threshold=own_threshold)
    attach_seed_network(package_dir, seed_dir, seed_threshold)

    calls = []
    result = segment_study(study, load_model_package(package_dir), device="cpu", progress=lambda *call: calls.append(call))

    seed = (seed_alone.probability.array >= seed_threshold) & brain
    np.testing.assert_array_equal(result.seed.array, seed.astype(np.uint8))
    np.testing.assert_array_equal(result.unseeded_probability.array, plain.probability.array)
    expected = keep_seeded_components(plain.probability.array, own_threshold, brain, seed)
    np.testing.assert_array_equal(result.probability.array, expected)
    np.testing.assert_array_equal(result.mask.array, (expected >= own_threshold).astype(np.uint8))
    unseeded_mask = plain.probability.array >= own_threshold
    assert 0 < result.mask.array.sum() < unseeded_mask.sum()  # some components kept, some dropped
    assert calls == [(1, 2), (2, 2)]  # one progress count over both networks' passes
    for volume in (result.seed, result.probability, result.mask):
        assert volume.spacing_mm == study.dwi.spacing_mm
        np.testing.assert_array_equal(volume.direction, study.dwi.direction)
    # the seed network's own pass is the plain one, as the seed package alone computes it
    prepared = prepare_input(study, load_model_package(seed_dir).manifest["preprocessing"])
    alone = predict_probability(load_model_package(seed_dir).model, prepared.channels, device=torch.device("cpu"))
    np.testing.assert_allclose(prepared.to_dwi_grid(alone).array[brain], seed_alone.probability.array[brain], atol=1e-4)


def test_a_grown_package_is_seeded_on_its_grown_components(tmp_path: Path) -> None:
    """With ``grow_threshold`` in the manifest the engine seeds the components of the grown
    (hysteresis) map: a component kept by the seeds keeps its rim down to the lower threshold,
    and the mask is :func:`postprocess.candidates` of what the seeds keep."""
    from LambdaSegmentLib.inference.postprocess import candidates

    study, package_dir, seed_dir, plain, seed_alone = segmented_alone(tmp_path)
    brain = plain.brain.array.astype(bool)
    high = float(np.quantile(plain.probability.array[brain], 0.8))
    low = float(np.quantile(plain.probability.array[brain], 0.6))
    seed = (seed_alone.probability.array >= float(np.quantile(seed_alone.probability.array[brain], 0.9))) & brain
    set_manifest(package_dir, threshold=high, postprocessing={"grow_threshold": low})
    attach_seed_network(package_dir, seed_dir, float(np.quantile(seed_alone.probability.array[brain], 0.9)))

    result = segment_study(study, load_model_package(package_dir), device="cpu")

    expected = keep_seeded_components(plain.probability.array, low, brain, seed)
    np.testing.assert_array_equal(result.probability.array, expected)
    np.testing.assert_array_equal(result.mask.array, candidates(expected, high, brain, low).astype(np.uint8))
    grown, bare = result.mask.array.astype(bool), (expected >= high) & brain
    assert bare.any() and grown.sum() > bare.sum() and not (bare & ~grown).any()


def test_the_attach_script_reports_what_it_did_and_refuses_a_nested_seed(tmp_path: Path, load_script, capsys) -> None:
    package_dir, seed_dir = two_packages(tmp_path)
    script = load_script("scripts/attach_network.py")
    assert script.main([str(package_dir), str(seed_dir), "--as", "seed", "--threshold", "0.5"]) == 0
    assert "seed network" in capsys.readouterr().out and load_model_package(package_dir).seed is not None
    before = (package_dir / "manifest.json").read_bytes()
    assert script.main([str(seed_dir), str(package_dir), "--as", "seed", "--threshold", "0.5"]) == 2  # package_dir now has a seed
    assert "may not carry a seed network of its own" in capsys.readouterr().err
    assert (package_dir / "manifest.json").read_bytes() == before and not (seed_dir / "seed").exists()
