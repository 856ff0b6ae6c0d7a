"""Registry of segmentation models by name.

Every registered model follows one calling convention: ``forward(x)`` with ``x``
shaped (batch, channels, slices, height, width) returns logits shaped
(batch, 1, slices, height, width).
"""

from __future__ import annotations

from typing import Callable

from torch import nn

_BUILDERS: dict[str, Callable[..., nn.Module]] = {}


def register_model(name: str) -> Callable[[Callable[..., nn.Module]], Callable[..., nn.Module]]:
    """Decorator registering a model class or factory under ``name``."""

    def decorate(builder: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        if name in _BUILDERS:
            raise ValueError(f"model name {name!r} is already registered")
        _BUILDERS[name] = builder
        return builder

    return decorate


def create_model(name: str, **config: object) -> nn.Module:
    """Build the model registered as ``name`` with keyword ``config``.

    ``create_model("lambda_unet")`` with no arguments is the paper's configuration.
    """
    try:
        builder = _BUILDERS[name]
    except KeyError:
        raise ValueError(
            f"unknown model {name!r}; available: {', '.join(available_models())}"
        ) from None
    return builder(**config)


def available_models() -> list[str]:
    """Names of all registered models, sorted."""
    return sorted(_BUILDERS)
