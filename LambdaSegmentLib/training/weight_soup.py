"""Sibling packages averaged in weight space into one network (a uniform "model soup").

Wortsman et al. (ICML 2022, "Model soups") average the weights of several fine-tunes of one
pre-trained model: when every run starts from the same weights and trains briefly, the runs stay
in one basin, and their average is often better and steadier than any one of them. Here the
ingredients are draws of one stage-1 recipe (the same ``--init-weights`` start, other study
streams): issue 13 found that the draw decides more than any recipe change measured
(docs/ablation.md, rules 56-58), and a soup is one network whose behaviour depends less on one
draw's last batches, at the inference cost of one network.

What is averaged: every floating-point tensor of the state dict, BatchNorm's running mean and
variance included. Integer buffers (BatchNorm's ``num_batches_tracked``) are the first
ingredient's. No data is seen: nothing here is chosen on any case. WiSE-FT
(training/weight_interpolation.py) is the two-package, unequal-weight relative of this.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.inference.package import save_model_package

from . import recipe
from .weight_interpolation import CHOSEN_FOR_OUTPUTS


def average_states(states: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The uniform mean of float tensors over ``states``; the first state's integer tensors.

    Args:
        states: two or more state dicts with the same keys, shapes and dtypes.

    Raises:
        ValueError: fewer than two states, or keys, shapes or dtypes differ.
    """
    if len(states) < 2:
        raise ValueError(f"a soup needs at least two models, not {len(states)}")
    first = states[0]
    for index, state in enumerate(states[1:], start=2):
        if set(state) != set(first):
            raise ValueError(f"model {index}'s tensors differ from model 1's: {sorted(set(state) ^ set(first))[:4]}")
    averaged: dict[str, torch.Tensor] = {}
    for key, reference in first.items():
        tensors = [state[key] for state in states]
        for index, tensor in enumerate(tensors[1:], start=2):
            if tensor.shape != reference.shape or tensor.dtype != reference.dtype:
                raise ValueError(f"{key}: model 1 has {tuple(reference.shape)} {reference.dtype}, model {index} "
                                 f"{tuple(tensor.shape)} {tensor.dtype}")
        if reference.is_floating_point():
            # Summed in float64 so that the mean of N identical tensors is that tensor exactly.
            averaged[key] = (torch.stack(tensors).double().mean(dim=0)).to(reference.dtype)
        else:
            averaged[key] = reference.clone()
    return averaged


def soup_packages(package_dirs: Sequence[str | Path], output_dir: str | Path) -> Path:
    """Write the uniform weight average of ``package_dirs`` into ``output_dir``.

    Every ingredient is loaded and SHA-256 verified, and all must share architecture and
    preprocessing (draws of one recipe from one ``--init-weights`` start). The new manifest is the
    first ingredient's without what was chosen for its outputs (post-processing, confidence
    threshold, seed network: choose and attach them again for the soup), with the training
    threshold (``recipe.THRESHOLD``), and ``training`` replaced by a record of the soup: each
    ingredient's directory, SHA-256 and training seconds, and their sum as ``seconds`` (the CPU
    or GPU time the soup took to make).

    Raises:
        BadInputError: an ingredient is invalid or describes another model (names it), an
            ingredient is named twice, or ``output_dir`` is one of the ingredients.
        ValueError: fewer than two ingredients.
    """
    dirs = [Path(directory) for directory in package_dirs]
    output_dir = Path(output_dir)
    if len(dirs) < 2:
        raise ValueError(f"a soup needs at least two packages, not {len(dirs)}")
    resolved = [directory.resolve() for directory in dirs]
    for directory, path in zip(dirs, resolved):
        if resolved.count(path) > 1:
            raise BadInputError(directory, "is named twice; a soup averages different packages")
    if output_dir.resolve() in resolved:
        raise BadInputError(output_dir, "the soup would overwrite one of its ingredients; name a new directory")
    packages = [load_model_package(directory) for directory in dirs]
    first = packages[0].manifest
    for directory, package in zip(dirs[1:], packages[1:]):
        for key in ("architecture", "preprocessing"):
            if package.manifest[key] != first[key]:
                raise BadInputError(directory, f"its {key} differs from {dirs[0]}'s; only draws of one model can be averaged")
    state = average_states([package.model.state_dict() for package in packages])
    model = copy.deepcopy(packages[0].model)
    model.load_state_dict(state, strict=True)

    manifest: dict[str, Any] = {key: value for key, value in copy.deepcopy(first).items()
                                if key not in (*CHOSEN_FOR_OUTPUTS, "weights_sha256", "created", "training")}
    manifest["threshold"] = recipe.THRESHOLD
    seconds = [float(package.manifest.get("training", {}).get("seconds", 0.0)) for package in packages]
    manifest["training"] = {
        "weight_soup": {
            "method": "uniform model soup (Wortsman et al., ICML 2022): the mean of every float tensor, "
            "BatchNorm statistics included (training/weight_soup.py)",
            "ingredients": [
                {"package": str(directory), "weights_sha256": package.manifest["weights_sha256"], "seconds": second}
                for directory, package, second in zip(dirs, packages, seconds)
            ],
        },
        "seconds": sum(seconds),
    }
    return save_model_package(model, manifest, output_dir, fp16=first.get("weights_dtype") == "float16")
