"""Splitting a slice stack into overlapping slabs whose stitched result equals one pass.

A slab computes the output of its *core* slices from an input window that extends the
core by ``halo`` slices on each side (clipped at the study's ends). When ``halo`` is at
least the model's ``slice_receptive_radius`` every core slice sees exactly the slices it
would see in a one-pass run (the study ends are the same zero padding either way), so the
stitched result equals the one-pass result.
"""

from __future__ import annotations

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


def plan_slabs(num_slices: int, max_window: int, halo: int) -> list[Slab]:
    """Slabs covering ``num_slices`` with input windows of at most ``max_window`` slices.

    One slab when the whole stack fits. Otherwise cores of ``max_window - 2 * halo``
    slices (at least 1; a window then may exceed ``max_window``, the minimum that stays
    exact). Cores partition [0, num_slices) in order.
    """
    if num_slices < 1:
        raise ValueError(f"a study needs at least one slice, got {num_slices}")
    if halo < 0:
        raise ValueError(f"halo must be >= 0, got {halo}")
    if max_window >= num_slices:
        return [Slab(0, num_slices, 0, num_slices)]
    core = max(1, max_window - 2 * halo)
    slabs = []
    for core_start in range(0, num_slices, core):
        core_stop = min(num_slices, core_start + core)
        slabs.append(Slab(max(0, core_start - halo), min(num_slices, core_stop + halo), core_start, core_stop))
    return slabs
