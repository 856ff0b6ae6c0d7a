"""A small *untrained* model package, for plumbing only (tests, and the demo when no
trained package is installed). Its output means nothing clinically; every place that
uses it says so ("UNTRAINED, for plumbing only")."""

from __future__ import annotations

from pathlib import Path

import torch

from LambdaSegmentLib.models import create_model

from .package import save_model_package

UNTRAINED_LABEL = "UNTRAINED, for plumbing only"
SMALL_LAMBDA_UNET = {"widths": [8, 16, 32], "key_dim": 4, "intra_depth": 2, "value_dim": 8}
DEFAULT_PREPROCESSING = {
    "channels": ["eadc", "dwi"],
    "in_plane_spacing_mm": 2.0,
    "normalization": {"dwi": "brain_median", "eadc": "clip01"},
    "pad_multiple": 16,
}


def save_untrained_package(
    directory: str | Path,
    *,
    seed: int = 0,
    architecture: str = "lambda_unet",
    config: dict | None = None,
    preprocessing: dict | None = None,
    threshold: float = 0.5,
) -> Path:
    """Write a randomly initialised small model package into ``directory``; returns it.

    Three levels (through-slice receptive radius 4 for LambdaUNet), a few thousand
    parameters, seeded so the same seed gives the same weights and SHA-256 content.
    """
    config = dict(SMALL_LAMBDA_UNET if config is None else config)
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = create_model(architecture, **config).eval()
    finally:
        torch.random.set_rng_state(generator_state)
    manifest = {
        "name": f"untrained-{architecture}",
        "version": f"0.0.0+seed{seed}",
        "architecture": {"name": architecture, "config": config},
        "preprocessing": dict(DEFAULT_PREPROCESSING if preprocessing is None else preprocessing),
        "slice_context": getattr(model, "slice_context", None),
        "threshold": threshold,
        "training_data": UNTRAINED_LABEL,
        "created": "1970-01-01T00:00:00+00:00",  # fixed so the package is reproducible
    }
    return save_model_package(model, manifest, directory)
