"""Infarct shapes on the template: territorial lesions, lacunes and embolic showers.

A lesion is a set of template voxels inside brain tissue (GM + WM) of one arterial
territory (several for a shower), grown from a seed by ranking a score that mixes the
distance to the seed, smooth noise (irregular borders) and a grey-matter preference
(lesions that follow the gyri). Its volume is chosen up front and met by taking the top
voxels of the score, so the shape is irregular but the volume is exact on the template.

A ``surface_pull`` > 0 adds a preference for tissue near the brain's surface (:func:`shallowness`)
to the score of territorial lesions and to the seed weights of an embolic shower's blobs. It
reads no random number, so at any value every other draw stays as at 0. Issue 13's rule 116
measured it (``benchmarks/lesion_edge_depth.py``) and left it off: it moves lesions into the
4-10 mm below a skull-stripped edge, not into the 2-4 mm that real lesions fill and the
generator's do not, because under the default mask rim that band is CSF (rule 117).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import functools

import numpy as np
from scipy import ndimage

from .fields import CroppedField, smooth_noise
from .template import LACUNAR_TERRITORIES, MAJOR_TERRITORY, load_head_distance

LESION_KINDS = ("territorial", "lacunar", "embolic")
# Typical (median) total volume in mL of each kind; spread is log-normal around it.
# "lesymap" (real shapes, lesymap.py) is a shape source for territorial-sized lesions:
# acute sizes are often well under 10 mL, so its median is lower than the chronic masks'.
MEDIAN_VOLUME_ML = {"territorial": 25.0, "lacunar": 0.4, "embolic": 4.0, "lesymap": 8.0}
LOG_SPREAD = {"territorial": 1.3, "lacunar": 0.9, "embolic": 1.0, "lesymap": 1.4}
KIND_LIMITS_ML = {"territorial": (0.5, 300.0), "lacunar": (0.01, 2.0), "embolic": (0.05, 60.0), "lesymap": (0.2, 300.0)}
#: A whole-territory infarct's volume on the template (mL): every level-1 territory of one major
#: artery on one side (``draw_lesion(..., whole_territory=True)``).
WHOLE_TERRITORY_ML = (100.0, 300.0)
#: :func:`shallowness` falls linearly from 1 at the brain's surface to 0 at this depth (mm).
SURFACE_REACH_MM = 10.0


@dataclass
class LesionPlan:
    """What was drawn for one study's infarct (recorded in ``SyntheticStudy.params``)."""

    kind: str
    volume_ml: float
    territories: list[int] = field(default_factory=list)
    components: int = 1


def sample_volume_ml(rng: np.random.Generator, kind: str, volume_range_ml: tuple[float, float]) -> float:
    """Log-normal total lesion volume (mL) for ``kind``, truncated to the requested range."""
    lo, hi = volume_range_ml
    kind_lo, kind_hi = KIND_LIMITS_ML[kind]
    lo, hi = max(lo, kind_lo), min(hi, kind_hi)
    if lo > hi:  # the requested range lies outside this kind's usual sizes: honour the request
        lo, hi = volume_range_ml
    for _ in range(64):
        volume = float(np.exp(rng.normal(np.log(MEDIAN_VOLUME_ML[kind]), LOG_SPREAD[kind])))
        if lo <= volume <= hi:
            return volume
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def sample_whole_territory_ml(rng: np.random.Generator, volume_range_ml: tuple[float, float]) -> float:
    """Log-uniform whole-territory volume (mL), :data:`WHOLE_TERRITORY_ML` within the requested range
    (its lower end where the range lies below it)."""
    lo, hi = volume_range_ml
    low, high = max(lo, WHOLE_TERRITORY_ML[0]), min(hi, WHOLE_TERRITORY_ML[1])
    return float(np.exp(rng.uniform(np.log(low), np.log(max(high, low)))))


def choose_kind(rng: np.random.Generator, volume_range_ml: tuple[float, float]) -> str:
    """A lesion kind whose usual volumes overlap the requested range."""
    weights = {"territorial": 0.4, "lacunar": 0.2, "embolic": 0.4}
    lo, hi = volume_range_ml
    usable = {k: w for k, w in weights.items() if KIND_LIMITS_ML[k][0] <= hi and KIND_LIMITS_ML[k][1] >= lo}
    usable = usable or weights
    kinds = list(usable)
    probabilities = np.asarray([usable[k] for k in kinds])
    return str(rng.choice(kinds, p=probabilities / probabilities.sum()))


def _territory_choice(rng: np.random.Generator, labels: np.ndarray) -> int:
    # MCA strokes dominate clinically; weight territories by that.
    weights = np.asarray([3.0 if MAJOR_TERRITORY[int(l)] == "MCA" else 1.0 for l in labels])
    return int(rng.choice(labels, p=weights / weights.sum()))


