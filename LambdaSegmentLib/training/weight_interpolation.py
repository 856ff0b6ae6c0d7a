"""A fine-tuned package pulled back towards its starting point in weight space (WiSE-FT).

Wortsman et al. (CVPR 2022, "Robust fine-tuning of zero-shot models") fine-tune a model and
then average the weights of the start and the fine-tuned model,
``theta(a) = (1 - a) * theta_start + a * theta_finetuned``. When both share one start (stage 2
begins from stage 1's package, ``--init-weights``), the path between them stays in one basin,
and the average keeps much of the fine-tune's gain on its own data while losing less of the
start's behaviour elsewhere. In this project stage 1 (synthetic studies only) rejects the real
cases' skull-base rims and stage 2 (the fold's real case as background) finds more of the real
lesions but marks those rims (docs/ablation.md, rules 102-103); the interpolation asks for both.

What is averaged: every floating-point tensor of the state dict, BatchNorm's running mean and
variance included (both models' statistics describe the same features up to the fine-tune's
drift). Integer buffers (BatchNorm's ``num_batches_tracked``) are the fine-tuned model's. No
data is seen, so no real case can choose anything here; ``a`` is fixed by the caller.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.inference.package import save_model_package

from . import recipe

#: Manifest keys chosen for the fine-tuned model's outputs; they do not describe the average
#: (nor is a seed network's sub-directory copied: attach one again, scripts/attach_network.py).
CHOSEN_FOR_OUTPUTS = ("postprocessing", "postprocessing_choice", "low_confidence_mean_probability", "low_confidence_rule",
                       "seed_network")


def interpolate_states(
    start: dict[str, torch.Tensor], finetuned: dict[str, torch.Tensor], alpha: float
) -> dict[str, torch.Tensor]:
    """``(1 - alpha) * start + alpha * finetuned`` for float tensors; the fine-tuned integers.

    Args:
        start, finetuned: state dicts with the same keys and shapes.
        alpha: weight of the fine-tuned model, in [0, 1] (0: the start, 1: the fine-tune).

    Raises:
        ValueError: alpha outside [0, 1], or keys, shapes or dtypes differ.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], not {alpha}")
    if set(start) != set(finetuned):
        raise ValueError(f"the two models' tensors differ: {sorted(set(start) ^ set(finetuned))[:4]}")
    state: dict[str, torch.Tensor] = {}
    for key, tuned in finetuned.items():
        base = start[key]
        if base.shape != tuned.shape or base.dtype != tuned.dtype:
            raise ValueError(f"{key}: {tuple(base.shape)} {base.dtype} against {tuple(tuned.shape)} {tuned.dtype}")
        # torch.lerp(base, tuned, alpha) = base + alpha * (tuned - base): exact at alpha 0 and 1.
        state[key] = torch.lerp(base, tuned, alpha) if tuned.is_floating_point() else tuned.clone()
    return state


def interpolate_packages(start_dir: str | Path, finetuned_dir: str | Path, alpha: float, output_dir: str | Path,
                         *, name: str | None = None, version: str | None = None) -> Path:
    """Write the package ``(1 - alpha) * start + alpha * finetuned`` into ``output_dir``.

    Both packages are loaded and SHA-256 verified. They must share architecture, configuration
    and preprocessing (a fine-tune started with ``--init-weights`` from ``start_dir``). The new
    manifest is the fine-tuned one's without its post-processing and confidence threshold (chosen
    for the fine-tuned model's outputs: choose them again for the average), with
    the training threshold (``recipe.THRESHOLD``) where the fine-tune's was chosen with them, and
    ``training.weight_interpolation`` recording both packages, their SHA-256 and ``alpha``; its
    name and version are ``name`` and ``version`` where given (the average is another model than
    the fine-tune).

    Raises:
        BadInputError: a package is invalid or the two do not describe the same model (names
            the fine-tuned package), or ``output_dir`` is one of the two inputs.
        ValueError: alpha outside [0, 1].
    """
    start_dir, finetuned_dir, output_dir = Path(start_dir), Path(finetuned_dir), Path(output_dir)
    if output_dir.resolve() in (start_dir.resolve(), finetuned_dir.resolve()):
        raise BadInputError(output_dir, "the interpolated package would overwrite one of its inputs; name a new directory")
    start, finetuned = load_model_package(start_dir), load_model_package(finetuned_dir)
    start_manifest, finetuned_manifest = start.manifest, finetuned.manifest
    for key in ("architecture", "preprocessing"):
        if start_manifest[key] != finetuned_manifest[key]:
            raise BadInputError(finetuned_dir, f"its {key} differs from {start_dir}'s; only a fine-tune of that package can be interpolated with it")
    state = interpolate_states(start.model.state_dict(), finetuned.model.state_dict(), alpha)
    model = copy.deepcopy(finetuned.model)
    model.load_state_dict(state, strict=True)

    manifest: dict[str, Any] = {key: value for key, value in copy.deepcopy(finetuned_manifest).items() if key not in CHOSEN_FOR_OUTPUTS}
    if "postprocessing_choice" in finetuned_manifest:  # its threshold was chosen with its post-processing
        manifest["threshold"] = recipe.THRESHOLD
    for key in ("weights_sha256", "created"):
        manifest.pop(key, None)
    for key, value in (("name", name), ("version", version)):
        if value is not None:
            manifest[key] = value
    manifest["training"] = {
        **manifest.get("training", {}),
        "weight_interpolation": {
            "method": "WiSE-FT (Wortsman et al., CVPR 2022): (1 - alpha) * start + alpha * finetuned, "
            "every float tensor incl. BatchNorm statistics (training/weight_interpolation.py)",
            "alpha": float(alpha),
            "start": str(start_dir),
            "start_sha256": start_manifest["weights_sha256"],
            "finetuned": str(finetuned_dir),
            "finetuned_sha256": finetuned_manifest["weights_sha256"],
        },
    }
    return save_model_package(model, manifest, output_dir, fp16=finetuned_manifest.get("weights_dtype") == "float16")
