"""How an acute infarct changes the diffusion signals, given where it is.

Expert masks cover the whole DWI-hyperintense region, not only the restricted core: in
real data masked voxels have a median ADC of about 0.82×10⁻³ mm²/s (IQR 0.65-1.11) against
a brain median near 1.05-1.10. So the core's ADC drop grades outwards to near-normal
values at the edge while S0 rises (vasogenic oedema, T2 shine-through), which keeps the
edge bright on DWI = S0 · exp(−b · ADC).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from .fields import smooth_noise


def lesion_signal(
    rng: np.random.Generator,
    lesion_fraction: np.ndarray,
    spacing_mm: tuple[float, float, float],
    *,
    core_relative_adc: tuple[float, float] = (0.45, 0.8),
    edge_relative_adc: tuple[float, float] = (0.8, 1.0),
    t2_gain: tuple[float, float] = (0.1, 0.7),
    grading_mm: tuple[float, float] = (2.0, 8.0),
    heterogeneity: tuple[float, float] = (0.05, 0.25),
) -> tuple[np.ndarray, np.ndarray]:
    """Per-voxel factors on the normal tissue's ADC and S0 inside a lesion.

    Args:
        rng: the study's generator.
        lesion_fraction: float (nk, nj, ni) in [0, 1], the infarcted fraction of each voxel.
        spacing_mm: voxel spacing (i, j, k) in mm.
        core_relative_adc, edge_relative_adc: ranges of lesion ADC / normal ADC at depth and at the edge.
        t2_gain: range of the relative S0 rise of the whole lesion.
        grading_mm: range of the depth (mm) over which the ADC grades from edge to core.
        heterogeneity: range of the relative amplitude of smooth texture on the ADC drop.

    Returns:
        (adc_factor, s0_factor): float32 arrays shaped like ``lesion_fraction``; 1 outside it.
    """
    fraction = np.clip(np.asarray(lesion_fraction, dtype=np.float32), 0.0, 1.0)
    core, edge = rng.uniform(*core_relative_adc), rng.uniform(*edge_relative_adc)
    edge = max(edge, core)
    gain, grading = rng.uniform(*t2_gain), rng.uniform(*grading_mm)
    texture = 1.0 + rng.uniform(*heterogeneity) * smooth_noise(rng, fraction.shape, 1.0)
    depth = ndimage.distance_transform_edt(fraction >= 0.5, sampling=tuple(spacing_mm[::-1]))
    grade = np.clip(depth / grading, 0.0, 1.0)  # 0 at the edge, 1 at the core
    relative = edge + (core - edge) * grade
    drop = np.clip((1.0 - relative) * texture, 0.0, 0.9)
    adc_factor = 1.0 - fraction * drop
    s0_factor = 1.0 + fraction * gain * np.clip(texture, 0.5, 1.5)
    return adc_factor.astype(np.float32), s0_factor.astype(np.float32)
