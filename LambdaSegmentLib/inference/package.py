"""Model packages: weights beside a JSON manifest that says how to use them.

A package is a directory holding ``manifest.json`` and the weights file it names. The
manifest (nnU-Net "plans" style) carries everything inference must re-apply exactly:

- ``name``, ``version``, ``created`` (UTC ISO 8601), ``training_data`` (free text/dict)
- ``architecture``: ``{"name": <registered model>, "config": {keyword arguments}}``
- ``preprocessing``: the block ``LambdaSegmentLib.preprocessing.prepare_input`` takes
  (channel order, in-plane spacing in mm, normalisation, pad multiple)
- ``slice_context``: T, slices the model saw per training sample
- ``threshold``: probability at and above which a voxel is infarct
- ``brain_mask``: the ``preprocessing.brain_mask`` method outside whose mask nothing is
  infarct (absent: its default)
- ``weights_file``, ``weights_sha256``: the state dict (``torch.save``) and its SHA-256
- optional ``low_confidence_mean_probability`` (with ``low_confidence_rule``, how it was chosen):
  lesions whose mean probability is below it are flagged for review
- optional ``postprocessing``: ``{"test_time_flips": true}`` turns flip TTA on by default
- optional ``seed_network``: ``{"directory": "seed", "threshold": 0.5, "weights_sha256": ...}``,
  a second package inside this one (a sub-directory with its own manifest and weights). A
  component of this package's thresholded map is kept only if the seed network's probability
  reaches ``threshold`` somewhere inside it (``postprocess.keep_seeded_components``). Its
  weights' SHA-256 is recorded here as well as in its own manifest, so that neither network can
  be swapped without the package refusing to load; a seed network has no seed network.

Loading never unpickles arbitrary objects (``torch.load(weights_only=True)``) and
refuses weights whose SHA-256 differs from the manifest's.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import nn

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.models import create_model

MANIFEST_FILE = "manifest.json"
DEFAULT_WEIGHTS_FILE = "weights.pt"
BUNDLED_PACKAGE = Path(__file__).resolve().parents[1] / "resources" / "models" / "lambdaunet-dwi"
REQUIRED_KEYS = ("name", "version", "architecture", "preprocessing", "threshold", "weights_file", "weights_sha256")
SEED_NETWORK_KEYS = ("directory", "threshold", "weights_sha256")


@dataclass(frozen=True)
class ModelPackage:
    """A loaded model package.

    Attributes:
        model: the network in eval mode, float32, on the CPU.
        manifest: the manifest as read from ``manifest.json``.
        sha256: SHA-256 (hex) of the weights file, verified against the manifest.
        directory: where the package was read from.
        seed: the manifest's ``seed_network``, loaded and verified; None when it has none.
    """

    model: nn.Module
    manifest: dict[str, Any]
    sha256: str
    directory: Path
    seed: "ModelPackage | None" = None

    @property
    def name(self) -> str:
        return str(self.manifest["name"])

    @property
    def version(self) -> str:
        return str(self.manifest["version"])

    @property
    def threshold(self) -> float:
        return float(self.manifest["threshold"])

    @property
    def seed_threshold(self) -> float | None:
        """Probability at or above which the seed network detects a lesion; None without one."""
        return None if self.seed is None else float(self.manifest["seed_network"]["threshold"])

    def identity(self) -> dict[str, Any]:
        """What a report records of the package: name, version, SHA-256, training data, and
        the same of its seed network (with its threshold) when it has one."""
        identity = {"name": self.name, "version": self.version, "sha256": self.sha256,
                    "training_data": self.manifest.get("training_data")}
        if self.seed is not None:
            identity["seed_network"] = {"name": self.seed.name, "version": self.seed.version, "sha256": self.seed.sha256,
                                        "threshold": self.seed_threshold}
        return identity

    @property
    def low_confidence_below(self) -> float | None:
        """Mean lesion probability below which a lesion is flagged low-confidence (the manifest's
        ``low_confidence_mean_probability``, chosen on validation data by
        ``scripts/choose_confidence_threshold.py``); None when the package has none."""
        value = self.manifest.get("low_confidence_mean_probability")
        return None if value is None else float(value)

    @property
    def brain_mask_method(self) -> str:
        """The manifest's ``brain_mask`` method (``preprocessing.brain_mask``), or the default
        for packages written before it was recorded."""
        from LambdaSegmentLib.preprocessing.brain_mask import DEFAULT_BRAIN_MASK_METHOD

        return str(self.manifest.get("brain_mask", DEFAULT_BRAIN_MASK_METHOD))

    @property
    def slice_receptive_radius(self) -> int:
        """Slices on each side of an output slice that can change it (halo of a slab)."""
        return int(getattr(self.model, "slice_receptive_radius"))


def sha256_of_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_model_package(model: nn.Module, manifest: dict[str, Any], directory: str | Path, *, fp16: bool = False) -> Path:
    """Write ``model``'s weights and a completed manifest into ``directory``; returns the directory.

    ``manifest`` must hold at least ``name``, ``version``, ``architecture`` ({name, config}
    with which ``create_model`` rebuilds ``model``), ``preprocessing`` and ``threshold``;
    ``weights_file``, ``weights_sha256`` and ``created`` are filled in here. ``fp16``
    stores floating-point tensors in half precision (half the file; loading restores
    float32). The architecture is checked by rebuilding it and loading the weights.
    """
    manifest = copy.deepcopy(manifest)
    missing = [key for key in ("name", "version", "architecture", "preprocessing", "threshold") if key not in manifest]
    if missing:
        raise ValueError(f"model manifest lacks {', '.join(missing)}")
    architecture = manifest["architecture"]
    rebuilt = create_model(architecture["name"], **architecture.get("config", {}))
    state = {key: value.detach().cpu().clone() for key, value in model.state_dict().items()}
    rebuilt.load_state_dict(state, strict=True)  # the manifest really describes this model
    if fp16:
        state = {key: value.half() if value.is_floating_point() else value for key, value in state.items()}

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights_file = manifest.get("weights_file") or DEFAULT_WEIGHTS_FILE
    weights_path = directory / weights_file
    torch.save(state, weights_path)
    manifest.update(
        weights_file=weights_file,
        weights_sha256=sha256_of_file(weights_path),
        weights_dtype="float16" if fp16 else "float32",
        created=manifest.get("created") or datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    manifest.setdefault("slice_context", getattr(model, "slice_context", None))
    from LambdaSegmentLib.preprocessing.brain_mask import DEFAULT_BRAIN_MASK_METHOD

    manifest.setdefault("brain_mask", DEFAULT_BRAIN_MASK_METHOD)
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return directory


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of the package in ``directory``; BadInputError when missing or malformed."""
    path = Path(directory) / MANIFEST_FILE
    if not path.is_file():
        raise BadInputError(path, "model manifest not found (a model package is a directory with manifest.json and its weights)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadInputError(path, f"model manifest is not valid JSON ({error})") from None
    if not isinstance(manifest, dict):
        raise BadInputError(path, "model manifest must be a JSON object")
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise BadInputError(path, f"model manifest lacks {', '.join(missing)}")
    from .postprocess import PostProcessing

    try:
        PostProcessing.from_manifest(manifest)
    except (TypeError, ValueError) as error:
        raise BadInputError(path, f"model manifest's post-processing is invalid: {error}") from None
    if "seed_network" in manifest:
        problem = seed_network_problem(manifest["seed_network"])
        if problem:
            raise BadInputError(path, f"model manifest's seed_network is invalid: {problem}")
    return manifest


def seed_network_problem(block: Any) -> str | None:
    """What is wrong with a manifest's ``seed_network`` block, or None when it is well formed."""
    if not isinstance(block, dict) or sorted(block) != sorted(SEED_NETWORK_KEYS):
        return f"it must be an object with exactly {', '.join(SEED_NETWORK_KEYS)}"
    directory = block["directory"]
    if not isinstance(directory, str) or not directory or Path(directory).is_absolute() or len(Path(directory).parts) != 1 \
            or directory in (".", ".."):
        return f"directory must name a sub-directory of the package, not {directory!r}"
    threshold = block["threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < float(threshold) <= 1.0:
        return f"threshold must be a probability in (0, 1], not {threshold!r}"
    digest = block["weights_sha256"]
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digest):
        return "weights_sha256 must be 64 hexadecimal digits"
    return None


def load_model_package(directory: str | Path | None = None, *, seed_network: bool = True) -> ModelPackage:
    """Load and verify a model package; ``None`` loads the bundled one. With ``seed_network``
    False its own network alone is loaded (``seed`` None), e.g. to replace a broken seed network.

    Raises BadInputError when the directory or manifest is missing, the weights' SHA-256
    differs from the manifest's (both hashes named), the file is not a loadable state
    dict, or the weights do not fit the manifest's architecture.
    """
    directory = Path(BUNDLED_PACKAGE if directory is None else directory)
    if not directory.is_dir():
        what = "the bundled model package is not installed" if directory == BUNDLED_PACKAGE else "model package directory not found"
        raise BadInputError(directory, what)
    manifest = read_manifest(directory)
    weights_path = directory / str(manifest["weights_file"])
    if not weights_path.is_file():
        raise BadInputError(weights_path, "model weights file named by the manifest not found")
    actual = sha256_of_file(weights_path)
    expected = str(manifest["weights_sha256"]).lower()
    if actual != expected:
        raise BadInputError(
            weights_path,
            f"SHA-256 {actual} differs from the manifest's {expected}; the weights were altered or corrupted, refusing them",
        )
    try:
        state = torch.load(weights_path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unpickling failure is a bad file
        # torch's own message advises weights_only=False, which this project never does.
        raise BadInputError(weights_path, f"not a loadable weights file (torch.load with weights_only=True failed: {type(error).__name__})") from None
    if not isinstance(state, dict):
        raise BadInputError(weights_path, "weights file does not hold a state dict")
    architecture = manifest["architecture"]
    try:
        model = create_model(str(architecture["name"]), **dict(architecture.get("config", {})))
        model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()}, strict=True)
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise BadInputError(weights_path, f"weights do not fit the manifest's architecture ({error})".replace("\n", " ")) from None
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    seed = load_seed_network(directory, manifest["seed_network"]) if seed_network and "seed_network" in manifest else None
    return ModelPackage(model=model, manifest=manifest, sha256=actual, directory=directory, seed=seed)


