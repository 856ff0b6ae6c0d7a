"""``SyntheticStudies``: synthetic studies made on the fly, as a torch ``Dataset``.

Item ``index`` is ``generate(base_seed + index, **ranges)``: deterministic, so every
DataLoader worker (and every DDP rank) makes the same study for the same index without
sharing state. With a ``preprocessing`` block (the model manifest's, see
:func:`LambdaSegmentLib.preprocessing.prepare_input`) items are training windows
prepared exactly as inference prepares a real study.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch.utils.data import Dataset

from .generator import SyntheticStudy, generate


def study_to_model_grid(study: SyntheticStudy, preprocessing: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The model input and target of a synthetic study, through the inference preprocessing.

    The study goes through :func:`LambdaSegmentLib.io.load_study` (unit conversion, eADC)
    and :func:`LambdaSegmentLib.preprocessing.prepare_input`, so training sees exactly what
    inference will see on a real scan.

    Returns:
        channels float32 (c, t, h, w) and mask float32 (t, h, w) in {0, 1}.
    """
    from LambdaSegmentLib.io.study import load_study
    from LambdaSegmentLib.preprocessing import prepare_input

    loaded = load_study(dwi=study.dwi, adc=study.adc, adc_unit=study.adc_unit, b_value=study.b_value)
    prepared = prepare_input(loaded, preprocessing)
    mask = prepared.grid.to_stack(study.mask.array.astype(np.float32), interpolation="nearest")
    return prepared.channels, (mask > 0.5).astype(np.float32)


def crop_window(
    channels: np.ndarray, mask: np.ndarray, rng: np.random.Generator, window_slices: int, size_hw: tuple[int, int],
    lesion_window_probability: float = 0.7,
) -> tuple[np.ndarray, np.ndarray]:
    """``window_slices`` consecutive slices, centre-cropped or zero-padded to ``size_hw``.

    With probability ``lesion_window_probability`` (when there is a lesion) the window
    contains at least one lesion slice. Returns (c, window, h, w) and (window, h, w).
    """
    c, t, h, w = channels.shape
    lesion_slices = np.nonzero(mask.reshape(t, -1).any(axis=1))[0]
    if t <= window_slices:
        start = 0
    elif len(lesion_slices) and rng.random() < lesion_window_probability:
        centre = int(rng.choice(lesion_slices))
        start = int(np.clip(centre - rng.integers(0, window_slices), 0, t - window_slices))
    else:
        start = int(rng.integers(0, t - window_slices + 1))
    out_channels = np.zeros((c, window_slices, *size_hw), dtype=np.float32)
    out_mask = np.zeros((window_slices, *size_hw), dtype=np.float32)
    n = min(window_slices, t - start)
    src_h, dst_h = _centred(h, size_hw[0])
    src_w, dst_w = _centred(w, size_hw[1])
    out_channels[:, :n, dst_h, dst_w] = channels[:, start : start + n, src_h, src_w]
    out_mask[:n, dst_h, dst_w] = mask[start : start + n, src_h, src_w]
    return out_channels, out_mask


def _centred(size: int, target: int) -> tuple[slice, slice]:
    """Source and destination slices that centre ``size`` within ``target`` (crop or pad)."""
    if size >= target:
        start = (size - target) // 2
        return slice(start, start + target), slice(0, target)
    start = (target - size) // 2
    return slice(0, size), slice(start, start + size)


class SyntheticStudies(Dataset):
    """A map-style dataset of ``length`` synthetic studies, seeded by index.

    Args:
        length: number of items.
        base_seed: item ``i`` uses seed ``base_seed + i`` (use disjoint ranges for
            training and validation).
        preprocessing: None → items are :class:`SyntheticStudy` objects (use
            ``collate_fn=list``); a manifest preprocessing block → items are training
            windows ``{"image": (c, t, h, w), "mask": (1, t, h, w), "seed": int}`` float32
            tensors that the default collate stacks into (b, c, t, h, w).
        window_slices: t of a training window (the paper's 8).
        size_hw: in-plane size of a window after centre crop / zero pad (divisible by 16).
        **ranges: passed to :func:`generate` (e.g. ``in_plane_spacing_mm=(0.9, 2.0)``).
    """

    def __init__(
        self,
        length: int,
        *,
        base_seed: int = 0,
        preprocessing: Mapping[str, Any] | None = None,
        window_slices: int = 8,
        size_hw: tuple[int, int] = (128, 128),
        **ranges: Any,
    ) -> None:
        if length < 0:
            raise ValueError(f"length must be >= 0, got {length}")
        if size_hw[0] % 16 or size_hw[1] % 16:
            raise ValueError(f"size_hw must be divisible by 16 for the models, got {size_hw}")
        self.length = int(length)
        self.base_seed = int(base_seed)
        self.preprocessing = dict(preprocessing) if preprocessing is not None else None
        self.window_slices = int(window_slices)
        self.size_hw = (int(size_hw[0]), int(size_hw[1]))
        self.ranges = dict(ranges)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> SyntheticStudy | dict[str, torch.Tensor | int]:
        if not 0 <= index < self.length:
            raise IndexError(f"index {index} out of range for {self.length} studies")
        seed = self.base_seed + int(index)
        study = generate(seed, **self.ranges)
        if self.preprocessing is None:
            return study
        channels, mask = study_to_model_grid(study, self.preprocessing)
        rng = np.random.default_rng([seed, 8])
        window, window_mask = crop_window(channels, mask, rng, self.window_slices, self.size_hw)
        return {
            "image": torch.from_numpy(window),
            "mask": torch.from_numpy(window_mask)[None],
            "seed": seed,
        }
