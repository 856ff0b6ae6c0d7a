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
- optional ``partner_network``: ``{"directory": "partner", "weights_sha256": ...}``, a second
  package inside this one whose network's probability is averaged with this package's own
  (the same flips, on the DWI grid) before the seed step and the post-processing: two networks
  as one (issue 13's rule 48). Recorded and verified like the seed network; a partner has
  neither a seed nor a partner of its own. The brain mask, threshold and post-processing are
  this package's.

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
BUNDLED_MODELS = Path(__file__).resolve().parents[1] / "resources" / "models"
BUNDLED_PACKAGE = BUNDLED_MODELS / "lambdaunet-dwi"  # the default
REQUIRED_KEYS = ("name", "version", "architecture", "preprocessing", "threshold", "weights_file", "weights_sha256")
SEED_NETWORK_KEYS = ("directory", "threshold", "weights_sha256")
PARTNER_NETWORK_KEYS = ("directory", "weights_sha256")


@dataclass(frozen=True)
class ModelPackage:
    """A loaded model package.

    Attributes:
        model: the network in eval mode, float32, on the CPU.
        manifest: the manifest as read from ``manifest.json``.
        sha256: SHA-256 (hex) of the weights file, verified against the manifest.
        directory: where the package was read from.
        seed: the manifest's ``seed_network``, loaded and verified; None when it has none.
        partner: the manifest's ``partner_network``, loaded and verified; None when it has none.
    """

    model: nn.Module
    manifest: dict[str, Any]
    sha256: str
    directory: Path
    seed: "ModelPackage | None" = None
    partner: "ModelPackage | None" = None

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
        the same of its seed network (with its threshold) and its partner network when it has them."""
        identity = {"name": self.name, "version": self.version, "sha256": self.sha256,
                    "training_data": self.manifest.get("training_data")}
        if self.seed is not None:
            identity["seed_network"] = {"name": self.seed.name, "version": self.seed.version, "sha256": self.seed.sha256,
                                        "threshold": self.seed_threshold}
        if self.partner is not None:
            identity["partner_network"] = {"name": self.partner.name, "version": self.partner.version,
                                           "sha256": self.partner.sha256}
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
    from .field import field_problem

    problem = field_problem(manifest)
    if problem:
        raise BadInputError(path, problem)
    for role, check in ATTACHED_NETWORKS.items():
        problem = check(manifest[f"{role}_network"]) if f"{role}_network" in manifest else None
        if problem:
            raise BadInputError(path, f"model manifest's {role}_network is invalid: {problem}")
    if "seed_network" in manifest and "partner_network" in manifest \
            and manifest["seed_network"]["directory"] == manifest["partner_network"]["directory"]:
        raise BadInputError(path, "model manifest's seed_network and partner_network name the same directory")
    return manifest


def seed_network_problem(block: Any) -> str | None:
    """What is wrong with a manifest's ``seed_network`` block, or None when it is well formed."""
    problem = _attached_block_problem(block, SEED_NETWORK_KEYS)
    if problem:
        return problem
    threshold = block["threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < float(threshold) <= 1.0:
        return f"threshold must be a probability in (0, 1], not {threshold!r}"
    return None


def partner_network_problem(block: Any) -> str | None:
    """What is wrong with a manifest's ``partner_network`` block, or None when it is well formed."""
    return _attached_block_problem(block, PARTNER_NETWORK_KEYS)


#: The networks a package may carry beside its own (manifest ``<role>_network``), each with the
#: check of its manifest block.
ATTACHED_NETWORKS = {"seed": seed_network_problem, "partner": partner_network_problem}


def _attached_block_problem(block: Any, keys: tuple[str, ...]) -> str | None:
    """The checks every attached network's block shares: its keys, its sub-directory, its SHA-256."""
    if not isinstance(block, dict) or sorted(block) != sorted(keys):
        return f"it must be an object with exactly {', '.join(keys)}"
    directory = block["directory"]
    if not isinstance(directory, str) or not directory or Path(directory).is_absolute() or len(Path(directory).parts) != 1 \
            or directory in (".", ".."):
        return f"directory must name a sub-directory of the package, not {directory!r}"
    digest = block["weights_sha256"]
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digest):
        return "weights_sha256 must be 64 hexadecimal digits"
    return None


def bundled_packages() -> list[Path]:
    """The bundled model packages' directories, the default first, then the others by name."""
    others = sorted(path for path in BUNDLED_MODELS.glob("*/") if (path / MANIFEST_FILE).is_file() and path != BUNDLED_PACKAGE)
    return ([BUNDLED_PACKAGE] if (BUNDLED_PACKAGE / MANIFEST_FILE).is_file() else []) + others


def resolve_package_dir(directory: str | Path | None) -> Path:
    """Where the package ``directory`` names lives: None is the default bundled package; a bare
    name that is not a directory here but names a bundled package (``lambdaunet-dwi-pair``) is
    that package; anything else is the directory as given."""
    if directory is None:
        return BUNDLED_PACKAGE
    path = Path(directory)
    if not path.is_dir() and len(path.parts) == 1 and (BUNDLED_MODELS / path.name / MANIFEST_FILE).is_file():
        return BUNDLED_MODELS / path.name
    return path


def load_model_package(directory: str | Path | None = None, *, seed_network: bool = True) -> ModelPackage:
    """Load and verify a model package; ``None`` loads the default bundled one, and a bundled
    package's name (``"lambdaunet-dwi-pair"``) that one (:func:`resolve_package_dir`). With
    ``seed_network`` False its own network alone is loaded (``seed`` and ``partner`` None), e.g.
    to replace a broken seed or partner network.

    Raises BadInputError when the directory or manifest is missing, the weights' SHA-256
    differs from the manifest's (both hashes named), the file is not a loadable state
    dict, or the weights do not fit the manifest's architecture.
    """
    directory = resolve_package_dir(directory)
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
    attached = {role: load_attached_network(directory, manifest[f"{role}_network"], role)
                for role in ATTACHED_NETWORKS if seed_network and f"{role}_network" in manifest}
    return ModelPackage(model=model, manifest=manifest, sha256=actual, directory=directory, **attached)


def load_attached_network(directory: Path, block: dict[str, Any], role: str) -> ModelPackage:
    """The ``role`` ("seed" or "partner") network a package's manifest names (``block``, already
    validated), verified against both its own manifest and the package's record of its weights."""
    attached_directory = directory / str(block["directory"])
    if not attached_directory.is_dir():
        raise BadInputError(attached_directory, f"the {role} network directory named by the model manifest's {role}_network not found")
    attached = _load_attachable(attached_directory, role)
    expected = str(block["weights_sha256"]).lower()
    if attached.sha256 != expected:
        raise BadInputError(
            attached_directory / str(attached.manifest["weights_file"]),
            f"SHA-256 {attached.sha256} differs from the {expected} that {directory / MANIFEST_FILE} records for its {role} network; refusing it",
        )
    return attached


def _load_attachable(directory: Path, role: str) -> ModelPackage:
    """The package in ``directory``, loaded and verified, refused if it carries a network of its own."""
    package = load_model_package(directory)
    for other in ATTACHED_NETWORKS:
        if getattr(package, other) is not None:
            raise BadInputError(directory / MANIFEST_FILE, f"a {role} network may not carry a {other} network of its own")
    return package


def attach_seed_network(package_dir: str | Path, seed_dir: str | Path, threshold: float, *, subdirectory: str = "seed") -> dict[str, Any]:
    """Copy the package in ``seed_dir`` into ``package_dir/subdirectory`` and record it as the
    package's ``seed_network`` at ``threshold``; returns the new manifest.

    Both packages are loaded and verified first (a seed with a seed of its own is refused) and
    an existing seed network is replaced. The manifest is replaced atomically, last: a package
    interrupted before that loads as it did without a seed network, or, if it had one, is
    refused on load (its recorded SHA-256 no longer matches), never silently seeded by another.
    """
    return _attach_network(package_dir, seed_dir, "seed", {"directory": subdirectory, "threshold": float(threshold)})


def attach_partner_network(package_dir: str | Path, partner_dir: str | Path, *, subdirectory: str = "partner") -> dict[str, Any]:
    """Copy the package in ``partner_dir`` into ``package_dir/subdirectory`` and record it as the
    package's ``partner_network`` (its probability averaged with the package's own); returns the
    new manifest. Checked, copied and recorded as :func:`attach_seed_network` does; a partner
    with a seed or partner network of its own is refused."""
    return _attach_network(package_dir, partner_dir, "partner", {"directory": subdirectory})


def _attach_network(package_dir: str | Path, source_dir: str | Path, role: str, block: dict[str, Any]) -> dict[str, Any]:
    """Copy the package in ``source_dir`` into ``package_dir/block["directory"]`` and record
    ``block`` (with its weights' SHA-256) as the package's ``{role}_network``."""
    import shutil

    from LambdaSegmentLib.reports import write_text_atomically

    package_dir = Path(package_dir)
    package = load_model_package(package_dir, seed_network=False)  # a broken attached network may be replaced
    attached = _load_attachable(Path(source_dir), role)
    block = {**block, "weights_sha256": attached.sha256}
    problem = ATTACHED_NETWORKS[role](block)
    if problem:
        raise ValueError(problem)
    subdirectory = str(block["directory"])
    for other in ATTACHED_NETWORKS.keys() - {role}:
        if package.manifest.get(f"{other}_network", {}).get("directory") == subdirectory:
            raise ValueError(f"{subdirectory!r} already holds the package's {other} network")
    target = package_dir / subdirectory
    if target.resolve() == Path(source_dir).resolve():
        raise ValueError(f"{source_dir} is already the package's {subdirectory!r} directory")
    staging = package_dir / f".{subdirectory}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name in (MANIFEST_FILE, str(attached.manifest["weights_file"])):
        shutil.copy2(Path(source_dir) / name, staging / name)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    manifest = {**package.manifest, f"{role}_network": block}
    write_text_atomically(json.dumps(manifest, indent=2, sort_keys=False) + "\n", package_dir / MANIFEST_FILE, overwrite=True)
    load_model_package(package_dir)  # the result loads and verifies
    return manifest
