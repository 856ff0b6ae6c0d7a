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

:func:`elastic_warp` is a separate, optional step (real backgrounds' ``elastic_probability``,
``lambdasegment train --elastic``): a smooth in-plane displacement field, the same for every
slice of the window, so that one real brain's rims, sulci and grey-matter dots take other
shapes and positions each time they are seen (issue 13's "elastic augmentation" of real
anatomy). Rotation and scale move the whole window; this bends it locally.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange

DWI_MAX = 4.0  # the preprocessing's clip of DWI / brain median
#: Spacing (mm) of the elastic field's random control points: gyri and sulci are 10-20 mm
#: across, so a field this coarse bends them rather than scrambling their texture.
ELASTIC_CONTROL_MM = 32.0
#: Range (mm) of the field's standard deviation per axis, drawn uniformly per window: up to
#: about a gyrus's half-width, within what separates two real brains after a rigid alignment.
ELASTIC_DISPLACEMENT_MM = (1.0, 4.0)


def resample_in_plane(image: torch.Tensor, mask: torch.Tensor, grid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``image`` (c, t, h, w) and ``mask`` (1, t, h, w) sampled at ``grid`` (t, h, w, 2; grid_sample's
    normalised coordinates, align_corners=False), each slice at its own in-plane grid, never across
    slices: the image bilinear, the mask bilinear and kept where >= 0.5 (float32, binary)."""
    slices = rearrange(image, "c t h w -> t c h w")
    # border padding: the corners brought in take the window edge's values (background eADC is 1, never 0)
    image = rearrange(F.grid_sample(slices, grid, mode="bilinear", padding_mode="border", align_corners=False), "t c h w -> c t h w")
    labels = F.grid_sample(rearrange(mask, "c t h w -> t c h w").float(), grid, mode="bilinear", align_corners=False)
    return image.contiguous(), (rearrange(labels, "t c h w -> c t h w") >= 0.5).float().contiguous()


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
        image, mask = resample_in_plane(image, mask, F.affine_grid(theta, [t, c, h, w], align_corners=False))
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


def elastic_warp(
    window: dict[str, torch.Tensor],
    rng: np.random.Generator,
    *,
    spacing_mm: float,
    control_mm: float = ELASTIC_CONTROL_MM,
    displacement_mm: tuple[float, float] = ELASTIC_DISPLACEMENT_MM,
) -> dict[str, torch.Tensor]:
    """``window`` resampled through one smooth random in-plane displacement field.

    Args:
        window: ``{"image": (c, t, h, w), "mask": (1, t, h, w)}`` on the model grid.
        rng: draws the field's standard deviation, then its control points.
        spacing_mm: the model grid's in-plane pixel size (mm).
        control_mm: spacing of the field's control points (mm); between them the field is
            bicubic, so it is smooth on the scale of a gyrus.
        displacement_mm: range of the displacement's standard deviation per axis (mm).

    Returns:
        A copy with the same field applied to every slice (never across slices) and every
        channel, resampled as the rotation is (:func:`resample_in_plane`).
    """
    if not (math.isfinite(spacing_mm) and spacing_mm > 0):
        raise ValueError(f"spacing_mm must be a pixel size > 0, got {spacing_mm}")
    image, mask = window["image"], window["mask"]
    _, t, h, w = image.shape
    sigma_px = rng.uniform(*displacement_mm) / spacing_mm
    points = (max(2, math.ceil(h * spacing_mm / control_mm) + 1), max(2, math.ceil(w * spacing_mm / control_mm) + 1))
    coarse = torch.from_numpy(rng.normal(0.0, sigma_px, (1, 2, *points)).astype(np.float32))
    field = F.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=True)[0]  # (2, h, w) pixels: (dy, dx)
    # grid_sample's normalised coordinates (align_corners=False): one pixel is 2 / size
    ys = (torch.arange(h, dtype=torch.float32) + 0.5) * 2.0 / h - 1.0
    xs = (torch.arange(w, dtype=torch.float32) + 0.5) * 2.0 / w - 1.0
    base_y, base_x = torch.meshgrid(ys, xs, indexing="ij")
    grid = torch.stack([base_x + field[1] * 2.0 / w, base_y + field[0] * 2.0 / h], dim=-1).expand(t, h, w, 2)
    warped, labels = resample_in_plane(image, mask, grid)
    return {**window, "image": warped, "mask": labels.to(mask.dtype)}
