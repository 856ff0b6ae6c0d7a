"""Cropped scalar fields on the template grid and how to sample them at arbitrary points.

A lesion or a look-alike occupies a small part of the head, so it is built on a crop of
the 1 mm template grid (or of a coarser grid for big ones) instead of the whole volume.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy import ndimage


def sample_channels(values: torch.Tensor, ijk: np.ndarray, mode: str = "bilinear") -> np.ndarray:
    """Values of a (c, x, y, z) grid at continuous voxel indices ``ijk`` (3, n); 0 outside.

    Trilinear (``mode="bilinear"`` in torch's naming) or nearest interpolation of all
    channels at once with ``grid_sample``. Returns float32 (c, n).
    """
    scale = (2.0 / np.maximum(np.asarray(values.shape[1:], dtype=np.float32) - 1.0, 1.0))[::-1]
    # grid_sample wants the last axis in (W, H, D) = (z, y, x) order, normalised to [-1, 1]
    grid = np.ascontiguousarray(ijk[::-1].T, dtype=np.float32) * scale - 1.0  # (n, 3)
    grid_tensor = torch.from_numpy(grid).reshape(1, 1, 1, -1, 3)
    out = torch.nn.functional.grid_sample(values[None], grid_tensor, mode=mode, padding_mode="zeros", align_corners=True)
    return out.reshape(values.shape[0], -1).numpy()


@dataclass(frozen=True)
class CroppedField:
    """Values on template voxels ``start + stride * index`` (template 1 mm indices, x y z).

    Attributes:
        values: float32 (x, y, z) field of the crop, or (c, x, y, z) for several channels
            sampled at once (one interpolation for all of them).
        start: template voxel index of ``values[..., 0, 0, 0]``.
        stride: template voxels per crop voxel (1 or 2).
    """

    values: np.ndarray
    start: tuple[int, int, int]
    stride: int

    def sample(self, template_ijk: np.ndarray) -> np.ndarray:
        """Field at continuous template indices ``template_ijk`` (3, n), trilinear, 0 outside the crop.

        Returns (n,) for a scalar field, (c, n) for a channel stack.
        """
        stack = self.values if self.values.ndim == 4 else self.values[None]
        local = (template_ijk - np.asarray(self.start, dtype=np.float32)[:, None]) / self.stride
        inside = np.all((local > -1.0) & (local < np.asarray(stack.shape[1:], dtype=np.float32)[:, None]), axis=0)
        out = np.zeros((stack.shape[0], template_ijk.shape[1]), dtype=np.float32)
        if inside.any():
            out[:, inside] = sample_channels(torch.from_numpy(np.ascontiguousarray(stack)), local[:, inside])
        return out if self.values.ndim == 4 else out[0]


def smooth_noise(rng: np.random.Generator, shape: tuple[int, ...], sigma_voxels: float) -> np.ndarray:
    """Zero-mean unit-variance Gaussian noise smoothed by ``sigma_voxels`` (float32, ``shape``).

    Drawn on a coarse grid and upsampled when the smoothing is wide, which is much
    faster than filtering full-size white noise and looks the same.
    """
    factor = int(max(1, sigma_voxels // 2))
    coarse_shape = tuple(max(2, -(-n // factor) + 2) for n in shape)
    noise = rng.standard_normal(coarse_shape).astype(np.float32)
    noise = ndimage.gaussian_filter(noise, sigma_voxels / factor, mode="wrap")
    if factor > 1:
        zoom = [n / (c - 2) for n, c in zip(shape, coarse_shape)]
        coords = np.meshgrid(*[np.arange(n, dtype=np.float32) / z + 0.5 for n, z in zip(shape, zoom)], indexing="ij")
        noise = ndimage.map_coordinates(noise, coords, order=1, mode="nearest")
    noise = noise[tuple(slice(0, n) for n in shape)]
    std = float(noise.std())
    return (noise - noise.mean()) / (std if std > 0 else 1.0)
