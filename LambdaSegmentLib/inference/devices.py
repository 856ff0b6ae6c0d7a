"""Choosing the compute device: ``auto`` (CUDA, then Apple MPS, then CPU), ``cpu``, ``cuda[:N]``, ``mps``."""

from __future__ import annotations

import torch

from LambdaSegmentLib.errors import BadInputError


def resolve_device(spec: str = "auto") -> torch.device:
    """The torch device for ``spec``; BadInputError (source ``--device``) when unknown or absent."""
    spec = (spec or "auto").strip().lower()
    if spec == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "mps":
        if not mps_available():
            raise BadInputError("--device", "Apple MPS was requested but is not available on this machine")
        return torch.device("mps")
    if spec == "cuda" or spec.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise BadInputError("--device", f"{spec} was requested but no CUDA GPU is available (use --device cpu or auto)")
        index_text = spec.partition(":")[2]
        if index_text:
            if not index_text.isdigit() or int(index_text) >= torch.cuda.device_count():
                raise BadInputError("--device", f"{spec}: no such GPU (this machine has {torch.cuda.device_count()})")
        return torch.device(spec)
    raise BadInputError("--device", f"unknown device {spec!r}; use auto, cpu, cuda, cuda:N or mps")


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def describe_device(device: torch.device) -> str:
    """Human-readable device name for reports, e.g. ``cuda:0 (NVIDIA H100)`` or ``cpu``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return device.type
