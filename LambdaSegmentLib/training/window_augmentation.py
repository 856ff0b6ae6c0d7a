"""Geometric, intensity and resolution augmentation of training windows on the model grid.

With only one or two real studies per fold as backgrounds, each must look different every
time the model sees it, or it is memorised. Everything here acts on one window
``{"image": (c, t, h, w), "mask": (1, t, h, w)}`` after the inference preprocessing
(DWI / brain median clipped to [0, 4], eADC in [0, 1]), in-plane only: the same in-plane
transform for every slice of the window, never a resampling across slices (thick slabs
are made from the study's signals before preprocessing, ``metrics.thick_slices``).

- left-right mirror (p 0.5): acute infarcts occur on either side; every channel flips, a
  ``dwi_asymmetry`` channel too, unchanged in sign (the channel of a mirrored study is the
  mirrored channel: ``Testing/preprocessing/test_dwi_asymmetry.py``);
- rotation ±20° and scale 0.85-1.15 (p 0.7), bilinear for the image, the mask kept where
  its interpolated value is ≥ 0.5;
- DWI contrast: gamma 0.75-1.35 on DWI / 4, a smooth multiplicative bias of ±20 %, and
  Gaussian noise of 0-0.04 (brain-median units);
- ADC scale 0.9-1.1 (eADC = exp(−b·ADC), so eADC ** s), as between scanners;
- in-plane blur σ 0.3-1 pixel (p 0.25): lower in-plane resolution.

Geometric steps and the blur act on every channel; the DWI contrast steps act on the DWI
channel only, so a ``dwi_asymmetry`` channel keeps the value computed from the study's
un-augmented final signals.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange

DWI_MAX = 4.0  # the preprocessing's clip of DWI / brain median


def augment_window(
    window: dict[str, torch.Tensor], rng: np.random.Generator, *, dwi_channel: int, eadc_channel: int
) -> dict[str, torch.Tensor]:
    """An augmented copy of ``window`` (see the module docstring); the mask stays binary."""
    image, mask = window["image"].clone(), window["mask"].clone()
    c, t, h, w = image.shape
    if rng.random() < 0.5:
        image, mask = image.flip(-1), mask.flip(-1)
    if rng.random() < 0.7:
        angle = math.radians(rng.uniform(-20.0, 20.0))
        scale = rng.uniform(0.85, 1.15)
        theta = torch.tensor(
            [[math.cos(angle) / scale, -math.sin(angle) / scale, 0.0], [math.sin(angle) / scale, math.cos(angle) / scale, 0.0]],
            dtype=torch.float32,
        ).expand(t, 2, 3)
        grid = F.affine_grid(theta, [t, c, h, w], align_corners=False)
        slices = rearrange(image, "c t h w -> t c h w")
        # border padding: the corners brought in take the window edge's values (background eADC is 1, never 0)
        image = rearrange(F.grid_sample(slices, grid, mode="bilinear", padding_mode="border", align_corners=False), "t c h w -> c t h w")
        labels = F.grid_sample(rearrange(mask, "c t h w -> t c h w"), grid, mode="bilinear", align_corners=False)
        mask = (rearrange(labels, "t c h w -> c t h w") >= 0.5).float()
    dwi = image[dwi_channel]
    inside = dwi > 0
    gamma = rng.uniform(0.75, 1.35)
    dwi = DWI_MAX * (dwi.clamp(0, DWI_MAX) / DWI_MAX) ** gamma
    coarse = torch.from_numpy(rng.normal(0.0, 1.0, (1, 1, 4, 4)).astype(np.float32))
    bias = F.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=False)[0, 0]
    dwi = dwi * torch.exp(rng.uniform(0.0, 0.2) * bias)
    dwi = dwi + inside * torch.from_numpy(rng.normal(0.0, rng.uniform(0.0, 0.04), dwi.shape).astype(np.float32))
    image[dwi_channel] = torch.where(inside, dwi.clamp(0, DWI_MAX), torch.zeros_like(dwi))
    image[eadc_channel] = image[eadc_channel].clamp(0, 1) ** rng.uniform(0.9, 1.1)
    if rng.random() < 0.25:
        sigma = rng.uniform(0.3, 1.0)
        radius = max(1, int(math.ceil(2.5 * sigma)))
        taps = torch.exp(-torch.arange(-radius, radius + 1, dtype=torch.float32) ** 2 / (2 * sigma**2))
        taps = taps / taps.sum()
        flat = rearrange(image, "c t h w -> (c t) 1 h w")
        flat = F.conv2d(F.pad(flat, (radius, radius, 0, 0), mode="replicate"), taps.view(1, 1, 1, -1))
        flat = F.conv2d(F.pad(flat, (0, 0, radius, radius), mode="replicate"), taps.view(1, 1, -1, 1))
        image = rearrange(flat, "(c t) 1 h w -> c t h w", c=c)
    return {**window, "image": image.contiguous(), "mask": mask.contiguous()}
