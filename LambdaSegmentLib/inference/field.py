"""The in-plane field a network runs on: the brain's box on the model's slice stack, never
narrower than a given width. Off unless a package's manifest asks for it
(``"network_field_mm": W``, the narrowest field in mm); without it every network runs on the
whole stack.

Why it exists: a stack much wider than the head (e.g. 256 x 256 voxels at 2 mm, a 512 mm field
of view) is mostly background; the network's cost grows with the pixels it sees, and its
global lambda (a softmax over every pixel of a slice, ``models.lambda_plus``) weighs that
background in. Why it is off: issue 13's rules 121 and 122 measured it for the bundled 2.5.0
at W = 256 mm (the widest training window, 128 voxels at 2 mm): nearly twice as fast on 384-512 mm
fields of view, but 0.017 less mean Dice on 16 such generator studies than the whole stack,
and one of the two ISLES'22 cases zero-padded to 512 mm moved further from its delivered mask
(``benchmarks/network_field.py``; docs/ablation-since-2.5.0.md). With it on, the network runs on the
brain mask's bounding box grown by ``FIELD_MARGIN_MM`` on each side, widened to at least W, in
whole multiples of the manifest's ``pad_multiple``, kept inside the stack; a stack no wider is
run whole, unchanged to the bit. The probability outside the field is 0: it lies at least
``FIELD_MARGIN_MM`` outside the brain, where the mask is 0 anyway.

Axis letters: t slices, h rows, w columns of the model's stack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import BadInputError

#: Context kept beyond the brain's bounding box on each side (mm).
FIELD_MARGIN_MM = 16.0
#: The manifest key that turns the field on: the narrowest field (mm).
FIELD_KEY = "network_field_mm"


@dataclass(frozen=True)
class Field:
    """Rows and columns of a (t, h, w) stack that a network runs on.

    Attributes:
        rows: half-open range of h.
        columns: half-open range of w.
        stack_hw: (h, w) of the whole stack.
    """

    rows: slice
    columns: slice
    stack_hw: tuple[int, int]

    @property
    def whole(self) -> bool:
        """True when the field is the whole stack (nothing is cropped)."""
        return (self.rows.stop - self.rows.start, self.columns.stop - self.columns.start) == self.stack_hw

    @property
    def shape_hw(self) -> tuple[int, int]:
        """(h, w) of the field."""
        return self.rows.stop - self.rows.start, self.columns.stop - self.columns.start

    def crop(self, stack: np.ndarray) -> np.ndarray:
        """The field of ``stack`` (..., h, w): the array itself when the field is whole."""
        return stack if self.whole else np.ascontiguousarray(stack[..., self.rows, self.columns])

    def embed(self, field_values: np.ndarray) -> np.ndarray:
        """A field's map (..., h_field, w_field) put back on the whole stack, 0 outside the field."""
        if self.whole:
            return field_values
        whole = np.zeros(field_values.shape[:-2] + self.stack_hw, dtype=field_values.dtype)
        whole[..., self.rows, self.columns] = field_values
        return whole


def whole_stack(stack_hw: tuple[int, int]) -> Field:
    """The field that is the whole (h, w) stack."""
    return Field(slice(0, stack_hw[0]), slice(0, stack_hw[1]), (int(stack_hw[0]), int(stack_hw[1])))


def field_problem(manifest: dict) -> str | None:
    """What is wrong with a manifest's ``network_field_mm``, or None when it is absent, null or
    a positive width in mm (``package.read_manifest`` names the file)."""
    value = manifest.get(FIELD_KEY)
    if value is None or (not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < float(value) < 10_000):
        return None
    return f"{FIELD_KEY} must be a positive width in mm or null, got {value!r}"


def field_setting(manifest: dict) -> float | None:
    """The manifest's narrowest field (mm), or None when it runs its networks on the whole stack.

    Raises:
        BadInputError: :func:`field_problem` (source "model manifest").
    """
    problem = field_problem(manifest)
    if problem:
        raise BadInputError("model manifest", problem)
    value = manifest.get(FIELD_KEY)
    return None if value is None else float(value)


def brain_field(
    brain_thw: np.ndarray,
    spacing_hw_mm: tuple[float, float],
    multiple: int,
    *,
    min_field_mm: float,
    margin_mm: float = FIELD_MARGIN_MM,
) -> Field:
    """The field around the brain of one stack.

    Args:
        brain_thw: the brain mask on the model's stack, (t, h, w), nonzero = brain.
        spacing_hw_mm: in-plane spacing of the stack (mm).
        multiple: the network's size multiple (the manifest's ``pad_multiple``); the stack's
            h and w are multiples of it.
        min_field_mm: the narrowest field (mm) along each axis.
        margin_mm: kept beyond the brain's bounding box on each side (mm).

    Returns:
        The field; the whole stack when the brain mask is empty or the field would cover it.
    """
    stack_hw = (int(brain_thw.shape[1]), int(brain_thw.shape[2]))
    whole = whole_stack(stack_hw)
    if not np.any(brain_thw):
        return whole
    ranges = []
    for axis, (size, spacing) in enumerate(zip(stack_hw, spacing_hw_mm)):
        present = np.flatnonzero(np.any(brain_thw, axis=tuple(a for a in (0, 1, 2) if a != axis + 1)))
        low, high = int(present[0]), int(present[-1]) + 1
        wanted = max(high - low + 2 * math.ceil(margin_mm / spacing), math.ceil(min_field_mm / spacing - 1e-6))
        extent = min(size, multiple * math.ceil(wanted / multiple))
        start = min(max(0, (low + high - extent) // 2), size - extent)
        ranges.append(slice(start, start + extent))
    return Field(ranges[0], ranges[1], stack_hw)
