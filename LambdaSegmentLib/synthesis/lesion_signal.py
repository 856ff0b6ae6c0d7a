"""The one signal model of an acute infarct: how much it lowers ADC and raises S0, voxel by voxel.

``lesion_signal(rng, lesion_fraction, spacing_mm, **params)`` works on any grid: the
generator calls it on its 1 mm template crop, and the same call injects a synthetic
infarct into a real study (multiply the tissue's ADC by ``adc_factor`` and its b0 by
``s0_factor``; the DWI follows as S0 * exp(-b * ADC): ``apply_lesion_signal`` does exactly that).

What it models (expert masks cover the whole DWI-hyperintense region, not just the core):
- a restricted core (relative ADC ``relative_adc``, 0.45-0.8) that grades outwards over
  ``grade_mm`` to a near-normal edge (``edge_relative_adc``, 0.85-1.0); components shallower
  than that grade over ``grade_reach`` x their own depth (< 1: a small lesion keeps its
  core; > 1: it never reaches it and stays faint);
- DWI that stays bright out to the edge: S0 is raised wherever the ADC drop alone would
  not reach the DWI ratio drawn for that depth (``edge_dwi_ratio`` at the edge,
  ``core_dwi_ratio`` in the core; a vasogenic / T2 component), so the outer part of an
  infarct has near-normal ADC with DWI 1.3-2x normal, and the bulk of a large one can
  reach 3x;
- older parts with T2 shine-through: smooth patches covering ``older_fraction`` of the
  lesion where ADC pseudo-normalises towards the edge value and S0 rises by
  ``t2_shine_through`` more;
- heterogeneity: smooth multiplicative noise (``heterogeneity``) on both factors.

Ratios are relative to the normal tissue the lesion replaces, evaluated at a reference
tissue ADC ``reference_adc`` (10^-3 mm^2/s) and ``b_value`` (s/mm^2). A fraction below 1
(partial volume) scales the change linearly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from .fields import smooth_noise

#: Defaults of every parameter; a (lo, hi) tuple is drawn uniformly, a scalar is used as is.
LESION_SIGNAL_DEFAULTS: dict[str, Any] = {
    "relative_adc": (0.45, 0.8),  # core ADC / normal ADC
    "edge_relative_adc": (0.85, 1.0),  # ADC / normal at the lesion's edge
    "grade_mm": (3.0, 10.0),  # depth over which the core grades out to the edge
    "grade_reach": (0.6, 2.0),  # grading width / the component's own depth, when that is less than grade_mm
    "core_dwi_ratio": (1.5, 3.2),  # DWI / normal in the core (S0 raised if the ADC drop gives less)
    "edge_dwi_ratio": (1.25, 2.0),  # DWI / normal at the edge (at most the core's)
    "t2_shine_through": (0.0, 0.5),  # extra relative S0 rise in older parts
    "older_fraction": (0.0, 0.6),  # share of the lesion that is older (pseudo-normalised ADC)
    "heterogeneity": (0.03, 0.15),  # std of the smooth multiplicative noise
    "texture_mm": 3.0,  # smoothing of that noise
    "reference_adc": 0.8,  # 1e-3 mm^2/s
    "b_value": 1000.0,  # s/mm^2
}


def _draw(rng: np.random.Generator, value: Any) -> float:
    if isinstance(value, (tuple, list)):
        lo, hi = value
        return float(rng.uniform(lo, hi))
    return float(value)


def draw_lesion_signal_params(rng: np.random.Generator, **params: Any) -> dict[str, float]:
    """One draw of every lesion-signal parameter (unknown names are refused)."""
    unknown = set(params) - set(LESION_SIGNAL_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown lesion signal parameter(s) {sorted(unknown)}; known: {sorted(LESION_SIGNAL_DEFAULTS)}")
    merged = {**LESION_SIGNAL_DEFAULTS, **params}
    drawn = {name: _draw(rng, merged[name]) for name in LESION_SIGNAL_DEFAULTS}
    drawn["edge_relative_adc"] = max(drawn["edge_relative_adc"], drawn["relative_adc"])
    drawn["edge_dwi_ratio"] = min(drawn["edge_dwi_ratio"], drawn["core_dwi_ratio"])
    return drawn


def lesion_signal(
    rng: np.random.Generator, lesion_fraction: np.ndarray, spacing_mm: tuple[float, float, float] | float, **params: Any
) -> tuple[np.ndarray, np.ndarray]:
    """ADC and S0 factors of an infarct on the grid of ``lesion_fraction``.

    Args:
        rng: the caller's generator (all randomness comes from it).
        lesion_fraction: (a, b, c) float in [0, 1], the infarcted share of each voxel.
        spacing_mm: voxel size along the three array axes (or one isotropic value).
        **params: overrides of :data:`LESION_SIGNAL_DEFAULTS` (a (lo, hi) tuple is drawn).
    Returns:
        ``adc_factor`` and ``s0_factor``, float32 arrays of the input's shape, exactly 1
        where the fraction is 0. Normal tissue ADC x ``adc_factor`` is the lesion's ADC;
        normal S0 x ``s0_factor`` its b0; DWI = S0 * exp(-b * ADC).
    """
    fraction = np.clip(np.asarray(lesion_fraction, dtype=np.float32), 0.0, 1.0)
    spacing = np.broadcast_to(np.asarray(spacing_mm, dtype=np.float64), (3,))
    p = draw_lesion_signal_params(rng, **params)
    inside = fraction >= 0.5
    # depth (mm) under the lesion's edge, graded per component: a component shallower than
    # grade_mm grades over grade_reach x its own depth, so with grade_reach < 1 a small
    # lesion keeps a restricted core and with grade_reach > 1 it stays faint (real
    # embolic dots are often only ~1.3x as bright as their surroundings)
    depth = ndimage.distance_transform_edt(inside, sampling=spacing).astype(np.float32)
    labels, n = ndimage.label(inside)
    grade = np.full(fraction.shape, p["grade_mm"], dtype=np.float32)
    if n:
        deepest = np.asarray(ndimage.maximum(depth, labels, np.arange(1, n + 1)), dtype=np.float32)
        width = np.minimum(p["grade_mm"], np.maximum(p["grade_reach"] * deepest, 0.5 * float(spacing.min())))
        grade = np.where(labels > 0, np.concatenate([[p["grade_mm"]], width])[labels], grade)
    t = np.clip(depth / grade, 0.0, 1.0)
    t = t * t * (3.0 - 2.0 * t)  # smoothstep: 0 at the edge, 1 in the core
    sigma = p["texture_mm"] / spacing
    older = np.zeros_like(fraction)
    if p["older_fraction"] > 0 and inside.any():
        field = smooth_noise(rng, fraction.shape, 2.0 * float(np.mean(sigma)))
        cut = np.quantile(field[inside], 1.0 - p["older_fraction"])
        older = np.clip((field - cut) / (0.5 * float(field[inside].std()) + 1e-6), 0.0, 1.0)
    noise = p["heterogeneity"] * smooth_noise(rng, fraction.shape, float(np.mean(sigma)))
    relative = p["edge_relative_adc"] + (p["relative_adc"] - p["edge_relative_adc"]) * t
    relative = relative + (p["edge_relative_adc"] - relative) * older  # pseudo-normalised older parts
    relative = np.clip(relative * (1.0 + noise), 0.2, 1.2)
    target_dwi = p["edge_dwi_ratio"] + (p["core_dwi_ratio"] - p["edge_dwi_ratio"]) * t
    target_dwi = target_dwi * (1.0 + p["t2_shine_through"] * older) * (1.0 - 0.5 * noise)
    bk_adc = p["b_value"] / 1000.0 * p["reference_adc"]
    # DWI ratio = s0 * exp(-b ADC_ref (relative - 1)): raise S0 where the ADC drop falls short
    s0 = np.maximum(target_dwi * np.exp(bk_adc * (relative - 1.0)), 1.0)
    adc_factor = 1.0 + fraction * (relative - 1.0)
    s0_factor = 1.0 + fraction * (s0 - 1.0)
    return adc_factor.astype(np.float32), s0_factor.astype(np.float32)


def apply_lesion_signal(
    dwi: np.ndarray, adc: np.ndarray, b_value: float, adc_factor: np.ndarray, s0_factor: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A real study's DWI and ADC with an infarct put in through the signal equation.

    S0 = DWI * exp(b * ADC) is recovered per voxel, then the lesion's ADC = ADC x
    ``adc_factor`` and DWI = S0 x ``s0_factor`` x exp(-b x ADC_lesion), i.e.
    DWI x ``s0_factor`` x exp(-b ADC (adc_factor - 1)).

    Args:
        dwi: (a, b, c) trace image at ``b_value`` (any scale).
        adc: same shape, in 10^-3 mm^2/s.
        b_value: s/mm^2.
        adc_factor, s0_factor: from :func:`lesion_signal` on the same grid.
    Returns:
        (dwi, adc) float32, unchanged wherever both factors are 1.
    """
    adc = np.asarray(adc, dtype=np.float32)
    new_adc = adc * adc_factor
    new_dwi = np.asarray(dwi, dtype=np.float32) * s0_factor * np.exp(-b_value / 1000.0 * adc * (adc_factor - 1.0))
    return new_dwi.astype(np.float32), new_adc.astype(np.float32)