@functools.cache
def shallowness() -> np.ndarray:
    """(x, y, z) on the 1 mm template grid: 1 at the brain's outer surface (brain and its CSF,
    :func:`.template.load_head_distance`), falling linearly to 0 at :data:`SURFACE_REACH_MM` deep
    and beyond, 0 outside."""
    depth = -load_head_distance()  # mm below the surface, < 0 outside
    near = np.where(depth >= 0.0, np.clip(1.0 - depth / SURFACE_REACH_MM, 0.0, 1.0), 0.0).astype(np.float32)
    near.setflags(write=False)
    return near


def _crop_box(mask: np.ndarray, margin: int) -> tuple[slice, slice, slice]:
    nonzero = np.nonzero(mask)
    return tuple(
        slice(max(0, int(ax.min()) - margin), min(n, int(ax.max()) + margin + 1))
        for ax, n in zip(nonzero, mask.shape)
    )


def _grow(
    rng: np.random.Generator,
    allowed: np.ndarray,
    gm: np.ndarray,
    seed: np.ndarray,
    n_voxels: int,
    irregularity: float,
    gm_preference: float,
    noise_sigma: float,
    elongation: np.ndarray,
    surface: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Boolean region of ``n_voxels`` voxels of ``allowed`` around ``seed`` (indices of the crop).

    ``surface``: added to every voxel's score (a scalar, or an array of the crop's shape), e.g. a
    pull towards the brain's surface; the score's other terms are about -1 at the region's edge.
    """
    grid = np.indices(allowed.shape, dtype=np.float32)
    offset = (grid - seed[:, None, None, None]) * elongation[:, None, None, None]
    radius = (3.0 * n_voxels / (4.0 * np.pi)) ** (1.0 / 3.0) + 0.5
    distance = np.sqrt((offset**2).sum(axis=0)) / radius
    score = -distance + irregularity * smooth_noise(rng, allowed.shape, noise_sigma) + gm_preference * gm + surface
    score = np.where(allowed, score, -np.inf)
    n_voxels = int(min(n_voxels, allowed.sum()))
    if n_voxels <= 0:
        return np.zeros(allowed.shape, dtype=bool)
    threshold = np.partition(score.ravel(), -n_voxels)[-n_voxels]
    region = score >= threshold
    return region & allowed


def draw_lesion(
    rng: np.random.Generator,
    kind: str,
    volume_ml: float,
    gm: np.ndarray,
    wm: np.ndarray,
    territories: np.ndarray,
    whole_territory: bool = False,
    surface_pull: float = 0.0,
) -> tuple[CroppedField, LesionPlan]:
    """The infarct of one study as a lesion-fraction field on the 1 mm template grid.

    Args:
        gm, wm: template tissue fractions (x, y, z), 1 mm.
        territories: JHU labels on the same grid.
        whole_territory: (territorial only) grow in every level-1 territory of the drawn
            one's major artery and hemisphere, for whole-territory (100-300 mL) infarcts.
        surface_pull: (territorial and embolic, not whole-territory) weight of :func:`shallowness`
            in a territorial lesion's score and in a shower's seed weights (1 + pull x
            shallowness); 0 leaves them as before. Reads no random number.
    Returns:
        A cropped field in [0, 1] (1 = infarcted tissue) and what was drawn.
    """
    tissue = (gm + wm) > 0.5
    labels = np.asarray([l for l in range(1, 31) if l in MAJOR_TERRITORY])
    plan = LesionPlan(kind=kind, volume_ml=volume_ml)
    if kind == "lacunar":
        label = int(rng.choice(np.asarray(LACUNAR_TERRITORIES)))
        plan.territories = [label]
        region_mask = (territories == label) & tissue
        box = _crop_box(region_mask, 4)
        allowed = region_mask[box]
        seeds = np.argwhere(allowed & (wm[box] > 0.3))
        seeds = seeds if len(seeds) else np.argwhere(allowed)
        seed = seeds[rng.integers(len(seeds))].astype(np.float32)
        lesion = _grow(rng, allowed, gm[box], seed, round(volume_ml * 1000), 0.15, 0.0, 1.5,
                       rng.uniform(0.7, 1.3, 3).astype(np.float32))
    elif kind == "territorial":
        label = _territory_choice(rng, labels)
        plan.territories = [label]
        if whole_territory:
            plan.territories = [int(l) for l in labels if l % 2 == label % 2 and MAJOR_TERRITORY[int(l)] == MAJOR_TERRITORY[label]]
        region_mask = np.isin(territories, plan.territories) & tissue
        box = _crop_box(region_mask, 4)
        allowed = region_mask[box]
        seeds = np.argwhere(allowed)
        seed = seeds[rng.integers(len(seeds))].astype(np.float32)
        pull = surface_pull * shallowness()[box] if surface_pull and not whole_territory else 0.0
        lesion = _grow(rng, allowed, gm[box], seed, round(volume_ml * 1000), rng.uniform(0.2, 0.6),
                       rng.uniform(-0.2, 0.8), rng.uniform(2.0, 5.0), rng.uniform(0.7, 1.3, 3).astype(np.float32), pull)
    elif kind == "embolic":
        first = _territory_choice(rng, labels)
        hemisphere = first % 2  # odd labels left, even right
        major = MAJOR_TERRITORY[first]
        same_side = [int(l) for l in labels if l % 2 == hemisphere and l != first]
        siblings = [l for l in same_side if MAJOR_TERRITORY[l] == major]
        others = [l for l in same_side if MAJOR_TERRITORY[l] != major]
        n_extra = int(rng.integers(0, 3))
        # showers usually stay within one major territory (its branches), sometimes cross
        pool = siblings if (siblings and rng.random() < 0.8) else others
        extra = list(rng.choice(pool, size=min(n_extra, len(pool)), replace=False)) if pool and n_extra else []
        plan.territories = [first] + [int(l) for l in extra]
        region_mask = np.isin(territories, plan.territories) & tissue
        plan.components = int(rng.integers(5, 60))
        if surface_pull:
            # the pulled blobs grow noise over boxes that depend on where they land, so they are
            # drawn from a replay of this generator while the generator itself advances as the
            # unpulled shower would advance it: every later draw of the study stays as at 0
            replay = np.random.Generator(type(rng.bit_generator)())
            replay.bit_generator.state = rng.bit_generator.state
            scatter_blobs(rng, region_mask, gm, plan.components, volume_ml, gm_preference=0.6)
            shower = scatter_blobs(replay, region_mask, gm, plan.components, volume_ml, gm_preference=0.6,
                                   surface_pull=surface_pull)
        else:
            shower = scatter_blobs(rng, region_mask, gm, plan.components, volume_ml, gm_preference=0.6)
        plan.volume_ml = float((shower.values >= 0.5).sum()) / 1000.0
        return shower, plan
    else:
        raise ValueError(f"unknown lesion kind {kind!r}; expected one of {LESION_KINDS}")
    # soft edge (sub-millimetre partial volume) that keeps the 0.5 level where the voxels are
    values = ndimage.gaussian_filter(lesion.astype(np.float32), 0.6)
    start = tuple(int(s.start) for s in box)
    plan.volume_ml = float(lesion.sum()) / 1000.0
    return CroppedField(values=values, start=start, stride=1), plan


def scatter_blobs(
    rng: np.random.Generator,
    region_mask: np.ndarray,
    gm: np.ndarray,
    n_blobs: int,
    volume_ml: float,
    gm_preference: float,
    surface_pull: float = 0.0,
) -> CroppedField:
    """``n_blobs`` small irregular blobs inside ``region_mask`` (template 1 mm) totalling about ``volume_ml``.

    Blob volumes are log-normal shares of the total; seeds are weighted towards grey
    matter by ``gm_preference`` (0: anywhere in the region) and, by ``1 + surface_pull x``
    :func:`shallowness`, towards the brain's surface (0: as before; the same random draws).
    """
    box = _crop_box(region_mask, 4)
    allowed = region_mask[box]
    gm_box = gm[box]
    shares = np.exp(rng.normal(0.0, 1.0, n_blobs))
    blob_voxels = np.maximum(1, np.round(shares / shares.sum() * volume_ml * 1000)).astype(int)
    candidates = np.argwhere(allowed)
    weights = gm_preference * gm_box[allowed] + 0.2
    if surface_pull:
        weights = weights * (1.0 + surface_pull * shallowness()[box][allowed])
    picks = rng.choice(len(candidates), size=n_blobs, p=weights / weights.sum())
    blobs = np.zeros(allowed.shape, dtype=bool)
    for voxels, pick in zip(blob_voxels, picks):
        seed = candidates[pick]
        reach = int(np.ceil((3 * voxels / (4 * np.pi)) ** (1 / 3))) + 4
        sub = tuple(slice(max(0, s - reach), min(n, s + reach + 1)) for s, n in zip(seed, allowed.shape))
        local_seed = (seed - np.asarray([s.start for s in sub])).astype(np.float32)
        blobs[sub] |= _grow(rng, allowed[sub] & ~blobs[sub], gm_box[sub], local_seed, int(voxels), 0.25,
                            0.2 * gm_preference, 1.0, rng.uniform(0.7, 1.3, 3).astype(np.float32))
    values = ndimage.gaussian_filter(blobs.astype(np.float32), 0.6)
    return CroppedField(values=values, start=tuple(int(s.start) for s in box), stride=1)
