"""From a probability map to the final infarct mask: threshold, then per-lesion checks.

Every step is a setting of the model package (``manifest["postprocessing"]``), so the CLI,
``segment-dir``, ``evaluate`` and the Slicer module apply exactly the same rule. The candidate
lesions are the 26-connected components of ``probability >= threshold`` inside the brain, or,
with ``grow_threshold``, of ``probability >= grow_threshold`` that reach ``threshold``
somewhere (hysteresis: a lesion is detected at the threshold and drawn out to where the
probability falls below the lower one, so a detected lesion keeps its fainter rim while no
new faint component appears). Steps, in order, on those components:

1. ``min_lesion_ml``: components smaller than this are dropped.
2. ``min_edge_depth_mm``: components whose median depth below the brain mask's edge is
   under this are dropped (the bright partial-volume and susceptibility rims of real
   DWI lie at the edge; an infarct lies in tissue). With ``edge_keep_ratio``, a shallow
   component whose mean DWI is at least that many times its registered mirror's (the ratio of
   step 3) is kept anyway: the rims are bilateral, while a cortical infarct or embolus at the
   edge stands out against the other hemisphere (issue 13's rule 93). With ``edge_max_height``
   the check holds only for components whose median voxel lies at most that far up the brain
   (:func:`height_fraction`: 0 at the brain mask's lowest point along the patient's
   inferior-superior axis, 1 at its highest): the susceptibility pile-ups and partial-volume
   rims of real skull-stripped DWI sit at the skull base (inferior cerebellum, temporal poles,
   orbitofrontal cortex), beside the air and bone of the sinuses and mastoids, while an embolus
   in the cortex of the convexity is as near the edge and has no such artefact to be mistaken
   for (issue 13's rule 145).
3. ``contralateral_ratio``: a component is kept only if its mean DWI is at least this many
   times the mean of the registered contralateral DWI on the same voxels
   (:mod:`LambdaSegmentLib.preprocessing.symmetry`); acute infarcts are one-sided, the rims are bilateral.
   With ``contralateral_search_mm``, the contralateral value of a voxel is the brightest one
   within that in-plane radius of its mirror partner (``symmetry.contralateral_search``): a
   bilateral rim that is not an exact mirror image still finds its bright partner.
4. ``bilateral_partner_mm``: a component is dropped when its registered mirror region, grown
   in-plane by this radius, holds another candidate component (:func:`bilateral_partners`): the
   model itself marks both sides, and acute infarcts are one-sided while the rims and the
   grey matter at the skull base are not. Unlike the contralateral ratio it reads no
   brightness, so a faint one-sided embolus whose mirror is nearly as bright is not dropped;
   a lesion whose own mirror image overlaps itself (one crossing the midline) is not its own
   partner. Bilateral lesions are dropped, as by the ratio. With ``bilateral_partner_fraction``
   only a partner of comparable size counts: one holding at least that share of the
   component's voxels. A whole-territory infarct's mirror region is large, and a speck of the
   model's in it would otherwise make the infarct one of a "pair" (issue 13's rule 83); the
   speck itself, whose partner is the infarct, is still dropped. With
   ``bilateral_partner_total`` the partners count together: the share is the summed voxels of
   every partner, not the largest one's. The model often marks one side's rim as one component
   and the other side's as several smaller pieces; counted one at a time, no piece reaches half
   of the whole and the larger mark stays (issue 13's rule 128).
5. ``max_relative_adc``: a component is kept only if its median ADC is at most this many
   times the brain's median ADC (:func:`relative_adc`). Acute ischaemia restricts diffusion;
   a bright DWI spot whose ADC is as high as the brain's is T2 shine-through or an EPI
   pile-up at the skull base, which radiologists rule out on the ADC map the same way.

With ``satellite_mm``, a component that fails only the edge check (2) or the contralateral
check (3), and passes every other, is kept anyway when one of its voxels lies within that many
mm (3D, on the voxel grid's own spacing) of a lesion that passes every check (an anchor; the
anchors are those of the checks alone, so one exemption never anchors another). Stroke lesions
cluster: the satellites of a territorial infarct and the specks of an embolic shower lie beside
the larger lesion, often in the cortex near the brain's edge or nearly as bright as their
mirror, while the rims these two checks are for lie at the brain's edge away from any lesion
(issue 13's rule 132). The bilateral, size and ADC checks still hold for an exempted component.
With ``satellite_edge_only`` only the edge check is lifted: a satellite must still pass the
contralateral ratio, so the exemption cannot stand in for a stricter ratio elsewhere (rule 134).

6. ``margin_dwi_ratio``: after the checks, the tissue within :data:`MARGIN_REACH_MM` of a kept
   lesion, inside the brain, whose DWI is at least this many times the brain's median DWI joins
   the lesion (:func:`with_margin`). Experts draw a lesion out to where its DWI fades to nearly
   the brain's; the network stops about one voxel earlier, where the tissue is still bright but
   its ADC nearly normal, on synthetic lesions as on real ones (issue 13's rule 109). The step
   only widens lesions already kept, so it can neither find a new lesion nor bring back a
   dropped one. With ``margin_lesion_fraction`` c, each lesion's cut-off is instead
   max(``margin_dwi_ratio``, 1 + c (L - 1)), L its median DWI over the brain's median: a voxel
   holding a share f of a lesion of DWI L in tissue near the brain's median has a DWI of about
   1 + f (L - 1), so c is the smallest share of the lesion joined (what the generator's
   ``label_fraction`` means for a synthetic label), and a faint embolus gets a lower cut-off than
   a bright territorial infarct (issue 13's rule 110). With ``margin_mirror_ratio``, a voxel
   joins only where its smoothed DWI is at least that many times its registered mirror's (the
   contralateral check's images): an infarct's margin is one-sided, while the skull-base
   susceptibility patches a kept mark may sit in are bilateral in kind (issue 13's rule 111).
   With ``margin_capped``, a voxel joins only where its DWI ratio is at most the median L of a
   lesion it is near: a margin lies between a lesion and normal tissue, so it is dimmer than the
   lesion, and a patch brighter than the mark it surrounds is not that mark's margin (rule 137;
   not in any package: the temporal-base patches it was for proved dimmer than their marks).

A package with a ``seed_network`` (``package.py``) first keeps only the components its seed
network detects (:func:`keep_seeded_components`); the steps above then run on what is left.

A setting of ``None`` (or 0 for the sizes) turns its step off; a package without a
``postprocessing`` block gets the threshold alone, as before. ``test_time_flips`` turns the
engine's flip averaging on by default (``engine.tta_flips``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

import numpy as np
from scipy import ndimage

from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.io.units import brain_median

CONNECTIVITY_26 = np.ones((3, 3, 3), dtype=bool)
# How far the margin step reaches from a kept lesion: every neighbour of a voxel on a 2 mm grid
# (a diagonal is 3.46 mm), never a neighbouring slice of a 4-6 mm stack.
MARGIN_REACH_MM = 3.5


@dataclass(frozen=True)
class PostProcessing:
    """The package's rule from probability to mask (see the module docstring).

    Attributes:
        threshold: probability at or above which a voxel is a lesion candidate.
        min_lesion_ml: smallest kept component, mL (0 = keep all).
        min_edge_depth_mm: smallest kept median depth below the brain edge, mm (None = off).
        edge_keep_ratio: a component shallower than ``min_edge_depth_mm`` is kept when its mean
            DWI / mean contralateral DWI is at least this (None = every shallow one dropped).
        edge_max_height: the edge check drops only components whose median height in the brain
            (:func:`height_fraction`, 0 = lowest, 1 = highest) is at most this (None = at every height).
        contralateral_ratio: smallest kept mean DWI / mean contralateral DWI (None = off).
        contralateral_search_mm: in-plane radius (mm) within which the contralateral check
            takes the brightest mirror value (0 = the mirror partner itself).
        test_time_flips: average the probability over the engine's test-time flips by default.
        grow_threshold: the hysteresis' lower probability, below ``threshold`` (None = off).
        max_relative_adc: largest kept median ADC of a component / the brain's median ADC
            (None = off).
        bilateral_partner_mm: in-plane radius (mm) around a component within which its
            registered mirror image is searched for another candidate component; one found drops
            it (None = off).
        bilateral_partner_fraction: the smallest partner that counts for the bilateral check, as
            a share of the component's own voxels (0 = any partner; 0.5 = at least half its size).
        bilateral_partner_total: the bilateral check's share counts every partner's voxels
            together instead of the largest partner's alone.
        margin_dwi_ratio: the smallest DWI / the brain's median DWI of the tissue within
            :data:`MARGIN_REACH_MM` of a kept lesion that joins it (None = off).
        margin_lesion_fraction: with the margin step, the smallest share of a lesion's own excess
            DWI (over the brain's median) that joins it; ``margin_dwi_ratio`` stays the floor
            (None = the floor alone).
        margin_mirror_ratio: with the margin step, the smallest smoothed DWI / registered mirror
            DWI of a voxel that joins (None = no mirror check).
        margin_capped: with the margin step, a voxel joins only where its DWI / the brain's
            median is at most the median of a lesion it is near (False = no cap).
        satellite_mm: a component dropped by the edge or contralateral check alone is kept when it
            lies within this distance (mm) of a component that passes every check (None = off).
        satellite_edge_only: the exemption lifts the edge check alone, not the contralateral one.
    """

    threshold: float = 0.5
    min_lesion_ml: float = 0.0
    min_edge_depth_mm: float | None = None
    edge_keep_ratio: float | None = None
    edge_max_height: float | None = None
    contralateral_ratio: float | None = None
    contralateral_search_mm: float = 0.0
    test_time_flips: bool = False
    grow_threshold: float | None = None
    max_relative_adc: float | None = None
    bilateral_partner_mm: float | None = None
    bilateral_partner_fraction: float = 0.0
    bilateral_partner_total: bool = False
    margin_dwi_ratio: float | None = None
    margin_lesion_fraction: float | None = None
    margin_mirror_ratio: float | None = None
    margin_capped: bool = False
    satellite_mm: float | None = None
    satellite_edge_only: bool = False

    def __post_init__(self) -> None:
        if self.bilateral_partner_mm is not None and not self.bilateral_partner_mm >= 0.0:
            raise ValueError(f"bilateral_partner_mm must be a radius >= 0 in mm, not {self.bilateral_partner_mm}")
        if not (np.isfinite(self.bilateral_partner_fraction) and self.bilateral_partner_fraction >= 0.0):
            raise ValueError("bilateral_partner_fraction must be a finite share >= 0 of a component's voxels, "
                             f"not {self.bilateral_partner_fraction}")
        if self.bilateral_partner_fraction > 0.0 and self.bilateral_partner_mm is None:
            raise ValueError("bilateral_partner_fraction is set but the bilateral check is off: give bilateral_partner_mm too")
        if not isinstance(self.bilateral_partner_total, bool):
            raise ValueError(f"bilateral_partner_total must be true or false, not {self.bilateral_partner_total!r}")
        if self.bilateral_partner_total and self.bilateral_partner_mm is None:
            raise ValueError("bilateral_partner_total is set but the bilateral check is off: give bilateral_partner_mm too")
        check_ratio_of_step("edge_keep_ratio", self.edge_keep_ratio, "edge check", "min_edge_depth_mm", self.min_edge_depth_mm)
        if self.edge_max_height is not None:
            if not (np.isfinite(self.edge_max_height) and 0.0 < self.edge_max_height <= 1.0):
                raise ValueError(f"edge_max_height must be a height in (0, 1] of the brain's extent, not {self.edge_max_height}")
            if self.min_edge_depth_mm is None:
                raise ValueError("edge_max_height is set but the edge check is off: give min_edge_depth_mm too")
        if self.grow_threshold is not None and not 0.0 < self.grow_threshold < self.threshold:
            raise ValueError(f"grow_threshold must lie between 0 and the threshold {self.threshold}, not {self.grow_threshold}")
        if self.margin_dwi_ratio is not None and not (np.isfinite(self.margin_dwi_ratio) and self.margin_dwi_ratio > 0.0):
            raise ValueError(f"margin_dwi_ratio must be a positive DWI ratio, not {self.margin_dwi_ratio}")
        if self.margin_lesion_fraction is not None:
            if not (np.isfinite(self.margin_lesion_fraction) and 0.0 < self.margin_lesion_fraction <= 1.0):
                raise ValueError(f"margin_lesion_fraction must be a share in (0, 1], not {self.margin_lesion_fraction}")
            if self.margin_dwi_ratio is None:
                raise ValueError("margin_lesion_fraction is set but the margin step is off: give margin_dwi_ratio too")
        check_ratio_of_step("margin_mirror_ratio", self.margin_mirror_ratio, "margin step", "margin_dwi_ratio",
                            self.margin_dwi_ratio)
        if not isinstance(self.margin_capped, bool):
            raise ValueError(f"margin_capped must be true or false, not {self.margin_capped!r}")
        if self.margin_capped and self.margin_dwi_ratio is None:
            raise ValueError("margin_capped is set but the margin step is off: give margin_dwi_ratio too")
        if self.max_relative_adc is not None and not self.max_relative_adc > 0.0:
            raise ValueError(f"max_relative_adc must be a positive ADC ratio, not {self.max_relative_adc}")
        if self.satellite_mm is not None:
            if not (np.isfinite(self.satellite_mm) and self.satellite_mm >= 0.0):
                raise ValueError(f"satellite_mm must be a distance >= 0 in mm, not {self.satellite_mm}")
            if self.min_edge_depth_mm is None and self.contralateral_ratio is None:
                raise ValueError("satellite_mm is set but neither the edge check nor the contralateral check is on: "
                                 "give min_edge_depth_mm or contralateral_ratio too")
        if not isinstance(self.satellite_edge_only, bool):
            raise ValueError(f"satellite_edge_only must be true or false, not {self.satellite_edge_only!r}")
        if self.satellite_edge_only and (self.satellite_mm is None or self.min_edge_depth_mm is None):
            raise ValueError("satellite_edge_only is set but the exemption or the edge check is off: "
                             "give satellite_mm and min_edge_depth_mm too")

    @property
    def candidate_threshold(self) -> float:
        """The lowest probability a voxel of a kept lesion may have (``grow_threshold`` or ``threshold``)."""
        return self.threshold if self.grow_threshold is None else self.grow_threshold

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> "PostProcessing":
        """The package's settings: the manifest's ``threshold`` and its ``postprocessing`` block."""
        block = dict(manifest.get("postprocessing") or {})
        if "threshold" in block:
            raise ValueError("postprocessing may not hold a threshold: the manifest's top-level threshold is the one")
        unknown = set(block) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown postprocessing setting(s) {sorted(unknown)}")
        return cls(threshold=float(manifest.get("threshold", 0.5)), **block)

    def manifest_entries(self) -> dict[str, Any]:
        """``{"threshold": ..., "postprocessing": {...}}`` to write into a manifest."""
        block = self.as_dict()
        return {"threshold": block.pop("threshold"), "postprocessing": block}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def needs_contralateral(self) -> bool:
        """Whether a step reads each component's DWI over its mirror's (the ratio or the edge's exception)."""
        return self.contralateral_ratio is not None or self.edge_keep_ratio is not None

    @property
    def needs_registration(self) -> bool:
        """Whether a step reads the study's registered mirror (the ratio, the bilateral pairs or the
        margin's mirror check)."""
        return self.needs_contralateral or self.bilateral_partner_mm is not None or self.margin_mirror_ratio is not None

    @property
    def needs_adc(self) -> bool:
        return self.max_relative_adc is not None


def check_ratio_of_step(name: str, value: float | None, step: str, switch_name: str, switch: float | None) -> None:
    """Refuse a DWI-ratio setting ``name`` that is not a positive finite number, or that is set
    while the step it refines (switched on by ``switch_name``) is off."""
    if value is None:
        return
    if not (np.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be a positive DWI ratio, not {value}")
    if switch is None:
        raise ValueError(f"{name} is set but the {step} is off: give {switch_name} too")


@dataclass(frozen=True)
class Components:
    """The candidate lesions of one thresholded map and what the checks look at.

    Attributes:
        labels: int32 (nk, nj, ni), 0 = background, 1..n the components.
        volume_ml: (n,) float64 component volumes.
        edge_depth_mm: (n,) median depth of each component below the brain edge.
        contralateral_ratio: (n,) mean DWI / mean contralateral DWI (nan when not computed).
        relative_adc: (n,) median ADC / the brain's median ADC (nan when not computed).
        bilateral: (n,) float, the largest mirror partner's voxels (or, when the third item is
            true, all partners' voxels together) as a share of the component's own (0 = no
            partner; :func:`bilateral_partners`), the radius they were sought within (mm), and
            whether the partners were counted together; None when not computed.
        spacing_mm: the grid's (i, j, k) voxel spacing, for ``satellite_mm``'s distances; None
            when not given.
        height: (n,) median :func:`height_fraction` of each component's voxels, for
            ``edge_max_height``; None when not computed.
    """

    labels: np.ndarray
    volume_ml: np.ndarray
    edge_depth_mm: np.ndarray
    contralateral_ratio: np.ndarray
    relative_adc: np.ndarray
    bilateral: tuple[np.ndarray, float, bool] | None = None
    spacing_mm: tuple[float, float, float] | None = None
    height: np.ndarray | None = None

    def keep(self, settings: PostProcessing) -> np.ndarray:
        """(n,) bool: which components pass every enabled check, and with ``satellite_mm`` the
        exempted satellites (module docstring)."""
        keep = self.volume_ml >= settings.min_lesion_ml
        deep = np.ones_like(keep)  # the edge check, which a satellite may fail
        bright = np.ones_like(keep)  # the contralateral check, which it may fail unless satellite_edge_only
        if settings.min_edge_depth_mm is not None:
            shallow = self.edge_depth_mm < settings.min_edge_depth_mm
            if settings.edge_keep_ratio is not None:
                if np.isnan(self.contralateral_ratio).any():
                    raise ValueError("edge_keep_ratio is set but the components were found without the contralateral DWI")
                shallow &= self.contralateral_ratio < settings.edge_keep_ratio
            if settings.edge_max_height is not None:
                if self.height is None:
                    raise ValueError("edge_max_height is set but the components were found without their heights")
                shallow &= self.height <= settings.edge_max_height
            deep &= ~shallow
        if settings.contralateral_ratio is not None:
            bright &= ~(self.contralateral_ratio < settings.contralateral_ratio)  # nan (not computed) keeps
        if settings.max_relative_adc is not None:
            if np.isnan(self.relative_adc).any():
                raise ValueError("max_relative_adc is set but the components were found without the ADC")
            keep &= self.relative_adc <= settings.max_relative_adc
        if settings.bilateral_partner_mm is not None:
            if self.bilateral is None or self.bilateral[1] != settings.bilateral_partner_mm:
                raise ValueError(f"bilateral_partner_mm is {settings.bilateral_partner_mm} but the components' partners "
                                 f"were sought {'not at all' if self.bilateral is None else f'within {self.bilateral[1]} mm'}")
            if self.bilateral[2] != settings.bilateral_partner_total:
                raise ValueError(f"bilateral_partner_total is {settings.bilateral_partner_total} but the components' "
                                 f"partners were counted {'together' if self.bilateral[2] else 'one at a time'}")
            share = self.bilateral[0]
            keep &= ~((share > 0.0) & (share >= settings.bilateral_partner_fraction))
        anchors = keep & deep & bright
        if settings.satellite_mm is None:
            return anchors
        if self.spacing_mm is None:
            raise ValueError("satellite_mm is set but the components were found without the grid's spacing")
        liftable = keep & bright if settings.satellite_edge_only else keep
        near = anchor_distance_mm(self.labels, anchors, self.spacing_mm) <= settings.satellite_mm
        return anchors | (liftable & near)

    def mask(self, settings: PostProcessing) -> np.ndarray:
        """uint8 (nk, nj, ni) final mask for ``settings`` (its threshold and grow threshold must be
        the ones these components came from)."""
        table = np.concatenate([[False], self.keep(settings)])
        return table[self.labels].astype(np.uint8)


def anchor_distance_mm(labels: np.ndarray, anchors: np.ndarray, spacing_mm: tuple[float, float, float]) -> np.ndarray:
    """(n,) float64: each component's smallest distance (mm, voxel centre to centre, 3D) to a
    voxel of an ``anchors`` component; 0 for an anchor itself, inf when there is no anchor.

    Args:
        labels: int (nk, nj, ni), 0 = background, 1..n the components.
        anchors: (n,) bool, which components are anchors.
        spacing_mm: (i, j, k) voxel spacing, as on a :class:`Volume`.

    The transform runs on the components' bounding box, which holds every anchor voxel, so the
    distances are those of the whole grid.
    """
    labels = np.asarray(labels)
    anchors = np.asarray(anchors, dtype=bool)
    distance = np.full(anchors.shape, np.inf)
    if not anchors.any():
        return distance
    box = ndimage.find_objects((labels > 0).astype(np.uint8))[0]
    local = labels[box]
    anchor_voxels = np.concatenate([[False], anchors])[local]
    to_anchor = ndimage.distance_transform_edt(~anchor_voxels, sampling=tuple(spacing_mm[::-1]))
    present = np.unique(local[local > 0])
    distance[present - 1] = np.asarray(ndimage.minimum(to_anchor, local, present), dtype=np.float64).reshape(-1)
    return distance


def edge_depth_mm(brain: np.ndarray, spacing_mm: tuple[float, float, float]) -> np.ndarray:
    """float32 (nk, nj, ni): distance (mm) from each brain voxel to the nearest non-brain voxel; 0 outside.

    ``spacing_mm`` is in (i, j, k) order, as on a :class:`Volume`. The volume's border
    counts as outside the brain (a brain cut by the field of view has an edge there too).

    The transform runs on the brain's bounding box with one non-brain voxel around it: the
    same distances, since for a voxel inside the box the nearest point of that ring is never
    further than any non-brain voxel beyond it (clamping a voxel's indices to the ring shortens
    each axis's distance). On a 24 × 256² study with a 2 mm brain this is several times faster
    than the whole grid.
    """
    brain = np.asarray(brain, dtype=bool)
    depth = np.zeros(brain.shape, dtype=np.float32)
    box = ndimage.find_objects(brain.astype(np.uint8))
    if not box:
        return depth
    padded = np.pad(brain[box[0]], 1)
    distance = ndimage.distance_transform_edt(padded, sampling=tuple(spacing_mm[::-1]))
    depth[box[0]] = distance[1:-1, 1:-1, 1:-1]
    return depth


def height_fraction(volume: Volume, brain: np.ndarray) -> np.ndarray:
    """float32 (nk, nj, ni): each voxel's height along the patient's inferior-superior axis (LPS z,
    mm), placed between the brain's lowest voxel (0) and its highest (1); outside that span the
    values run below 0 or above 1. Physical, so an axial, coronal, sagittal or oblique grid and
    either slice order read alike; a brain cut by the field of view spans what is in it.

    Args:
        volume: gives the grid's geometry (its array is not read).
        brain: bool (nk, nj, ni) on that grid.

    Raises:
        ValueError: the brain mask is empty.
    """
    brain = np.asarray(brain, dtype=bool)
    if not brain.any():
        raise ValueError("the brain mask is empty: no height within the brain")
    row = volume.ijk_to_lps_matrix()[2]  # z = row . (i, j, k, 1)
    nk, nj, ni = brain.shape
    z = (row[2] * np.arange(nk))[:, None, None] + (row[1] * np.arange(nj))[None, :, None] \
        + (row[0] * np.arange(ni))[None, None, :] + row[3]
    low, high = float(z[brain].min()), float(z[brain].max())
    return ((z - low) / max(high - low, 1e-6)).astype(np.float32)


def relative_adc(adc: np.ndarray, brain: np.ndarray) -> np.ndarray:
    """float32 (nk, nj, ni): ADC / the brain's median ADC (:func:`~LambdaSegmentLib.io.units.brain_median`:
    brain voxels with data, i.e. ADC ≠ 0). Unitless, so the check needs no ADC unit.

    Raises:
        ValueError: no brain voxel has an ADC (the study loader refuses such maps first).
    """
    return over_brain_median(adc, brain, "no ADC inside the brain mask: the ADC check has nothing to compare with")


def relative_dwi(dwi: np.ndarray, brain: np.ndarray) -> np.ndarray:
    """float32 (nk, nj, ni): DWI / the brain's median DWI (brain voxels with data).

    Raises:
        ValueError: no brain voxel has a DWI signal.
    """
    return over_brain_median(dwi, brain, "no DWI signal inside the brain mask: the margin step has nothing to compare with")


def over_brain_median(values: np.ndarray, brain: np.ndarray, empty_message: str) -> np.ndarray:
    """float32 (nk, nj, ni): ``values`` / their median over brain voxels with data
    (:func:`~LambdaSegmentLib.io.units.brain_median`); ``empty_message`` is the ValueError's when
    there is none."""
    values = np.asarray(values, dtype=np.float32)
    median = brain_median(values, np.asarray(brain, dtype=bool))
    if not median > 0:
        raise ValueError(empty_message)
    return values / np.float32(median)


def margin_footprint(spacing_mm: tuple[float, float, float], reach_mm: float = MARGIN_REACH_MM) -> np.ndarray:
    """bool (2nk+1, 2nj+1, 2ni+1): the voxel offsets no further than ``reach_mm`` from the centre.

    ``spacing_mm`` is in (i, j, k) order, as on a :class:`Volume`; an axis whose spacing exceeds
    the reach gets no neighbour along it, so a thick-slice stack is grown in-plane only.
    """
    spacing_kji = np.asarray(spacing_mm, dtype=np.float64)[::-1]
    reach = np.floor(reach_mm / spacing_kji).astype(int)
    grids = np.ogrid[tuple(slice(-r, r + 1) for r in reach)]
    return sum((g * s) ** 2 for g, s in zip(grids, spacing_kji)) <= reach_mm**2


def with_margin(mask: np.ndarray, dwi_ratio: np.ndarray, brain: np.ndarray, spacing_mm: tuple[float, float, float],
                ratio: float, lesion_fraction: float | None = None,
                mirror: tuple[np.ndarray, np.ndarray, float] | None = None, capped: bool = False) -> np.ndarray:
    """uint8 (nk, nj, ni): ``mask`` with the brain tissue within :data:`MARGIN_REACH_MM` of it
    whose ``dwi_ratio`` (:func:`relative_dwi`) is at least the cut-off added (one step, not repeated).

    Args:
        mask: the kept lesions, (nk, nj, ni).
        dwi_ratio: float (nk, nj, ni), the study's DWI / the brain's median DWI.
        brain: bool (nk, nj, ni); nothing outside it is added.
        spacing_mm: (i, j, k) voxel spacing.
        ratio: the smallest DWI ratio that joins (the cut-off, or its floor).
        lesion_fraction: c: each 26-connected lesion's cut-off is max(``ratio``, 1 + c (L - 1)), L
            its median ``dwi_ratio``; tissue near two lesions needs the higher cut-off. None: ``ratio``.
        mirror: (dwi_smoothed, contralateral, r), float (nk, nj, ni) twice
            (:meth:`~LambdaSegmentLib.preprocessing.symmetry.ContralateralRegistration.pair`) and the
            ratio: a voxel joins only where ``dwi_smoothed >= r * contralateral``. None: no check.
        capped: a voxel joins only where its ``dwi_ratio`` is at most L, the median of a lesion it
            is near (of several, the highest median).
    """
    mask = np.asarray(mask) != 0
    box = ndimage.find_objects(mask.astype(np.uint8))
    if not box:
        return mask.astype(np.uint8)
    footprint = margin_footprint(spacing_mm)
    pad = [n // 2 for n in footprint.shape]
    region = tuple(slice(max(b.start - p, 0), min(b.stop + p, n)) for b, p, n in zip(box[0], pad, mask.shape))
    near = ndimage.binary_dilation(mask[region], structure=footprint)
    local_ratio = np.asarray(dwi_ratio)[region]
    cutoff: np.ndarray | float = ratio
    joins = near & np.asarray(brain, dtype=bool)[region]
    if lesion_fraction is not None or capped:
        labels, count = ndimage.label(mask[region], structure=CONNECTIVITY_26)
        inside = labels[labels > 0]
        median = np.asarray(ndimage.median(local_ratio[labels > 0], inside, np.arange(1, count + 1)), dtype=np.float64).reshape(-1)
        if lesion_fraction is not None:
            per_lesion = np.concatenate([[0.0], np.maximum(ratio, 1.0 + lesion_fraction * (median - 1.0))])
            # each voxel near a lesion gets the highest cut-off of the lesions it is near
            cutoff = ndimage.grey_dilation(per_lesion[labels], footprint=footprint, mode="constant", cval=0.0)
        if capped:
            cap = ndimage.grey_dilation(np.concatenate([[0.0], median])[labels], footprint=footprint, mode="constant", cval=0.0)
            joins &= local_ratio <= cap
    joins &= local_ratio >= cutoff
    if mirror is not None:
        own, other, mirror_ratio = mirror
        joins &= np.asarray(own)[region] >= mirror_ratio * np.asarray(other)[region]
    grown = mask.copy()
    grown[region] |= joins
    return grown.astype(np.uint8)


def apply_margin(mask: np.ndarray, settings: PostProcessing, dwi_ratio: np.ndarray, brain: np.ndarray,
                 spacing_mm: tuple[float, float, float], pair: tuple[np.ndarray | None, np.ndarray | None]) -> np.ndarray:
    """``settings``' margin step on the kept lesions ``mask`` (unchanged when the step is off), as
    :func:`postprocess` and the post-processing search apply it.

    Args:
        dwi_ratio: :func:`relative_dwi` of the study.
        pair: (dwi_smoothed, contralateral) of the study's registered mirror
            (``ContralateralRegistration.pair``); read only with ``margin_mirror_ratio``.
    """
    if settings.margin_dwi_ratio is None:
        return mask
    mirror = None if settings.margin_mirror_ratio is None else (pair[0], pair[1], settings.margin_mirror_ratio)
    return with_margin(mask, dwi_ratio, brain, spacing_mm, settings.margin_dwi_ratio, settings.margin_lesion_fraction, mirror,
                       settings.margin_capped)


def candidates(probability: np.ndarray, threshold: float, brain: np.ndarray, grow_threshold: float | None = None) -> np.ndarray:
    """bool (nk, nj, ni): the voxels of the candidate lesions inside ``brain``: ``probability >=
    threshold``, or with ``grow_threshold`` every 26-connected component of ``probability >=
    grow_threshold`` that holds a voxel ``>= threshold`` (hysteresis)."""
    brain = np.asarray(brain, dtype=bool)
    probability = np.asarray(probability)
    core = (probability >= threshold) & brain
    if grow_threshold is None:
        return core
    return components_holding((probability >= grow_threshold) & brain, core)


def components_holding(candidate: np.ndarray, marker: np.ndarray) -> np.ndarray:
    """bool (nk, nj, ni): the 26-connected components of ``candidate`` that hold at least one
    ``marker`` voxel, whole (hysteresis from a core; a seed network's detections)."""
    candidate = np.asarray(candidate, dtype=bool)
    labels, count = ndimage.label(candidate, structure=CONNECTIVITY_26)
    held = np.zeros(count + 1, dtype=bool)  # index 0 (background) stays False: only candidate voxels mark
    held[labels[candidate & np.asarray(marker, dtype=bool)]] = True
    return held[labels]


def find_components(
    probability: np.ndarray,
    threshold: float,
    *,
    brain: np.ndarray,
    voxel_volume_mm3: float,
    depth_mm: np.ndarray,
    dwi_smoothed: np.ndarray | None = None,
    contralateral: np.ndarray | None = None,
    grow_threshold: float | None = None,
    adc_ratio: np.ndarray | None = None,
    spacing_mm: tuple[float, float, float] | None = None,
    height: np.ndarray | None = None,
) -> Components:
    """The components of :func:`candidates` (``probability >= threshold`` inside ``brain``, grown
    to ``grow_threshold`` when given), with their check values.

    Args:
        probability: float (nk, nj, ni) in [0, 1].
        brain: bool, same shape.
        voxel_volume_mm3: one voxel's volume.
        depth_mm: :func:`edge_depth_mm` of ``brain``.
        dwi_smoothed, contralateral: :func:`LambdaSegmentLib.preprocessing.symmetry.contralateral_dwi`'s pair, or None.
        adc_ratio: :func:`relative_adc` of the study, or None.
        spacing_mm: the grid's (i, j, k) voxel spacing (``PostProcessing.satellite_mm`` needs it), or None.
        height: :func:`height_fraction` of the grid (``PostProcessing.edge_max_height`` needs it), or None.
    """
    candidate = candidates(probability, threshold, brain, grow_threshold)
    labels, count = ndimage.label(candidate, structure=CONNECTIVITY_26)
    labels = labels.astype(np.int32, copy=False)
    index = np.arange(1, count + 1)
    volume_ml = ndimage.sum_labels(candidate, labels, index) * voxel_volume_mm3 / 1000.0 if count else np.zeros(0)
    inside = labels[candidate]  # medians over the candidates' voxels only: ndimage sorts whatever it is given
    depth = (
        np.asarray(ndimage.median(depth_mm[candidate], inside, index), dtype=np.float64).reshape(-1) if count else np.zeros(0)
    )
    if count and dwi_smoothed is not None and contralateral is not None:
        own = np.asarray(ndimage.mean(dwi_smoothed, labels, index), dtype=np.float64).reshape(-1)
        other = np.asarray(ndimage.mean(contralateral, labels, index), dtype=np.float64).reshape(-1)
        ratio = own / np.maximum(other, 1e-6)
    else:
        ratio = np.full(count, np.nan)
    if count and adc_ratio is not None:
        adc_median = np.asarray(ndimage.median(adc_ratio[candidate], inside, index), dtype=np.float64).reshape(-1)
    else:
        adc_median = np.full(count, np.nan)
    heights = None
    if height is not None:
        heights = (np.asarray(ndimage.median(height[candidate], inside, index), dtype=np.float64).reshape(-1)
                   if count else np.zeros(0))
    return Components(labels, np.asarray(volume_ml, dtype=np.float64).reshape(-1), depth, ratio, adc_median,
                      spacing_mm=None if spacing_mm is None else tuple(float(s) for s in spacing_mm), height=heights)


def bilateral_partners(labels: np.ndarray, mirrored: np.ndarray, radius_voxels: tuple[int, int, int], *,
                       total: bool = False) -> np.ndarray:
    """(n,) float64: each component's largest mirror partner's voxel count as a share of its own
    (0 = none), or with ``total`` all its partners' voxel counts summed. A partner is another
    component at the contralateral partner of a voxel within ``radius_voxels`` of the component.

    Args:
        labels: int (nk, nj, ni), 0 = background, 1..n the components.
        mirrored: int (nk, nj, ni), the label at each voxel's contralateral partner
            (:meth:`~LambdaSegmentLib.preprocessing.symmetry.ContralateralRegistration.mirrored_labels`).
        radius_voxels: the neighbourhood's radius per array axis (k, j, i); 0 along the slice axis
            keeps the search in-plane.

    A component's own mirror image (a lesion across the midline) is never its partner.
    """
    labels = np.asarray(labels)
    count = int(labels.max()) if labels.size else 0
    found = np.zeros(count, dtype=np.float64)
    if count == 0:
        return found
    sizes = np.bincount(labels.ravel(), minlength=count + 1)
    radius = np.asarray(radius_voxels, dtype=int)
    ellipse = ellipse_footprint(radius_voxels)
    for index, box in enumerate(ndimage.find_objects(labels), start=1):
        if box is None:
            continue
        grown = tuple(slice(max(b.start - r, 0), min(b.stop + r, n)) for b, r, n in zip(box, radius, labels.shape))
        own = labels[grown] == index
        near = ndimage.binary_dilation(own, structure=ellipse) if radius.any() else own
        partners = np.unique(mirrored[grown][near])
        partners = partners[(partners != 0) & (partners != index)]
        if partners.size:
            found[index - 1] = (sizes[partners].sum() if total else sizes[partners].max()) / sizes[index]
    return found


def ellipse_footprint(radius_voxels: tuple[int, int, int]) -> np.ndarray:
    """bool (2rk+1, 2rj+1, 2ri+1): the ellipse with these radii per array axis (k, j, i), for
    dilations; a radius of 0 keeps it one voxel thick along that axis (in-plane)."""
    grids = np.ogrid[tuple(slice(-r, r + 1) for r in radius_voxels)]
    return sum((g / max(r, 1)) ** 2 for g, r in zip(grids, radius_voxels)) <= 1.0


def partner_radius_voxels(volume: Volume, radius_mm: float) -> tuple[int, int, int]:
    """(k, j, i) voxels of an in-plane radius of ``radius_mm`` on ``volume``'s grid (0 along its slice axis)."""
    from LambdaSegmentLib.preprocessing.symmetry import in_plane_radius_ijk

    i, j, k = in_plane_radius_ijk(volume, radius_mm)
    return (k, j, i)


def with_bilateral(components: Components, mirrored_labels: np.ndarray, volume: Volume, radius_mm: float, *,
                   total: bool = False) -> Components:
    """``components`` with their mirror partners sought within ``radius_mm`` in-plane (with
    ``total``, counted together: ``PostProcessing.bilateral_partner_total``).

    Args:
        components: :func:`find_components`'s result.
        mirrored_labels: ``components.labels`` at each voxel's contralateral partner
            (``ContralateralRegistration.mirrored_labels``).
        volume: the study's grid (spacing and slice axis).
    """
    found = bilateral_partners(components.labels, mirrored_labels, partner_radius_voxels(volume, radius_mm), total=total)
    return replace(components, bilateral=(found, float(radius_mm), total))


def keep_seeded_components(probability: np.ndarray, threshold: float, brain: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """``probability`` with every 26-connected component of ``(probability >= threshold) & brain``
    that holds no ``seed`` voxel set to 0, and 0 outside the kept components.

    The seed is where a second network (a package's ``seed_network``) detects a lesion: a
    component is kept whole when that network found any part of it, so a specific seed network
    decides *whether* there is a lesion and the package's own network *how far* it reaches.

    Args:
        probability: float (nk, nj, ni) in [0, 1].
        threshold: the lowest probability of the package's lesions (its threshold, or its
            ``grow_threshold``: ``PostProcessing.candidate_threshold``), so the components are
            those the mask is cut from.
        brain: bool (nk, nj, ni).
        seed: bool (nk, nj, ni).

    Returns:
        float (nk, nj, ni), ``probability``'s dtype: unchanged inside kept components, else 0.
    """
    kept = components_holding((np.asarray(probability) >= threshold) & np.asarray(brain, dtype=bool), seed)
    return np.where(kept, probability, 0.0).astype(probability.dtype, copy=False)


def postprocess(probability: Volume, dwi: Volume, brain: np.ndarray, settings: PostProcessing,
                adc: Volume | None = None) -> Volume:
    """The final uint8 infarct mask on the probability's grid (= the DWI grid).

    Args:
        probability: infarct probability in [0, 1].
        dwi: the study's b≈1000 trace (for the contralateral check and the margin step).
        brain: bool (nk, nj, ni) brain mask; nothing outside it is ever a lesion.
        settings: the package's :class:`PostProcessing`.
        adc: the study's ADC on the same grid (any unit; for the ADC check, which needs it).
    """
    if settings.needs_adc and adc is None:
        raise ValueError("this package's post-processing checks each lesion's ADC: give the study's ADC")
    from LambdaSegmentLib.preprocessing.symmetry import contralateral_search, register_contralateral

    brain = np.asarray(brain, dtype=bool)
    registration = register_contralateral(dwi, brain) if settings.needs_registration and brain.any() else None
    mirror_pair = (registration.pair() if registration is not None
                   and (settings.needs_contralateral or settings.margin_mirror_ratio is not None) else (None, None))
    pair = (mirror_pair[0], contralateral_search(mirror_pair[1], dwi, settings.contralateral_search_mm)
            if settings.needs_contralateral and mirror_pair[1] is not None else None)
    components = find_components(
        np.asarray(probability.array),
        settings.threshold,
        brain=brain,
        voxel_volume_mm3=probability.voxel_volume_mm3,
        depth_mm=edge_depth_mm(brain, probability.spacing_mm),
        dwi_smoothed=pair[0],
        contralateral=pair[1],
        grow_threshold=settings.grow_threshold,
        adc_ratio=relative_adc(np.asarray(adc.array), brain) if settings.needs_adc and brain.any() else None,
        spacing_mm=probability.spacing_mm,
        # an empty brain has no candidates, so no height is read
        height=None if settings.edge_max_height is None else (
            height_fraction(probability, brain) if brain.any() else np.zeros(brain.shape, np.float32)),
    )
    if settings.bilateral_partner_mm is not None:
        mirrored = (registration.mirrored_labels(components.labels) if registration is not None
                    else np.zeros_like(components.labels))
        components = with_bilateral(components, mirrored, probability, settings.bilateral_partner_mm,
                                    total=settings.bilateral_partner_total)
    mask = components.mask(settings)
    if settings.margin_dwi_ratio is not None and brain.any():
        mask = apply_margin(mask, settings, relative_dwi(np.asarray(dwi.array), brain), brain, probability.spacing_mm,
                            mirror_pair)
    return probability.with_array(mask)
