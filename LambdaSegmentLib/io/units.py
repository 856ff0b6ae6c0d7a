"""ADC units: detection from brain-voxel statistics, conversion, and eADC ⇄ ADC.

Vendors and pipelines store ADC in mm²/s (normal brain ≈ 0.0008), 10⁻³ mm²/s (≈ 0.8) or
10⁻⁶ mm²/s (≈ 800). Inside the library ADC is always in **10⁻³ mm²/s**. The unit of a
map is recognised from the median ADC over the DWI's brain foreground: normal brain
parenchyma lies at 0.7–0.9 ×10⁻³ mm²/s and CSF at ≈ 3, so the median of a real map
lies in 0.3–3.0 in its own unit, and the three units are a factor 1000 apart.
A median that fits none of them is refused with the measured value.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import BadInputError
from .volume import Volume

#: Factor that converts an ADC in the named unit into 10⁻³ mm²/s.
ADC_UNIT_TO_CANONICAL: dict[str, float] = {"mm2/s": 1000.0, "1e-3 mm2/s": 1.0, "1e-6 mm2/s": 0.001}

#: The ischemic-core criterion of the thrombectomy trials (DEFUSE 3, commercial RAPID):
#: ADC < 620 x 10⁻⁶ mm²/s, here in the canonical 10⁻³ mm²/s.
ADC_CORE_THRESHOLD = 0.62

#: Plausible median brain ADC, in 10⁻³ mm²/s (white matter 0.7 … CSF-rich brains near 3).
PLAUSIBLE_BRAIN_MEDIAN_ADC = (0.3, 3.0)

#: More than this fraction of negative ADC values in the brain is refused (interpolated
#: research data have a few slightly negative voxels at the brain edge: 0.05 % on ISLES'22).
MAX_NEGATIVE_FRACTION = 0.01

#: An "ADC" whose brain median is below EADC_LIKE_MAX_MEDIAN (10⁻³ mm²/s; normal brain ≥ 0.7)
#: and whose 99th percentile is at most EADC_LIKE_MAX_P99 (no CSF) is an eADC given as ADC:
#: an eADC's brain median (≈ 0.35–0.45 at b = 1000) would otherwise pass as a plausible ADC.
EADC_LIKE_MAX_MEDIAN = 0.7
EADC_LIKE_MAX_P99 = 1.05

#: More than this fraction of eADC values above 1 (eADC = S_b/S_0 ≤ 1) is refused.
MAX_EADC_ABOVE_ONE_FRACTION = 0.05


def brain_median(values: np.ndarray, foreground: np.ndarray) -> float:
    """Median of ``values`` over foreground voxels that are not exactly 0 (0 = no data); NaN if none."""
    inside = values[foreground & (values != 0)]
    return float(np.median(inside)) if inside.size else float("nan")


def refuse_missing_brain_values(median: float, source: str | Path) -> None:
    """Refuse a map with no value inside the DWI's brain foreground (``median`` from :func:`brain_median` is NaN)."""
    if np.isnan(median):
        raise BadInputError(source, "has no non-zero value where the DWI shows brain signal (wrong image, or not aligned with the DWI?)")


def detect_adc_unit(adc: Volume, foreground: np.ndarray, source: str | Path) -> str:
    """The unit of an ADC map, from its median over the brain foreground.

    Returns one of the keys of :data:`ADC_UNIT_TO_CANONICAL`.

    Raises:
        BadInputError: the median fits no unit (the message gives the measured median).
    """
    median = brain_median(np.asarray(adc.array, dtype=np.float64), foreground)
    refuse_missing_brain_values(median, source)
    low, high = PLAUSIBLE_BRAIN_MEDIAN_ADC
    for unit, factor in ADC_UNIT_TO_CANONICAL.items():
        if low <= median * factor <= high:
            return unit
    raise BadInputError(
        source,
        f"ADC values fit no known unit: the median over brain voxels is {median:.6g}; expected "
        f"{low / 1000:g}–{high / 1000:g} (mm²/s), {low:g}–{high:g} (10⁻³ mm²/s) or "
        f"{low * 1000:g}–{high * 1000:g} (10⁻⁶ mm²/s)",
    )


