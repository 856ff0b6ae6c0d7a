"""Training windows (c, 8, h, w) cut from prepared studies, and whole studies for validation.

Axis letters: c channels, t slices, h w in-plane. A window is ``window_slices``
consecutive slices, cropped or zero-padded in-plane to ``size_hw``; studies shorter than
a window are zero-padded at the end (the models zero-pad beyond a study's ends anyway).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from .augmentation import add_bright_artefacts
from .prepared import PreparedCase, prepare_synthetic

if TYPE_CHECKING:
    from .carved_lesions import CarvedLesion

VALIDATION_SEED_OFFSET = 10_000_000  # synthetic validation seeds never meet training seeds
#: Second word of the seed of a study's CarveMix draws, ``default_rng([seed, CARVE_STREAM])``: a
#: stream of its own (window streams are ``[seed, window]`` with small window numbers), so
#: carving leaves every other draw of the study unchanged.
CARVE_STREAM = 0xCA4E


def _placement(size: int, target: int, offset: int) -> tuple[slice, slice]:
    """(source, destination) slices putting ``size`` into ``target``: a crop starting at
    ``offset`` when larger, centred zero padding when smaller."""
    if size >= target:
        return slice(offset, offset + target), slice(0, target)
    start = (target - size) // 2
    return slice(0, size), slice(start, start + size)


def cut_window(
    case: PreparedCase, start: int, window_slices: int, size_hw: tuple[int, int], offset_hw: tuple[int, int] = (0, 0)
) -> dict[str, torch.Tensor]:
    """Slices ``start .. start + window_slices`` of ``case``; in-plane crop at ``offset_hw``
    (when larger than ``size_hw``) or centred zero padding.

    Returns ``{"image": (c, window, h, w), "mask": (1, window, h, w)}`` float32 tensors.
    """
    c, t, h, w = case.channels.shape
    image = np.zeros((c, window_slices, *size_hw), dtype=np.float32)
    mask = np.zeros((1, window_slices, *size_hw), dtype=np.float32)
    n = min(window_slices, t - start)
    src_h, dst_h = _placement(h, size_hw[0], offset_hw[0])
    src_w, dst_w = _placement(w, size_hw[1], offset_hw[1])
    image[:, :n, dst_h, dst_w] = case.channels[:, start : start + n, src_h, src_w]
    mask[0, :n, dst_h, dst_w] = case.mask[start : start + n, src_h, src_w]
    return {"image": torch.from_numpy(image), "mask": torch.from_numpy(mask)}


def random_window(
    case: PreparedCase, rng: np.random.Generator, window_slices: int, size_hw: tuple[int, int], lesion_probability: float
) -> dict[str, torch.Tensor]:
    """A random window of ``case``; with ``lesion_probability`` (when the case has a lesion)
    one that holds a lesion slice, and an in-plane crop that holds a lesion pixel."""
    _c, t, h, w = case.channels.shape
    lesion_voxels = np.argwhere(case.mask > 0)
    with_lesion = len(lesion_voxels) > 0 and rng.random() < lesion_probability
    if with_lesion:
        return window_holding(case, lesion_voxels[rng.integers(len(lesion_voxels))], rng, window_slices, size_hw)
    max_start = max(0, t - window_slices)
    max_offset = (max(0, h - size_hw[0]), max(0, w - size_hw[1]))
    start = int(rng.integers(0, max_start + 1))
    offset = (int(rng.integers(0, max_offset[0] + 1)), int(rng.integers(0, max_offset[1] + 1)))
    return cut_window(case, start, window_slices, size_hw, offset)


def window_holding(
    case: PreparedCase, voxel_thw: np.ndarray, rng: np.random.Generator, window_slices: int, size_hw: tuple[int, int]
) -> dict[str, torch.Tensor]:
    """A window of ``case`` that holds the voxel ``voxel_thw`` (slice, row, column), at a random
    place within the window (clipped to the study)."""
    _c, t, h, w = case.channels.shape
    max_start = max(0, t - window_slices)
    max_offset = (max(0, h - size_hw[0]), max(0, w - size_hw[1]))
    lt, lh, lw = (int(v) for v in voxel_thw)
    start = int(np.clip(lt - rng.integers(0, window_slices), 0, max_start))
    offset = tuple(
        int(np.clip(centre - rng.integers(0, size), 0, limit))
        for centre, size, limit in ((lh, size_hw[0], max_offset[0]), (lw, size_hw[1], max_offset[1]))
    )
    return cut_window(case, start, window_slices, size_hw, offset)


class RealWindows(Dataset):
    """Every stride-1 window of every prepared real case (the paper's sampling), in an
    order shuffled per epoch (seeded), centred in-plane."""

    def __init__(
        self, cases: Sequence[PreparedCase], *, window_slices: int, size_hw: tuple[int, int], seed: int = 0, epoch: int = 0
    ) -> None:
        self.cases = list(cases)
        self.window_slices, self.size_hw = window_slices, size_hw
        self.index = [
            (number, start)
            for number, case in enumerate(self.cases)
            for start in range(max(1, case.num_slices - window_slices + 1))
        ]
        self.order = np.random.default_rng([seed, epoch]).permutation(len(self.index))

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        number, start = self.index[int(self.order[item])]
        case = self.cases[number]
        _c, _t, h, w = case.channels.shape
        offset = (max(0, h - self.size_hw[0]) // 2, max(0, w - self.size_hw[1]) // 2)
        return cut_window(case, start, self.window_slices, self.size_hw, offset)


class SyntheticWindows(Dataset):
    """``studies`` synthetic studies made on the fly, ``windows_per_study`` random windows each.

    With ``artefact_probability`` > 0 that share of windows gets bright DWI artefacts with
    a normal ADC (:mod:`.augmentation`). With ``carved`` lesions and ``carve_probability``
    > 0 that share of studies gets 1-3 of them pasted in (CarveMix, :mod:`.carved_lesions`),
    drawn from ``default_rng([seed, CARVE_STREAM])``; with 0 (the default) the studies are
    exactly the generator's.

    Study ``s`` of epoch ``e`` has seed ``base_seed + e * studies + s``, so every epoch sees
    fresh studies, deterministically, on every worker and rank. Consecutive items share a
    study (a one-study cache per worker), so keep this dataset unshuffled.
    """

    def __init__(
        self,
        studies: int,
        *,
        preprocessing: Mapping[str, Any],
        windows_per_study: int,
        window_slices: int,
        size_hw: tuple[int, int],
        base_seed: int = 0,
        epoch: int = 0,
        lesion_probability: float = 0.7,
        ranges: Mapping[str, Any] | None = None,
        artefact_probability: float = 0.0,
        carved: Sequence["CarvedLesion"] = (),
        carve_probability: float = 0.0,
    ) -> None:
        if carve_probability > 0 and not carved:
            raise ValueError("carve_probability > 0 needs carved lesions")
        self.carved, self.carve_probability = list(carved), float(carve_probability)
        self.studies, self.windows_per_study = int(studies), int(windows_per_study)
        self.artefact_probability = float(artefact_probability)
        channels = list(self.preprocessing_channels(preprocessing))
        self.dwi_channel = channels.index("dwi") if "dwi" in channels else None
        self.preprocessing, self.ranges = dict(preprocessing), dict(ranges or {})
        self.window_slices, self.size_hw = window_slices, size_hw
        self.base_seed, self.epoch, self.lesion_probability = int(base_seed), int(epoch), lesion_probability
        self._cache: tuple[int, PreparedCase] | None = None

    def __len__(self) -> int:
        return self.studies * self.windows_per_study

    def study_seed(self, study: int) -> int:
        return self.base_seed + self.epoch * self.studies + study

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        study, window = divmod(int(item), self.windows_per_study)
        seed = self.study_seed(study)
        if self._cache is None or self._cache[0] != seed:
            self._cache = (seed, self.make_study(seed))
        rng = np.random.default_rng([seed, window])
        item = random_window(self._cache[1], rng, self.window_slices, self.size_hw, self.lesion_probability)
        if self.dwi_channel is not None and rng.random() < self.artefact_probability:
            item = add_bright_artefacts(item, rng, dwi_channel=self.dwi_channel)
        return item

    def make_study(self, seed: int) -> PreparedCase:
        """Synthetic study ``seed``, with carved lesions pasted in for a ``carve_probability`` share."""
        if self.carve_probability > 0:
            rng = np.random.default_rng([seed, CARVE_STREAM])
            if rng.random() < self.carve_probability:
                from .carved_lesions import prepare_carved_synthetic  # imports this module

                return prepare_carved_synthetic(seed, self.preprocessing, self.ranges, self.carved, rng)
        return prepare_synthetic(seed, self.preprocessing, self.ranges)

    @staticmethod
    def preprocessing_channels(preprocessing: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(preprocessing.get("channels", ()))


class Interleaved(Dataset):
    """Two datasets merged evenly in proportion to their lengths, each keeping its own
    order (so a synthetic dataset's consecutive windows stay consecutive)."""

    def __init__(self, first: Dataset, second: Dataset) -> None:
        self.first, self.second = first, second
        self.n_first, self.n_second = len(first), len(second)
        total = self.n_first + self.n_second
        taken = (np.arange(1, total + 1) * self.n_first) // max(1, total)
        self.from_first = np.diff(np.concatenate([[0], taken])) > 0
        self.position = np.where(self.from_first, np.cumsum(self.from_first) - 1, np.cumsum(~self.from_first) - 1)

    def __len__(self) -> int:
        return self.n_first + self.n_second

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        source = self.first if self.from_first[item] else self.second
        return source[int(self.position[item])]


class WholeStudies(Dataset):
    """Prepared studies served whole: ``{"image": (c, t, h, w), "mask": (1, t, h, w)}``."""

    def __init__(self, cases: Sequence[PreparedCase]) -> None:
        self.cases = list(cases)

    def __len__(self) -> int:
        return len(self.cases)

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        case = self.cases[item]
        return {"image": torch.from_numpy(case.channels), "mask": torch.from_numpy(case.mask)[None]}
