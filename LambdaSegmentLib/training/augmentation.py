"""Bright-artefact augmentation of training windows.

Real DWI has susceptibility pile-up near the skull base far brighter than the synthetic
generator's (7-8x the brain median on the shared ISLES'22 case, against about 3x in
synthetic studies). LambdaUNet's Lambda+ layers multiply two projections of their input,
so activations grow roughly quadratically per layer with an input outside the training
range, and in eval mode (BatchNorm running statistics) such slices overflow to inf/NaN.
Adding bright blobs with a *normal* ADC (eADC unchanged, mask unchanged) puts those
intensities inside the training distribution and teaches that DWI brightness alone is not
infarct (the physics: an infarct is DWI-bright and ADC-low). A ``dwi_asymmetry`` channel is
left as computed from the study, so to a model that has one a blob reads as a bilateral artefact.

:func:`add_bright_field` is the broad, moderate kind: one smooth gain field over a region of
centimetres that brightens the DWI by up to 2x with the ADC unchanged, as a receive coil's bias,
a bright cortical ribbon or T2 shine-through do on real scans. Fine-tuning on the real cases as
backgrounds taught the networks to mark such tissue where their synthetic-only stage 1 did not
(issue 13, rule 100); the field shows it, unlabelled, on real texture.
"""

from __future__ import annotations

import numpy as np
import torch

from .window_augmentation import DWI_MAX


def add_bright_artefacts(
    window: dict[str, torch.Tensor],
    rng: np.random.Generator,
    *,
    dwi_channel: int,
    max_blobs: int = 3,
    gain_range: tuple[float, float] = (1.0, 7.0),
    sigma_range_px: tuple[float, float] = (1.5, 5.0),
) -> dict[str, torch.Tensor]:
    """Multiply the DWI channel of a window by 1 + gain x Gaussian blobs, outside the lesion.

    Args:
        window: {"image": (c, t, h, w), "mask": (1, t, h, w)}; changed copies are returned.
        rng: the window's random generator.
        dwi_channel: index of the DWI channel in ``image``.
        max_blobs: 1..max_blobs blobs, each on one to three consecutive slices.
        gain_range: peak relative brightening (1 → twice as bright at the centre).
        sigma_range_px: in-plane Gaussian width in pixels.
    """
    image = window["image"].clone()
    _c, t, h, w = image.shape
    outside_lesion = (window["mask"][0] == 0).numpy()
    dwi = image[dwi_channel].numpy()
    yy, xx = np.mgrid[0:h, 0:w]
    for _ in range(int(rng.integers(1, max_blobs + 1))):
        centre_t, centre_y, centre_x = int(rng.integers(t)), rng.uniform(0, h), rng.uniform(0, w)
        sigma, gain = rng.uniform(*sigma_range_px), rng.uniform(*gain_range)
        blob = np.exp(-((yy - centre_y) ** 2 + (xx - centre_x) ** 2) / (2 * sigma**2)).astype(np.float32)
        for slice_index in range(max(0, centre_t - 1), min(t, centre_t + 2)):
            weight = 1.0 if slice_index == centre_t else float(rng.uniform(0.0, 0.7))
            dwi[slice_index] *= 1.0 + gain * weight * blob * outside_lesion[slice_index]
    return {**window, "image": image}


def add_bright_field(
    window: dict[str, torch.Tensor],
    rng: np.random.Generator,
    *,
    dwi_channel: int,
    gain_range: tuple[float, float] = (0.2, 1.0),
    sigma_range_px: tuple[float, float] = (8.0, 24.0),
    sigma_range_slices: tuple[float, float] = (1.0, 4.0),
    dwi_max: float | None = DWI_MAX,
) -> dict[str, torch.Tensor]:
    """Multiply the DWI channel of a window by one broad Gaussian gain field, ADC and mask unchanged.

    The field is ``1 + gain * exp(-r^2 / 2)`` with ``r`` the distance from a random centre in
    the window, in units of an in-plane sigma (pixels) and a through-plane sigma (slices); it
    acts on every voxel, a lesion's too (a gain brightens a lesion as it brightens its
    neighbours, and a lesion stays a lesion), and the DWI stays within ``dwi_max``, the
    preprocessing's clip (None: a normalisation without one). Zero (outside the brain) stays zero.

    Args:
        window: {"image": (c, t, h, w), "mask": (1, t, h, w)}; a changed copy is returned.
        rng: the window's random generator (six uniforms drawn).
        dwi_channel: index of the DWI channel (brain-median units).
        gain_range: peak relative brightening (1: twice as bright at the centre).
        sigma_range_px: in-plane Gaussian width in pixels (8-24 at 2 mm: 16-48 mm).
        sigma_range_slices: through-plane Gaussian width in slices.
        dwi_max: the DWI channel's clip (4 under ``brain_median_clip4``), or None.
    """
    image = window["image"].clone()
    _c, t, h, w = image.shape
    centre_t, centre_y, centre_x = rng.uniform(0, t), rng.uniform(0, h), rng.uniform(0, w)
    sigma, sigma_t, gain = rng.uniform(*sigma_range_px), rng.uniform(*sigma_range_slices), rng.uniform(*gain_range)
    tt, yy, xx = np.meshgrid(np.arange(t) + 0.5, np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
    distance2 = ((yy - centre_y) ** 2 + (xx - centre_x) ** 2) / sigma**2 + (tt - centre_t) ** 2 / sigma_t**2
    field = torch.from_numpy((1.0 + gain * np.exp(-distance2 / 2.0)).astype(np.float32))
    brightened = image[dwi_channel] * field
    image[dwi_channel] = brightened if dwi_max is None else brightened.clamp(max=dwi_max)
    return {**window, "image": image}
