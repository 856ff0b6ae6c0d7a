"""Starting a training run from a model package's weights (``lambdasegment train --init-weights``).

Two cases are accepted, anything else is refused with a ``BadInputError`` naming the package:

- **the same model**: same architecture and configuration, same input channels; the
  weights are copied as they are;
- **the same model with extra input channels**: the run's preprocessing channels are the
  package's, in its order, followed by new ones (e.g. ``["eadc", "dwi"]`` →
  ``["eadc", "dwi", "dwi_asymmetry"]``), the configuration differs only in ``in_channels``,
  and the rest of the preprocessing block (spacing, normalisation of the package's channels,
  padding) is the package's. Every weight is copied; the one tensor that reads the input
  (the stem convolution: the only tensor whose shape differs, in its input-channel dimension
  1 only) gets the package's weights for the package's channels and **zeros** for the new
  ones. The new channels then contribute nothing: the fine-tune starts computing exactly
  the package's function, and learns to use them.
- **the same model with BatchNorms become GroupNorms**: the configurations differ only in
  ``norm`` or ``stem_norm`` (:data:`NORM_KEYS`), toward ``"group"``, and the preprocessing is the
  package's. Every tensor the model has is copied, the converted layers' affine weights
  included; what only the package has is the converted BatchNorms' running statistics, which
  a GroupNorm has no use for. The function changes (each slice is now normalised by its own
  statistics), so such a run continues training rather than fine-tunes: it keeps the
  learned convolutions and Lambda+ projections instead of a random start.
- **the same LambdaUNet, wider**: the configurations differ only in ``widths``, each level at
  least as wide as the package's, and the preprocessing is the package's. Every tensor of the
  package goes into the leading channels of the wider one (a Lambda+ layer's output channels
  are its heads, head-major, so these are its first heads); the weights by which an old
  channel would read a new one are **zero**, the rest keeps the new model's initialisation.
  Every path from a new channel to the output then passes through a zero, so training starts
  computing exactly the package's function (checked on a random study before training), and
  the first step's gradient opens those paths (the zeros are where the new channels'
  activations meet the old channels' gradients). The decoder's concatenation ([skip, up])
  is mapped part by part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from LambdaSegmentLib.errors import BadInputError

NORM_KEYS = ("norm", "stem_norm")
"""Configuration keys naming a model's normalisation layers (``models.lambda_unet.LambdaUNet``)."""
BATCH_NORM_STATISTICS = ("running_mean", "running_var", "num_batches_tracked")


def widen_input_channels(
    source_state: Mapping[str, torch.Tensor],
    target_state: Mapping[str, torch.Tensor],
    source_channels: int,
    target_channels: int,
    *,
    source: str | Path = "<memory>",
) -> tuple[dict[str, torch.Tensor], str]:
    """``source_state`` laid out as ``target_state``, the new input channels' stem weights zero.

    Args:
        source_state: the package's state dict (``source_channels`` input channels).
        target_state: the new model's state dict (``target_channels`` > ``source_channels``);
            only its keys and shapes are used.
        source_channels, target_channels: input channel counts; the new channels are the last
            ``target_channels - source_channels``.
        source: what to name in an error (the package directory).

    Returns:
        (state, stem): the state dict to load, and the key of the widened tensor.

    Raises:
        BadInputError: the keys differ, or any tensor other than exactly one (the stem,
            (out, source_channels, ...) → (out, target_channels, ...)) differs in shape.
    """
    if set(source_state) != set(target_state):
        missing, extra = sorted(set(target_state) - set(source_state)), sorted(set(source_state) - set(target_state))
        raise BadInputError(source, f"--init-weights: the package's tensors differ from the model's (missing {missing[:3]}, extra {extra[:3]})")
    differing = [key for key in target_state if tuple(source_state[key].shape) != tuple(target_state[key].shape)]
    stems = [
        key for key in differing
        if source_state[key].dim() >= 2
        and source_state[key].shape[1] == source_channels
        and target_state[key].shape[1] == target_channels
        and source_state[key].shape[:1] + source_state[key].shape[2:] == target_state[key].shape[:1] + target_state[key].shape[2:]
    ]
    if len(differing) != 1 or len(stems) != 1:
        shapes = {key: (tuple(source_state[key].shape), tuple(target_state[key].shape)) for key in differing[:4]}
        raise BadInputError(
            source,
            f"--init-weights: widening {source_channels} → {target_channels} input channels needs exactly one tensor "
            f"(the stem convolution) to differ, in its input-channel dimension only; differing: {shapes}",
        )
    stem = stems[0]
    state = {key: value.detach().clone() for key, value in source_state.items()}
    old = source_state[stem]
    widened = torch.zeros(tuple(target_state[stem].shape), dtype=old.dtype)
    widened[:, :source_channels] = old
    state[stem] = widened
    return state, stem