def load_seed_network(directory: Path, block: dict[str, Any]) -> ModelPackage:
    """The seed network a package's manifest names (``block``, already validated), verified
    against both its own manifest and the package's record of its weights."""
    seed_directory = directory / str(block["directory"])
    if not seed_directory.is_dir():
        raise BadInputError(seed_directory, "the seed network directory named by the model manifest's seed_network not found")
    seed = _load_seed_candidate(seed_directory)
    expected = str(block["weights_sha256"]).lower()
    if seed.sha256 != expected:
        raise BadInputError(
            seed_directory / str(seed.manifest["weights_file"]),
            f"SHA-256 {seed.sha256} differs from the {expected} that {directory / MANIFEST_FILE} records for its seed network; refusing it",
        )
    return seed


def _load_seed_candidate(seed_directory: Path) -> ModelPackage:
    """The package in ``seed_directory``, loaded and verified, refused if it has a seed network of its own."""
    seed = load_model_package(seed_directory)
    if seed.seed is not None:
        raise BadInputError(seed_directory / MANIFEST_FILE, "a seed network may not carry a seed network of its own")
    return seed


def attach_seed_network(package_dir: str | Path, seed_dir: str | Path, threshold: float, *, subdirectory: str = "seed") -> dict[str, Any]:
    """Copy the package in ``seed_dir`` into ``package_dir/subdirectory`` and record it as the
    package's ``seed_network`` at ``threshold``; returns the new manifest.

    Both packages are loaded and verified first (a seed with a seed of its own is refused) and
    an existing seed network is replaced. The manifest is replaced atomically, last: a package
    interrupted before that loads as it did without a seed network, or, if it had one, is
    refused on load (its recorded SHA-256 no longer matches), never silently seeded by another.
    """
    import shutil

    from LambdaSegmentLib.reports import write_text_atomically

    package_dir = Path(package_dir)
    package = load_model_package(package_dir, seed_network=False)  # a broken seed network may be replaced
    seed = _load_seed_candidate(Path(seed_dir))
    block = {"directory": subdirectory, "threshold": float(threshold), "weights_sha256": seed.sha256}
    problem = seed_network_problem(block)
    if problem:
        raise ValueError(problem)
    target = package_dir / subdirectory
    if target.resolve() == Path(seed_dir).resolve():
        raise ValueError(f"{seed_dir} is already the package's {subdirectory!r} directory")
    staging = package_dir / f".{subdirectory}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name in (MANIFEST_FILE, str(seed.manifest["weights_file"])):
        shutil.copy2(Path(seed_dir) / name, staging / name)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    manifest = dict(package.manifest, seed_network=block)
    write_text_atomically(json.dumps(manifest, indent=2, sort_keys=False) + "\n", package_dir / MANIFEST_FILE, overwrite=True)
    load_model_package(package_dir)  # the result loads and verifies
    return manifest
