"""How many slices one forward pass may take under a memory budget.

Peak activation memory of the UNet family grows linearly with slices x pixels and
with the first level's width. Measured on CPU with ``benchmarks/inference_memory.py``
(peak RSS growth during one forward pass; ``benchmarks/results/inference_memory.json``),
the paper LambdaUNet needs 8.5-11.2x the bytes of one float32 first-level feature map per
slice and the conv UNet 7.7x (earlier runs of the same script, on a busy machine, gave up
to 11.4x and 10.2x); the estimate below uses 16x to stay on the safe side.

The budget bounds the model's activations only: the study's own arrays (DWI, ADC, eADC,
probability on the DWI grid) and the libraries (about 0.4 GB for torch, SimpleITK,
matplotlib) come on top.
"""

from __future__ import annotations

import os

import torch
from torch import nn

ACTIVATION_FACTOR = 16  # peak bytes per slice / bytes of one fp32 first-level feature map (measured <= 14.3)
FLOAT32_BYTES = 4


def bytes_per_slice(model: nn.Module, height: int, width: int) -> int:
    """Estimated peak activation bytes per input slice of ``height`` x ``width`` pixels."""
    first_width = int(getattr(model, "widths", [64])[0])
    return ACTIVATION_FACTOR * first_width * height * width * FLOAT32_BYTES


def parameter_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters()) + sum(
        b.numel() * b.element_size() for b in model.buffers()
    )


def default_memory_budget_bytes(device: torch.device) -> int:
    """Half the free GPU memory on CUDA; otherwise half of the machine's physical memory."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free * 0.5)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.5)
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def max_slices_per_pass(model: nn.Module, height: int, width: int, budget_bytes: int) -> int:
    """Largest input window (slices) whose estimated peak fits ``budget_bytes`` (at least 1)."""
    available = budget_bytes - parameter_bytes(model)
    return max(1, available // bytes_per_slice(model, height, width))