def adc_to_canonical(adc: Volume, unit: str, foreground: np.ndarray, source: str | Path) -> Volume:
    """ADC converted to 10⁻³ mm²/s (float32), after checking it is plausible in ``unit``.

    Raises:
        BadInputError: unknown unit; a stated unit that disagrees with the data; too many
            negative values in the brain.
    """
    if unit not in ADC_UNIT_TO_CANONICAL:
        raise BadInputError(source, f"unknown ADC unit {unit!r}; use 'auto' or one of {sorted(ADC_UNIT_TO_CANONICAL)}")
    converted = np.asarray(adc.array, dtype=np.float64) * ADC_UNIT_TO_CANONICAL[unit]
    in_brain = converted[foreground]
    negative_fraction = float(np.mean(in_brain < 0)) if in_brain.size else 0.0
    if negative_fraction > MAX_NEGATIVE_FRACTION:
        raise BadInputError(
            source,
            f"negative ADC in {100 * negative_fraction:.1f} % of brain voxels (minimum {float(in_brain.min()):.4g} "
            "×10⁻³ mm²/s); ADC cannot be negative (wrong sign, wrong image or integer overflow?)",
        )
    median = brain_median(converted, foreground)
    refuse_missing_brain_values(median, source)
    low, high = PLAUSIBLE_BRAIN_MEDIAN_ADC
    if not low <= median <= high:
        raise BadInputError(
            source,
            f"ADC stated as {unit} gives a brain median of {median:.4g} ×10⁻³ mm²/s, outside the plausible "
            f"{low:g}–{high:g}; check the unit (or use adc_unit='auto')",
        )
    nonzero_in_brain = in_brain[in_brain != 0]
    if median < EADC_LIKE_MAX_MEDIAN and float(np.percentile(nonzero_in_brain, 99)) <= EADC_LIKE_MAX_P99:
        raise BadInputError(
            source,
            f"values look like an eADC, not an ADC: brain median {median:.3g} and 99 % of brain voxels ≤ "
            f"{EADC_LIKE_MAX_P99:g} (no CSF-like values near 3 ×10⁻³ mm²/s); give it as eADC (eadc= / --eadc)",
        )
    return adc.with_array(converted.astype(np.float32))


def check_eadc(eadc: Volume, foreground: np.ndarray, source: str | Path) -> Volume:
    """An eADC map (S_b/S_0, unitless, 0–1) as float32, after checking it looks like one.

    Raises:
        BadInputError: negative values, or values above 1 in many brain voxels (an ADC map?).
    """
    values = np.asarray(eadc.array, dtype=np.float64)
    in_brain = values[foreground]
    if in_brain.size and float(np.mean(in_brain < 0)) > MAX_NEGATIVE_FRACTION:
        raise BadInputError(source, f"negative eADC values (minimum {float(in_brain.min()):.4g}); eADC = S_b/S_0 lies in 0–1")
    above_one = float(np.mean(in_brain > 1.05)) if in_brain.size else 0.0
    if above_one > MAX_EADC_ABOVE_ONE_FRACTION:
        raise BadInputError(
            source,
            f"eADC above 1 in {100 * above_one:.0f} % of brain voxels (median {brain_median(values, foreground):.4g}); "
            "eADC = S_b/S_0 lies in 0–1 — is this an ADC map or a rescaled eADC?",
        )
    return eadc.with_array(values.astype(np.float32))


#: Largest ADC the library produces (10⁻³ mm²/s), for voxels with b0 signal but (almost)
#: no b1000 signal: "at least as free as water" (free water at 37 °C: ≈ 3).
ADC_CEILING = 5.0


def eadc_from_adc(adc: Volume, b_value: float) -> Volume:
    """eADC = exp(−b·ADC) from an ADC in 10⁻³ mm²/s (b in s/mm²), clipped to ≤ 1.

    Applied everywhere, background included: a masked ADC of 0 gives eADC 1, as in the
    paper's eADC maps and in :mod:`LambdaSegmentLib.synthesis` (the model must see the
    same background in training and use).
    """
    adc_mm2_per_s = np.asarray(adc.array, dtype=np.float64) / 1000.0
    eadc = np.minimum(np.exp(-b_value * adc_mm2_per_s), 1.0)
    return adc.with_array(eadc.astype(np.float32))


def adc_from_eadc(eadc: Volume, b_value: float) -> Volume:
    """ADC = −ln(eADC)/b in 10⁻³ mm²/s, within 0–:data:`ADC_CEILING`.

    eADC exactly 0 is "no data" (a masked map) and gives ADC 0; eADC ≥ 1 gives 0.
    """
    values = np.asarray(eadc.array, dtype=np.float64)
    adc = np.zeros_like(values)
    valid = (values > 0) & (values < 1)
    adc[valid] = np.minimum(-np.log(values[valid]) / b_value * 1000.0, ADC_CEILING)
    return eadc.with_array(adc.astype(np.float32))


def adc_and_eadc_from_b0_b1000(b0: Volume, b1000: Volume, b_value: float) -> tuple[Volume, Volume]:
    """ADC (10⁻³ mm²/s) and eADC from a b0 and a b≈1000 image on the same grid.

    ADC = ln(S_0/S_b)/b where both signals are positive, within 0–:data:`ADC_CEILING`
    (noise can make S_b > S_0: ADC 0). S_0 ≤ 0 (no signal) gives ADC 0; S_0 > 0 with
    S_b ≤ 0 gives :data:`ADC_CEILING`. eADC = exp(−b·ADC) (= S_b/S_0 where unclipped).
    """
    s0 = np.asarray(b0.array, dtype=np.float64)
    sb = np.asarray(b1000.array, dtype=np.float64)
    adc = np.zeros_like(s0)
    both = (s0 > 0) & (sb > 0)
    adc[both] = np.clip(np.log(s0[both] / sb[both]) / b_value * 1000.0, 0.0, ADC_CEILING)
    adc[(s0 > 0) & (sb <= 0)] = ADC_CEILING
    adc_volume = b1000.with_array(adc.astype(np.float32))
    return adc_volume, eadc_from_adc(adc_volume, b_value)