def drop_converted_statistics(
    source_state: Mapping[str, torch.Tensor], target_state: Mapping[str, torch.Tensor], *, source: str | Path = "<memory>",
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``source_state`` restricted to ``target_state``'s keys, where the only keys it loses are
    BatchNorm running statistics (of layers the target has as GroupNorms).

    Returns:
        (state, dropped): the state dict to load, and the dropped keys.

    Raises:
        BadInputError: the target has a key the source lacks, a shape differs, or a dropped
            key is anything but BatchNorm running statistics.
    """
    missing = sorted(set(target_state) - set(source_state))
    dropped = sorted(set(source_state) - set(target_state))
    reshaped = [key for key in target_state if key in source_state and source_state[key].shape != target_state[key].shape]
    not_statistics = [key for key in dropped if key.rsplit(".", 1)[-1] not in BATCH_NORM_STATISTICS]
    if missing or reshaped or not_statistics:
        raise BadInputError(
            source,
            f"--init-weights: converting BatchNorms to GroupNorms may only drop running statistics; "
            f"missing {missing[:3]}, reshaped {reshaped[:3]}, dropped {not_statistics[:3]}",
        )
    return {key: source_state[key].detach().clone() for key in target_state}, dropped


def widen_widths(
    source_state: Mapping[str, torch.Tensor], model: nn.Module, *, source: str | Path = "<memory>",
) -> tuple[dict[str, torch.Tensor], int]:
    """``source_state`` (a narrower LambdaUNet) laid out for ``model`` (the same LambdaUNet, wider), function preserved.

    Args:
        source_state: the package's state dict.
        model: the freshly built wider model (``UNet2p5d``); its own initial tensors fill
            the new channels, except where an old channel reads a new one (zero).
        source: what to name in an error (the package directory).

    Returns:
        (state, widened): the state dict to load, and how many tensors changed shape.

    Raises:
        BadInputError: the keys differ, or a tensor is narrower than the package's, or
            differs in a dimension that is not a channel dimension.
    """
    from LambdaSegmentLib.models.unet_blocks import Up

    from .module import unwrapped_state_dict

    target_state = unwrapped_state_dict(model)
    if set(source_state) != set(target_state):
        missing, extra = sorted(set(target_state) - set(source_state)), sorted(set(source_state) - set(target_state))
        raise BadInputError(source, f"--init-weights: the package's tensors differ from the wider model's (missing {missing[:3]}, extra {extra[:3]})")
    prefix = "_checkpoint_wrapped_module."
    modules = {name.replace(prefix, ""): module for name, module in model.named_modules()}
    input_dims = {  # the dimension by which each weight reads its input
        f"{name}.weight": 0 if isinstance(module, nn.modules.conv._ConvTransposeNd) else 1
        for name, module in modules.items() if isinstance(module, nn.modules.conv._ConvNd)
    }
    concatenated = {f"{name}.conv.0.weight" for name, module in modules.items() if isinstance(module, Up)}
    state: dict[str, torch.Tensor] = {}
    widened = 0
    for key, target in target_state.items():
        old = source_state[key]
        if tuple(old.shape) == tuple(target.shape):
            state[key] = old.detach().clone()
            continue
        if old.dim() != target.dim() or any(a > b for a, b in zip(old.shape, target.shape)):
            raise BadInputError(source, f"--init-weights: {key} is {tuple(old.shape)} in the package, {tuple(target.shape)} in the wider model")
        input_dim = input_dims.get(key)
        channel_dims = {0, 1} if input_dim is not None else {0}
        odd = [dim for dim in range(old.dim()) if old.shape[dim] != target.shape[dim] and dim not in channel_dims]
        if odd:
            raise BadInputError(source, f"--init-weights: {key} differs in dimension {odd[0]}, not a channel dimension")
        index: list[Any] = [torch.arange(size) for size in old.shape]
        if key in concatenated:  # [skip, up], each half as wide as the input: map each half to its place
            half_old, half_new = old.shape[1] // 2, target.shape[1] // 2
            index[1] = torch.cat([torch.arange(half_old), half_new + torch.arange(half_old)])
        widening = target.detach().clone()
        if input_dim is not None:  # old outputs read nothing from new inputs
            rows = [slice(None)] * target.dim()
            rows[1 - input_dim] = index[1 - input_dim]
            widening[tuple(rows)] = 0.0
        widening[torch.meshgrid(*index, indexing="ij")] = old.to(widening.dtype)
        state[key] = widening
        widened += 1
    return state, widened


def _function_preserved(narrow: nn.Module, wide: nn.Module, in_channels: int, levels: int) -> float:
    """Largest |difference| of the two models' eval-mode logits on one random 3-slice study,
    relative to the largest |logit| (at least 1): the GEMMs' sizes differ, so the rounding does,
    and eight Lambda+ layers with BatchNorm queries are quadratic in their input."""
    size = 2 ** (levels - 1) * 2
    study = torch.Generator().manual_seed(0)
    x = torch.rand(1, in_channels, 3, size, size, generator=study)
    modes = narrow.training, wide.training
    narrow.eval(), wide.eval()
    try:
        with torch.no_grad():
            reference = narrow(x)
            return float((reference - wide(x)).abs().max() / reference.abs().max().clamp(min=1.0))
    finally:
        narrow.train(modes[0]), wide.train(modes[1])


def _without(block: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in block.items() if key not in keys}


def initialise_from_package(
    model: nn.Module,
    package_dir: str | Path,
    model_name: str,
    model_config: Mapping[str, Any],
    preprocessing: Mapping[str, Any],
) -> str:
    """Load a package's weights (SHA-256 checked, ``weights_only``) into ``model`` (see the module docstring).

    Args:
        model: the freshly built model of the run (``SegmentationModule.model``).
        package_dir: the package to start from.
        model_name, model_config: the run's architecture.
        preprocessing: the run's manifest preprocessing block.

    Returns:
        One line saying what was done (the caller prints it).

    Raises:
        BadInputError: naming ``package_dir``, for any difference other than appended channels.
    """
    from LambdaSegmentLib.inference import load_model_package

    package = load_model_package(package_dir)
    architecture = package.manifest["architecture"]
    source_config = dict(architecture.get("config", {}))
    described = f"{architecture['name']} {source_config}"
    if architecture["name"] == model_name and source_config == dict(model_config):
        model.load_state_dict(package.model.state_dict())
        return f"--init-weights: weights of {package.name} {package.version} ({package_dir})"

    converted = [key for key in NORM_KEYS if source_config.get(key) != model_config.get(key)]
    if (
        architecture["name"] == model_name
        and converted
        and _without(source_config, *NORM_KEYS) == _without(model_config, *NORM_KEYS)
        and all(model_config.get(key) == "group" for key in converted)
    ):
        if dict(package.manifest["preprocessing"]) != dict(preprocessing):
            raise BadInputError(
                package_dir,
                f"--init-weights: the package's preprocessing {package.manifest['preprocessing']} differs from the run's "
                f"{dict(preprocessing)}; converting normalisations keeps the package's preprocessing",
            )
        from .module import unwrapped_state_dict

        state, dropped = drop_converted_statistics(package.model.state_dict(), unwrapped_state_dict(model), source=package_dir)
        model.load_state_dict(state)
        return (
            f"--init-weights: weights of {package.name} {package.version} ({package_dir}); "
            f"{', '.join(f'{key} {source_config.get(key)} → group' for key in converted)}: every weight copied, "
            f"{len(dropped)} BatchNorm statistics tensors dropped (the model's function changes: train it on)"
        )

    source_widths, target_widths = list(source_config.get("widths", ())), list(model_config.get("widths", ()))
    if (
        architecture["name"] == model_name == "lambda_unet"
        and source_widths != target_widths
        and _without(source_config, "widths") == _without(model_config, "widths")
        and len(source_widths) == len(target_widths)
        and all(a <= b for a, b in zip(source_widths, target_widths))
    ):
        if dict(package.manifest["preprocessing"]) != dict(preprocessing):
            raise BadInputError(
                package_dir,
                f"--init-weights: the package's preprocessing {package.manifest['preprocessing']} differs from the run's "
                f"{dict(preprocessing)}; widening keeps the package's preprocessing",
            )
        state, widened = widen_widths(package.model.state_dict(), model, source=package_dir)
        model.load_state_dict(state)
        difference = _function_preserved(package.model, model, int(source_config.get("in_channels", 2)), len(target_widths))
        if not difference <= 1e-4:
            raise BadInputError(package_dir, f"--init-weights: the widened model's logits differ from the package's by {difference:.3g} (relative); not training from it")
        return (
            f"--init-weights: weights of {package.name} {package.version} ({package_dir}); widths {source_widths} widened to "
            f"{target_widths}: {widened} tensors widened, new channels read by old ones through zeros, so training starts as "
            f"the package's model (largest relative logit difference {difference:.1e} on a random study)"
        )

    source_channels = list(package.manifest["preprocessing"].get("channels", ()))
    target_channels = list(preprocessing.get("channels", ()))
    appended = target_channels[len(source_channels):]
    if (
        architecture["name"] != model_name
        or _without(source_config, "in_channels") != _without(model_config, "in_channels")
        or not appended
        or target_channels[: len(source_channels)] != source_channels
    ):
        raise BadInputError(
            package_dir,
            f"--init-weights holds {described} with channels {source_channels}, not {model_name} {dict(model_config)} "
            f"with channels {target_channels} (only the same model, or the same model with channels appended, can start from it)",
        )
    source_preprocessing = package.manifest["preprocessing"]
    source_norm = dict(source_preprocessing.get("normalization", {}) or {})
    target_norm = dict(preprocessing.get("normalization", {}) or {})
    if _without(source_preprocessing, "channels", "normalization") != _without(preprocessing, "channels", "normalization") or any(
        source_norm.get(name, "none") != target_norm.get(name, "none") for name in source_channels
    ):
        raise BadInputError(
            package_dir,
            f"--init-weights: the package's preprocessing {source_preprocessing} differs from the run's "
            f"{dict(preprocessing)} beyond the appended channels {appended}",
        )
    from .module import unwrapped_state_dict  # the keys of the plain architecture, also under activation checkpointing

    state, stem = widen_input_channels(
        package.model.state_dict(), unwrapped_state_dict(model), len(source_channels), len(target_channels), source=package_dir
    )
    model.load_state_dict(state)
    return (
        f"--init-weights: weights of {package.name} {package.version} ({package_dir}); input channels {source_channels} "
        f"widened to {target_channels}: {stem} gets zero weights for {appended}, so training starts as the package's model"
    )

