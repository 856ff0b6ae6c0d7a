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


@dataclass(frozen=True)
class ModelPackage:
    """A loaded model package.

    Attributes:
        model: the network in eval mode, float32, on the CPU.
        manifest: the manifest as read from ``manifest.json``.
        sha256: SHA-256 (hex) of the weights file, verified against the manifest.
        directory: where the package was read from.
    """

    model: nn.Module
    manifest: dict[str, Any]
    sha256: str
    directory: Path

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
    return manifest


def load_model_package(directory: str | Path | None = None) -> ModelPackage:
    """Load and verify a model package; ``None`` loads the bundled one.

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
    return ModelPackage(model=model, manifest=manifest, sha256=actual, directory=directory)
