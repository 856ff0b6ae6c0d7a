"""Splitting a slice stack into overlapping slabs whose stitched result equals one pass.

A slab computes the output of its *core* slices from an input window that extends the
core by ``halo`` slices on each side (clipped at the study's ends). When ``halo`` is at
least the model's ``slice_receptive_radius`` every core slice sees exactly the slices it
would see in a one-pass run (the study ends are the same zero padding either way), so the
stitched result equals the one-pass result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Slab:
    """Slice ranges (half-open) of one slab: the input window and the core it outputs."""

    start: int
    stop: int
    core_start: int
    core_stop: int

    @property
    def core_in_window(self) -> slice:
        """Where the core lies inside the window's output."""
        return slice(self.core_start - self.start, self.core_stop - self.start)


def plan_slabs(num_slices: int, max_window: int, halo: int, *, needed: Sequence[bool] | None = None) -> list[Slab]:
    """Slabs covering ``num_slices`` with input windows of at most ``max_window`` slices.

    One slab when the whole stack fits. Otherwise cores of ``max_window - 2 * halo``
    slices (at least 1; a window then may exceed ``max_window``, the minimum that stays
    exact). Cores partition [0, num_slices) in order.

    ``needed`` (one bool per slice; None: every slice): only the slices whose output is
    needed get a core. Runs of needed slices closer than ``2 * halo`` are joined (their
    windows would overlap: computing the gap costs less than computing the halos twice),
    and each joined run is planned as above within the study, its windows reaching into
    the slices around it. Cores then cover every needed slice, in order; no slab when
    nothing is needed.
    """
    if num_slices < 1:
        raise ValueError(f"a study needs at least one slice, got {num_slices}")
    if halo < 0:
        raise ValueError(f"halo must be >= 0, got {halo}")
    needed = [True] * num_slices if needed is None else [bool(flag) for flag in needed]
    if len(needed) != num_slices:
        raise ValueError(f"needed has {len(needed)} flags for {num_slices} slices")
    runs: list[list[int]] = []  # [first, stop) of joined runs of needed slices
    for index, flag in enumerate(needed):
        if not flag:
            continue
        if runs and index - runs[-1][1] <= 2 * halo:
            runs[-1][1] = index + 1
        else:
            runs.append([index, index + 1])
    slabs = []
    for first, stop in runs:
        fits = min(num_slices, stop + halo) - max(0, first - halo) <= max_window
        core = stop - first if fits else max(1, max_window - 2 * halo)
        for core_start in range(first, stop, core):
            core_stop = min(stop, core_start + core)
            slabs.append(Slab(max(0, core_start - halo), min(num_slices, core_stop + halo), core_start, core_stop))
    return slabs
