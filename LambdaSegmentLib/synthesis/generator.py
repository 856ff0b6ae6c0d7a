"""``generate(seed, **ranges)``: one labelled synthetic stroke DWI study.

Pipeline (all randomness from ``numpy.random.default_rng(seed)``):
1. Acquisition: in-plane spacing, slab thickness + gap, axial or oblique stack, FOV.
2. Subject: a random pose and scale, a smooth elastic deformation and a ventricle
   enlargement map every thin sample of every slab into the MNI152 template.
3. Tissue: GM/WM/CSF partial volumes there, sharpened (``tissue_sharpening``: the
   population template is blurrier than one brain) and cut by thin sulcal CSF sheets
   (``sulcal_csf``), with atrophy (GM boundary -> CSF); extra-axial CSF and a patchy
   bright dura shell outside the surface, vessels in the sulci and along the surface;
   skull and scalp shells for skull-on studies.
4. Infarct (template space): a territorial lesion, a lacune, an embolic shower, a
   whole-territory infarct (100-300 mL) or a real LESYMAP shape (``lesymap.py``), with the
   one lesion signal model (``lesion_signal.py``: restricted core grading out to a
   near-normal-ADC, still DWI-bright edge; older T2-bright parts; heterogeneity).
   Look-alikes: old infarcts (tissue -> CSF, high ADC), white-matter T2
   hyperintensities (bright b0, high ADC), susceptibility pile-up near the skull base,
   the temporal and occipital poles and the inferior cerebellum (bright DWI up to ~8x,
   ADC often low: b0 and b1000 distort differently, mostly bilateral; optionally the mirrored
   partner displaced along the surface and of another amplitude, as real rims are:
   ``susceptibility_mirror_offset_mm``, ``susceptibility_side_gain``) and edge patches
   where b0 and b1000 disagree (low ADC, normal DWI).
5. Physics: per compartment S0 and ADC with texture; S_b = sum f S0 exp(-b ADC);
   slab averaging of S0 and S_b, b1000 misregistered against b0 by up to
   ``b0_b1000_shift_mm``, PSF blur, bias field, Rician noise; ADC and eADC from the noisy
   signals; skull stripping (a hard mask edge, sometimes a voxel wider than the brain:
   ``mask_rim_voxels``) or background thresholding; unit.

Every new feature has an option in :data:`DEFAULT_RANGES`; a probability of 0 (or
``tissue_sharpening=1``, ``sulcal_csf=0``, ``mask_rim_voxels=0``, ``extra_axial_csf_mm=0``,
``b0_b1000_shift_mm=0``, ``susceptibility_mirror_offset_mm=0``, ``susceptibility_side_gain=1``)
turns it off. ``_draw`` consumes one number whether an option is
a range or fixed, so fixing a value does not shift the draws after it (turning a feature
off skips its own random fields, which does).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import torch
from scipy import ndimage

from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.io.units import ADC_UNIT_TO_CANONICAL, eadc_from_adc

from .acquisition import ADC_UNITS, SliceGeometry, make_geometry, rician, rotation_matrix
from .fields import CroppedField, sample_channels, smooth_noise
from .lesion_signal import draw_lesion_signal_params, lesion_signal
from .lesions import LESION_KINDS, WHOLE_TERRITORY_ML, choose_kind, draw_lesion, sample_volume_ml, sample_whole_territory_ml, scatter_blobs
from .lesymap import lesymap_lesion
from .template import load_head_distance, load_territories, load_tissue_template, skull_base_region as _skull_base_region

# the least infarcted share of a voxel that makes it part of a lesion piece (small_lesion_label_share)
LESION_PIECE_FRACTION = 0.05

# Default ranges of everything a caller may fix. A (lo, hi) tuple is sampled uniformly
# (log-uniformly for volumes is done by the lesion model); a scalar fixes the value.
DEFAULT_RANGES: dict[str, Any] = {
    "in_plane_spacing_mm": (0.9, 2.0),
    "slice_thickness_mm": (2.0, 7.0),
    "slice_gap_mm": (0.0, 1.5),
    "oblique_probability": 0.35,
    "tilt_deg": (5.0, 25.0),
    "fov_mm": (200.0, 250.0),
    "coverage_mm": (110.0, 175.0),
    "lesion_volume_ml": (0.01, 300.0),
    "lesion_kind": None,  # one of LESION_KINDS, "none", or None (random)
    "lesion_free_probability": 0.12,
    "relative_adc": (0.45, 0.8),  # lesion core ADC / normal tissue ADC
    "t2_shine_through": (0.0, 0.5),  # extra relative b0 rise in the lesion's older parts
    # lesion signal (lesion_signal.py): graded edge, DWI kept bright by S0, heterogeneity
    "edge_relative_adc": (0.85, 1.0),  # ADC / normal at the lesion edge
    "lesion_grade_mm": (3.0, 10.0),  # depth over which the core grades out to the edge
    "lesion_grade_reach": (0.6, 2.0),  # grading width / a component's own depth (> 1: small ones stay faint)
    "core_dwi_ratio": (1.5, 3.2),  # DWI / normal tissue in the core
    "edge_dwi_ratio": (1.25, 2.0),  # DWI / normal tissue at the edge
    "older_fraction": (0.0, 0.6),  # share of the lesion with pseudo-normalised ADC and T2 shine-through
    "lesion_heterogeneity": (0.03, 0.15),  # std of smooth multiplicative noise on the lesion signal
    # faint lesions: with this probability a lesion (not a whole-territory one) takes its signal from
    # the ranges below instead, as real embolic dots often are: only ~1.2-1.4x as bright as their
    # surroundings on DWI, yet restricted on ADC even when small (a short grading reach keeps
    # their core; benchmarks/lesion_contrast.py); 0, the default, leaves every study as before
    "faint_lesion_probability": 0.0,
    "faint_core_dwi_ratio": (1.25, 1.7),
    "faint_edge_dwi_ratio": (1.1, 1.4),
    "faint_relative_adc": (0.55, 0.85),
    "faint_grade_reach": (0.3, 0.8),
    # lesion shapes and sizes
    "massive_infarct_probability": 0.1,  # a territorial lesion becomes a 100-300 mL whole-territory infarct
    "lesymap_probability": 0.35,  # a territorial lesion takes a real LESYMAP shape instead
    # pull of territorial lesions and embolic showers towards the brain's surface (lesions.shallowness);
    # reads no random number, so every other draw stays as at 0. Measured and left off (issue 13,
    # rule 116): it fills 4-10 mm below a skull-stripped edge, not the 2-4 mm the real lesions fill
    "lesion_surface_pull": 0.0,
    # skull-stripped edge, dura and vessels
    "mask_rim_voxels": (0.0, 1.2),  # skull-strip mask dilation beyond the brain (rounded, in-plane voxels)
    "extra_axial_csf_mm": (1.0, 3.0),  # subarachnoid CSF outside the template's brain surface
    "dura_probability": 0.7,  # a thin bright shell of dura / partial volume at the brain surface
    # whether skull-on studies get that shell too: the two real skull-on series show none at the
    # skull base, by eye and by the skull-base depth profile of benchmarks/synthesis_skull_on_edge.py,
    # where a skull-stripped study's mask rim keeps one; it stays on by default because it teaches
    # stage 1 to leave the real rims alone (issue 13, rule 72). False draws the shell all the same
    # and leaves it out, so every other draw of the study stays as with True (every study as before);
    # a probability p in [0, 1] keeps it in a fraction p of the skull-on studies, drawn from its own
    # generator so that every other draw stays as with True (issue 13, rule 80)
    "skull_on_dura": True,
    # the infarct label: voxels whose partial-volume lesion fraction is at least this (0.5: the
    # majority rule of every package so far). Experts draw further out, to nearly normal tissue
    # (issue 13, benchmarks/label_margin.py); a lower value labels the fainter margin too. Reads no
    # random number, so every study is drawn as before and only its mask changes.
    "label_fraction": 0.5,
    # a lesion piece (26-connected voxels holding at least LESION_PIECE_FRACTION of lesion) whose
    # largest share stays under label_fraction, so that the label above leaves it out, is labelled
    # where its share is at least half its largest when that largest share reaches this value
    # (None: never). A small embolus filling a third of the voxels it touches shows as a dot as
    # bright as the real experts' smallest labelled lesions (benchmarks/label_visibility.py), and
    # unlabelled it teaches the network that such dots are no lesion (issue 13, rule 146). Reads no
    # random number, so every study is drawn as before and only its mask changes.
    "small_lesion_label_share": None,
    "dura_s0": (1.0, 4.0),  # its b0 relative to WM (its ADC is drawn in 0.3-1.1e-3 mm^2/s)
    "vessel_probability": 0.6,  # thin bright vessels in the sulci and along the surface
    "b0_b1000_shift_mm": (0.0, 1.0),  # misregistration of b1000 against b0 along the rows (random sign)
    # skull-base susceptibility (orbitofrontal, temporal poles, inferior cerebellum, occipital poles)
    "susceptibility_probability": 0.85,
    "susceptibility_bilateral_probability": 0.8,
    "susceptibility_gain": (2.0, 8.0),  # peak DWI gain - 1 (drawn log-uniformly)
    "susceptibility_adc_shift": (-0.4, 0.1),  # b0 gain = DWI gain ** (1 + shift): < 0 lowers the ADC
    "susceptibility_extent_mm": (2.0, 6.0),  # Gaussian sigma of each pile-up along the surface
    "susceptibility_depth_mm": (2.0, 6.0),  # how deep under the surface it reaches (thin: a crescent)
    # a bilateral pile-up on the lateral temporal base on top (petrous bone, mastoids: both real
    # cases have one); 0, the default, leaves every study as before
    "susceptibility_temporal_probability": 0.0,
    # Real rims are bilateral but not mirror-exact: on the two real cases the partner lies a few mm
    # more lateral/inferior with another amplitude, so a contralateral check against the exact
    # mirror voxel keeps the one-sided crescents. Both options act on every mirrored partner of a
    # bilateral pile-up (skull base and temporal blocks); the defaults leave every study as before.
    # How far (mm, in template space) each partner moves along the brain surface, laterally
    # and/or inferiorly (see _partner_offsets)
    "susceptibility_mirror_offset_mm": (0.0, 0.0),
    # the partners' amplitude relative to their originals, drawn once per study (> 1: the partners
    # are the brighter side; the brighter side always peaks at susceptibility_gain)
    "susceptibility_side_gain": (1.0, 1.0),
    # the subject's size: template mm per subject mm, drawn per study (the isotropic part of the
    # pose, with a few per cent of anisotropy on top). The MNI152 template is larger than most
    # brains: at 0.9-1.1 the product's brain mask measures 1,500-2,500 mL on skull-stripped studies,
    # the two real ISLES'22 brains 1,169 and 1,447 mL (benchmarks/bright_dots.py); > 1 shrinks the
    # whole head and every lesion drawn in template space with it. The default leaves every study
    # as before, the random stream included (one uniform either way). 1.06-1.21 in stages 1 and 2
    # found more of the real lesions, marked more real temporal bases and lost synthetic
    # whole-territory infarcts on two seeds of three, so it is not the default (issue 13, rule 73)
    "template_scale": (0.9, 1.1),
    # sharper anatomy
    "tissue_sharpening": (1.5, 3.0),  # power on the partial-volume fractions (1: the template's blur)
    "sulcal_csf": (0.2, 0.9),  # share of cortical GM turned into thin sulcal CSF sheets
    # Atrophy as stroke patients have it: CSF partial volumes raised to the power 1 / (1 + e),
    # so every CSF space (ventricles, sulci, fissures) grows into the tissue around it. The two
    # real ISLES'22 brains are 29-32 % CSF-like (ADC > 1.5e-3 mm^2/s) 6 mm or more below their
    # edge, the default synthetic ones 5-17 % (benchmarks/bright_dots.py, its CSF share); grey matter
    # against that CSF makes most of a real brain's lesion-sized bright dots. 0 (the default)
    # leaves every study as before, the random stream included.
    "csf_expansion": (0.0, 0.0),
    "cortical_s0": (1.2, 1.8),  # S0 of GM relative to WM (cortical ribbon brightness)
    # S0 of CSF relative to WM: the real ISLES'22 brains' clear CSF has 2.6-3.9 x their deep
    # tissue's S0, the default synthetic ones' 1.2-2.4 (benchmarks/dwi_adc_coupling.py)
    "csf_s0": (1.8, 3.2),
    "psf_sigma_voxels": (0.0, 0.5),  # in-plane EPI blur
    "skull_stripped_probability": 0.5,
    "skull_stripped": None,
    "snr_b0": (8.0, 40.0),  # was 12-45; real ISLES ADC is still ~2x noisier voxel to voxel (synthesis_edge_realism)
    # extra noise (std, WM S0 = 1) on the b0 that reaches the ADC map only: the scanner's b0 is
    # one average where its trace DWI averages directions, so real ADC maps are about twice as
    # noisy voxel to voxel as DWI alone implies. 0 (the default) leaves every study as before.
    "adc_b0_noise": (0.0, 0.0),
    "b_value": (800.0, 1000.0),
    "adc_unit": None,  # one of ADC_UNITS, or None (random)
}


# the largest partner/original amplitude ratio (susceptibility_side_gain): a stronger asymmetry
# is nearly a one-sided pile-up, which susceptibility_bilateral_probability < 1 already makes
MAX_SIDE_GAIN = 1.5


@dataclass(frozen=True)
class SyntheticStudy:
    """One synthetic study on its acquisition grid (all Volumes share the geometry).

    Attributes:
        dwi: trace-weighted image at ``b_value`` (arbitrary scanner units).
        adc: apparent diffusion coefficient in ``adc_unit``.
        eadc: exp(-b * ADC), unitless in [0, 1].
        mask: uint8 infarct mask (1 = infarct).
        tissue: uint8 labels 0 background, 1 CSF, 2 GM, 3 WM (for realism measures).
        territory: int16 JHU arterial territory labels (0 outside).
        b_value: s/mm^2.
        adc_unit: "mm2/s", "1e-3 mm2/s" or "1e-6 mm2/s".
        params: everything drawn for this study (JSON-serialisable).
        lesion_fraction: float32 infarcted share of each voxel in [0, 1], before ``mask``'s
            ``label_fraction`` cut and the brain's (for measures of what the label leaves out).
    """

    dwi: Volume
    adc: Volume
    eadc: Volume
    mask: Volume
    tissue: Volume
    territory: Volume
    b_value: float
    adc_unit: str
    params: dict = field(default_factory=dict)
    lesion_fraction: Volume | None = None


def small_lesion_labels(share: np.ndarray, brain: np.ndarray, labelled: np.ndarray, least_peak: float) -> np.ndarray:
    """bool (nk, nj, ni): the voxels ``small_lesion_label_share`` adds to the label.

    Args:
        share: float (nk, nj, ni), the infarcted share of each voxel (``lesion_fraction``).
        brain: bool, the voxels that may be labelled at all.
        labelled: bool, the label already drawn (share >= ``label_fraction``).
        least_peak: the smallest largest share of a piece that gets labelled.

    A piece is a 26-connected component of ``share >= LESION_PIECE_FRACTION`` in the brain; one
    without a labelled voxel whose largest share reaches ``least_peak`` is labelled where its
    share is at least half that largest share (its visible core).
    """
    pieces, count = ndimage.label((share >= LESION_PIECE_FRACTION) & brain, structure=np.ones((3, 3, 3), bool))
    if count == 0:
        return np.zeros(share.shape, dtype=bool)
    index = np.arange(1, count + 1)
    peak = np.concatenate([[np.inf], np.asarray(ndimage.maximum(share, pieces, index), dtype=np.float64).reshape(-1)])
    held = np.concatenate([[True], np.asarray(ndimage.maximum(labelled, pieces, index)).reshape(-1) > 0])
    chosen = ~held & (peak >= least_peak)
    return chosen[pieces] & (share >= 0.5 * peak[pieces])


def _draw(rng: np.random.Generator, value: Any) -> float:
    # one uniform is consumed either way, so fixing one option (an ablation) leaves every
    # other draw of the study unchanged
    u = float(rng.random())
    if isinstance(value, (tuple, list)):
        lo, hi = value
        return float(lo + (hi - lo) * u)
    return float(value)


def _range(value: Any) -> tuple[float, float]:
    """(lo, hi) of an option given as a range or a fixed value."""
    lo, hi = value if isinstance(value, (tuple, list)) else (value, value)
    return float(lo), float(hi)


def _checked_range(merged: dict[str, Any], name: str) -> tuple[float, float]:
    """(lo, hi) of option ``name``, or a ValueError naming it when it is not a number or a pair."""
    try:
        lo, hi = _range(merged[name])
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or a (lo, hi) pair, got {merged[name]!r}") from None
    return lo, hi


def check_ranges(ranges: dict[str, Any]) -> dict[str, Any]:
    """Validate overrides of :data:`DEFAULT_RANGES` and return them merged with the defaults
    (``generate`` does, and a command may before any work).

    Raises:
        ValueError: an unknown option or a bad value, naming the option.
    """
    unknown = set(ranges) - set(DEFAULT_RANGES)
    if unknown:
        raise ValueError(f"unknown synthesis option(s) {sorted(unknown)}; known: {sorted(DEFAULT_RANGES)}")
    merged = {**DEFAULT_RANGES, **ranges}
    if merged["adc_unit"] is not None and merged["adc_unit"] not in ADC_UNITS:
        raise ValueError(f"adc_unit must be one of {ADC_UNITS}, got {merged['adc_unit']!r}")
    if merged["lesion_kind"] not in (None, "none", "lesymap", *LESION_KINDS):
        raise ValueError(f"lesion_kind must be one of {LESION_KINDS + ('lesymap', 'none')} or None, "
                         f"got {merged['lesion_kind']!r}")
    for name in ("lesymap_probability", "massive_infarct_probability", "faint_lesion_probability", "dura_probability", "vessel_probability",
                 "susceptibility_probability", "susceptibility_bilateral_probability", "susceptibility_temporal_probability"):
        if not 0.0 <= float(merged[name]) <= 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1], got {merged[name]!r}")
    lo, hi = _range(merged["lesion_volume_ml"])
    if not 0 < lo <= hi:
        raise ValueError(f"lesion_volume_ml must be a positive (lo, hi) range, got {merged['lesion_volume_ml']!r}")
    merged["lesion_volume_ml"] = (float(lo), float(hi))
    expansion_lo, expansion_hi = _checked_range(merged, "csf_expansion")
    if not 0.0 <= expansion_lo <= expansion_hi <= 10.0:
        raise ValueError(f"csf_expansion must be a (lo, hi) range within [0, 10], got {merged['csf_expansion']!r}")
    scale_lo, scale_hi = _checked_range(merged, "template_scale")
    if not 0.5 <= scale_lo <= scale_hi <= 2.0:
        raise ValueError(f"template_scale must be a (lo, hi) range within [0.5, 2], got {merged['template_scale']!r}")
    if not 0.0 <= float(merged["lesion_surface_pull"]) <= 10.0:
        raise ValueError(f"lesion_surface_pull must be in [0, 10], got {merged['lesion_surface_pull']!r}")
    if not 0.0 < float(merged["label_fraction"]) <= 1.0:
        raise ValueError(f"label_fraction must be in (0, 1], got {merged['label_fraction']!r}")
    small = merged["small_lesion_label_share"]
    if small is not None and not (isinstance(small, (int, float)) and not isinstance(small, bool)
                                  and LESION_PIECE_FRACTION <= float(small) < float(merged["label_fraction"])):
        raise ValueError(f"small_lesion_label_share must be None or a share in [{LESION_PIECE_FRACTION}, "
                         f"label_fraction), got {small!r}")
    shell = merged["skull_on_dura"]
    if not (isinstance(shell, (bool, int, float)) and 0.0 <= float(shell) <= 1.0):
        raise ValueError(f"skull_on_dura must be true, false or a probability in [0, 1], got {shell!r}")
    csf_lo, csf_hi = _range(merged["csf_s0"])
    if not 0.5 <= csf_lo <= csf_hi <= 10.0:
        raise ValueError(f"csf_s0 must be a (lo, hi) range of S0 ratios to white matter within [0.5, 10], got {merged['csf_s0']!r}")
    noise_lo, noise_hi = _range(merged["adc_b0_noise"])
    if not 0.0 <= noise_lo <= noise_hi:
        raise ValueError(f"adc_b0_noise must be a (lo, hi) range of standard deviations >= 0, got {merged['adc_b0_noise']!r}")
    for name in ("susceptibility_extent_mm", "susceptibility_depth_mm"):
        lo, hi = _range(merged[name])
        if not 0.0 < lo <= hi:
            raise ValueError(f"{name} must be a positive (lo, hi) range in mm, got {merged[name]!r}")
    offset_lo, offset_hi = _checked_range(merged, "susceptibility_mirror_offset_mm")
    if not 0.0 <= offset_lo <= offset_hi < np.inf:
        raise ValueError("susceptibility_mirror_offset_mm must be a (lo, hi) range of lengths >= 0 in mm, "
                         f"got {merged['susceptibility_mirror_offset_mm']!r}")
    side_lo, side_hi = _checked_range(merged, "susceptibility_side_gain")
    if not 0.0 < side_lo <= side_hi <= MAX_SIDE_GAIN:
        raise ValueError(f"susceptibility_side_gain must be a (lo, hi) range of amplitude ratios in (0, {MAX_SIDE_GAIN}], "
                         f"got {merged['susceptibility_side_gain']!r}")
    for name, low, high in (("faint_core_dwi_ratio", 1.0, 4.0), ("faint_edge_dwi_ratio", 1.0, 4.0), ("faint_relative_adc", 0.2, 1.2),
                            ("faint_grade_reach", 0.05, 5.0)):
        lo, hi = _checked_range(merged, name)
        if not low <= lo <= hi <= high:
            raise ValueError(f"{name} must be a (lo, hi) range within [{low}, {high}], got {merged[name]!r}")
    return merged


#: A whole-territory infarct (``massive_infarct_probability``; its volume:
#: :data:`.lesions.WHOLE_TERRITORY_ML`): the floors of its signal (the bulk ~3x the brain's DWI,
#: largely pseudo-normalised ADC): the generator raises a drawn value to a draw from these ranges
#: where it is below.
WHOLE_TERRITORY_SIGNAL: dict[str, tuple[float, float]] = {"core_dwi_ratio": (2.4, 3.6), "older_fraction": (0.2, 0.8)}


def faint_signal_ranges(ranges: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """The lesion-signal ranges (:mod:`.lesion_signal`'s names) of a faint lesion under synthesis
    options ``ranges`` (checked; the defaults where absent): what :func:`generate` gives a faint
    lesion, for other code that writes lesions through :func:`.lesion_signal.lesion_signal`.

    Each is a (lo, hi) pair, so a draw with these in place of the defaults consumes the same
    random numbers. Raises ValueError as :func:`check_ranges`.
    """
    return _faint_ranges(check_ranges(dict(ranges)))


def _faint_ranges(options: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    # checked options' faint_* ranges under lesion_signal's names, in the order generate draws them
    return {"core_dwi_ratio": _range(options["faint_core_dwi_ratio"]), "edge_dwi_ratio": _range(options["faint_edge_dwi_ratio"]),
            "relative_adc": _range(options["faint_relative_adc"]), "grade_reach": _range(options["faint_grade_reach"])}


@dataclass(frozen=True)
class _Subject:
    """Scanner RAS mm -> template voxel index, through pose, ventricles and elastic warp."""

    centre_ras: np.ndarray  # template brain centre (mm)
    matrix: np.ndarray  # 3x3 pose (rotation x scale), scanner -> template
    shift_mm: np.ndarray
    elastic: np.ndarray  # (3, gx, gy, gz) displacement (mm) on a coarse grid over the template
    elastic_spacing_mm: float
    ventricle_centre_ras: np.ndarray
    ventricle_gain: float
    template_to_voxel: np.ndarray  # 4x4 RAS mm -> template index

    def to_template_index(self, points_lps: np.ndarray) -> np.ndarray:
        """(n, 3) LPS mm -> (3, n) template voxel indices (float32)."""
        ras = points_lps * np.asarray([-1.0, -1.0, 1.0], dtype=np.float32)
        x = (ras - self.centre_ras - self.shift_mm) @ self.matrix.T.astype(np.float32) + self.centre_ras
        # ventricles: sample closer to their centre -> they look larger
        offset = x - self.ventricle_centre_ras
        pull = self.ventricle_gain * np.exp(-(offset**2).sum(axis=1, keepdims=True) / (2 * 22.0**2))
        x = x - pull * offset
        # elastic warp
        grid_index = ((x - self.grid_origin) / self.elastic_spacing_mm).T
        displacement = np.stack(
            [ndimage.map_coordinates(d, grid_index, order=1, mode="nearest", prefilter=False) for d in self.elastic], axis=1
        )
        x = x + displacement
        ijk = x @ self.template_to_voxel[:3, :3].T + self.template_to_voxel[:3, 3]
        return ijk.T.astype(np.float32)

    @property
    def grid_origin(self) -> np.ndarray:
        return np.asarray([-100.0, -140.0, -80.0], dtype=np.float32)


def _make_subject(rng: np.random.Generator, affine: np.ndarray, template_scale: tuple[float, float]) -> _Subject:
    """The subject's pose, size (``template_scale``: template mm per subject mm), warp and ventricles."""
    centre = np.asarray([0.0, -18.0, 10.0], dtype=np.float32)
    rotation = rotation_matrix(np.deg2rad(rng.uniform(-1, 1, 3) * np.asarray([12.0, 6.0, 8.0])))
    scale = np.diag(rng.uniform(*template_scale) * rng.uniform(0.96, 1.04, 3))
    spacing = 25.0
    shape = (int(200 / spacing) + 2, int(240 / spacing) + 2, int(200 / spacing) + 2)
    amplitude = rng.uniform(0.5, 3.0)
    elastic = ndimage.gaussian_filter(rng.normal(0.0, amplitude, (3, *shape)), (0, 0.7, 0.7, 0.7)).astype(np.float32)
    return _Subject(
        centre_ras=centre,
        matrix=(rotation @ scale).astype(np.float32),
        shift_mm=rng.uniform(-8, 8, 3).astype(np.float32),
        elastic=elastic,
        elastic_spacing_mm=spacing,
        ventricle_centre_ras=np.asarray([0.0, -10.0, 14.0], dtype=np.float32),
        ventricle_gain=float(rng.uniform(0.0, 0.3) if rng.random() < 0.6 else 0.0),
        template_to_voxel=np.linalg.inv(affine),
    )


@functools.cache
def _template_channels() -> tuple[torch.Tensor, torch.Tensor]:
    """Read-only torch copies of the template: (4, x, y, z) [GM, WM, CSF, head distance mm]
    and (1, x, y, z) territory labels (float, for nearest sampling)."""
    template = load_tissue_template()
    tissue = torch.from_numpy(np.stack([template.gm, template.wm, template.csf, load_head_distance()]))
    territories = torch.from_numpy(load_territories().astype(np.float32))[None]
    return tissue, territories


@functools.cache
def _head_box() -> tuple[np.ndarray, np.ndarray]:
    """Template index bounds (lo, hi) of everything within 20 mm of the brain (scalp included)."""
    inside = np.argwhere(load_head_distance() < 20.0)
    return inside.min(axis=0).astype(np.float32) - 1, inside.max(axis=0).astype(np.float32) + 1


def _lattice_template_index(subject: "_Subject", geometry: SliceGeometry, k: int, stride: int = 4) -> np.ndarray:
    """Template indices (3, s, nj, ni) of the thin samples of slice ``k``.

    The scanner-to-template map is smooth (pose, 25 mm elastic grid, 22 mm ventricle
    kernel), so it is computed exactly every ``stride`` voxels and interpolated between.
    """
    points = geometry.slice_points_lps(k)  # (s, nj, ni, 3)
    n_sub, nj, ni, _ = points.shape
    lj, li = -(-(nj - 1) // stride) + 1, -(-(ni - 1) // stride) + 1
    # extrapolate the (affine) in-plane grid to the lattice points beyond the last voxel
    jj = np.arange(lj) * stride
    ii = np.arange(li) * stride
    origin = points[:, 0, 0]  # (s, 3)
    step_j = (points[:, 1, 0] - points[:, 0, 0]) if nj > 1 else np.zeros_like(origin)
    step_i = (points[:, 0, 1] - points[:, 0, 0]) if ni > 1 else np.zeros_like(origin)
    lattice = origin[:, None, None] + jj[None, :, None, None] * step_j[:, None, None] + ii[None, None, :, None] * step_i[:, None, None]
    ijk = subject.to_template_index(lattice.reshape(-1, 3).astype(np.float32)).reshape(3, n_sub, lj, li)
    fine = torch.nn.functional.interpolate(
        torch.from_numpy(ijk), size=((lj - 1) * stride + 1, (li - 1) * stride + 1), mode="bilinear", align_corners=True
    )
    return fine[:, :, :nj, :ni].numpy()


def _with_mirror(centres_ijk: np.ndarray, size_x: int) -> np.ndarray:
    """``centres_ijk`` (n, 3) template indices followed by their left-right mirror images
    (2n, 3): the template is symmetric about x = 0, its x index running over ``size_x``."""
    mirrored = centres_ijk.copy()
    mirrored[:, 0] = (size_x - 1) - mirrored[:, 0]
    return np.concatenate([centres_ijk, mirrored])


def _surface_normals(distance_mm: np.ndarray, points_ijk: np.ndarray) -> np.ndarray:
    """Unit outward normals (n, 3) of the brain surface at template indices ``points_ijk`` (n, 3):
    the gradient of the signed head distance ``distance_mm`` (negative inside), by central
    differences of its trilinear interpolation one voxel either side."""
    gradient = np.empty(points_ijk.shape, dtype=np.float64)
    for axis in range(3):
        step = np.zeros(3, dtype=np.float32)
        step[axis] = 1.0
        ahead, behind = (ndimage.map_coordinates(distance_mm, (points_ijk + sign * step).T, order=1, mode="nearest")
                         for sign in (1.0, -1.0))
        gradient[:, axis] = (ahead - behind) / 2.0
    return gradient / np.maximum(np.linalg.norm(gradient, axis=1, keepdims=True), 1e-6)


def _partner_offsets(rng: np.random.Generator, partners_ijk: np.ndarray, length_range_mm: tuple[float, float],
                     distance_mm: np.ndarray, affine: np.ndarray) -> np.ndarray:
    """Displacements (n, 3), template voxels (the 1 mm grid: mm), of mirrored pile-up partners
    ``partners_ijk`` (n, 3): each of a length drawn uniformly in ``length_range_mm``, along the
    brain surface, lateral and/or inferior.

    The direction is lateral (away from x = 0 on the partner's side) and inferior with random
    non-negative weights in [0, 1], plus an anterior-posterior weight in [-0.25, 0.25], with its
    component along the surface normal removed: a pile-up is a surface phenomenon, and a centre
    pushed out into the bone would only dim its rim (``susceptibility_side_gain`` does that),
    where the real partners are found bright a few mm away along the rim. So on the lateral
    temporal surface the move is mostly inferior, under the temporal base mostly lateral, and
    round the inferolateral corner an inferior move follows the surface medially. Where the
    direction is (nearly) the normal, the partner moves inferiorly along the surface instead,
    or anterior-posteriorly. The depth under the surface changes by under 1 mm for 90 % of
    partners at 3 mm (the surface's curvature). Four uniforms per partner.
    """
    n = len(partners_ijk)
    lengths = rng.uniform(length_range_mm[0], length_range_mm[1], n)
    weights = rng.uniform(0.0, 1.0, (n, 3))
    signs = np.sign(np.diag(affine)[:3])  # +1 where the index runs with RAS x / y / z
    x_ras = affine[0, 0] * partners_ijk[:, 0] + affine[0, 3]
    lateral = np.zeros((n, 3))
    lateral[:, 0] = np.sign(x_ras) * signs[0]  # 0 on the midline: no lateral preference there
    inferior = np.zeros((n, 3))
    inferior[:, 2] = -signs[2]
    anterior = np.zeros((n, 3))
    anterior[:, 1] = signs[1]
    preferred = weights[:, :1] * lateral + weights[:, 1:2] * inferior + 0.5 * (weights[:, 2:] - 0.5) * anterior
    normals = _surface_normals(distance_mm, partners_ijk.astype(np.float32))
    offsets = np.zeros((n, 3))
    for index in range(n):
        for candidate in (preferred[index], inferior[index], anterior[index]):
            tangential = candidate - np.dot(candidate, normals[index]) * normals[index]
            norm = float(np.linalg.norm(tangential))
            if norm > 0.3 * max(float(np.linalg.norm(candidate)), 1e-6):
                offsets[index] = lengths[index] * tangential / norm
                break
    return offsets


def _side_amplitudes(n_originals: int, side_gain: float) -> np.ndarray:
    """Peak amplitudes (2n,) of ``n_originals`` pile-ups followed by their mirrored partners:
    partner / original = ``side_gain``, the brighter side at 1 (so ``susceptibility_gain``
    stays the peak gain). The originals are drawn from a left-right symmetric region, so which
    side is the dimmer one is already a fair coin per pile-up: no swap is needed."""
    original, partner = (1.0, side_gain) if side_gain <= 1.0 else (1.0 / side_gain, 1.0)
    return np.repeat(np.asarray([original, partner], dtype=np.float32), n_originals)


def _offset_rng(seed: int, block: int) -> np.random.Generator:
    """The generator of one pile-up block's partner offsets (1 skull base, 2 temporal): one stream
    per block, so the temporal partners' offsets do not depend on whether the skull-base block drew."""
    return np.random.default_rng([seed, 20261122, 3, block])


def _bilateral(picks_ijk: np.ndarray, size_x: int, offset_rng: np.random.Generator | None,
               offset_range_mm: tuple[float, float], side_gain: float | None) -> tuple[np.ndarray, np.ndarray | None, list[float]]:
    """Pile-up centres ``picks_ijk`` (n, 3) and their mirrored partners (2n, 3), the partners
    displaced by :func:`_partner_offsets` when ``offset_rng`` is given; the centres' amplitudes
    (2n,) when ``side_gain`` is given (else None: all 1); the partners' offset lengths (mm)."""
    centres = _with_mirror(picks_ijk, size_x)
    lengths: list[float] = []
    if offset_rng is not None:
        offsets = _partner_offsets(offset_rng, centres[len(picks_ijk):], offset_range_mm, load_head_distance(),
                                   load_tissue_template().affine)
        upper = np.asarray(load_head_distance().shape, dtype=np.float32) - 1.0
        centres[len(picks_ijk):] = np.clip(centres[len(picks_ijk):] + offsets, 0.0, upper)
        lengths = [round(float(length), 3) for length in np.linalg.norm(offsets, axis=1)]
    amplitudes = None if side_gain is None else _side_amplitudes(len(picks_ijk), side_gain)
    return centres, amplitudes, lengths


def _surface_artefact_field(centres_ijk: np.ndarray, sigmas_mm: np.ndarray, surface_mm: float,
                            amplitudes: np.ndarray | None = None) -> CroppedField:
    """Gaussian blobs (peak 1, or ``amplitudes`` (n,) per centre, at most 1) confined to a band
    ``surface_mm`` deep under the brain surface, like EPI pile-up along the temporal and frontal
    base; 2 mm-stride grid. ``centres_ijk`` (n, 3) template indices, ``sigmas_mm`` (n,)."""
    stride = 2
    band = load_head_distance()[::stride, ::stride, ::stride]
    band = np.clip((band + surface_mm) / 3.0, 0.0, 1.0) * (band < 2.0)  # soft inner edge, none outside
    grid = np.indices(band.shape, dtype=np.float32) * stride
    values = np.zeros(band.shape, dtype=np.float32)
    for index, (centre, sigma) in enumerate(zip(centres_ijk, sigmas_mm)):
        distance2 = sum((grid[a] - centre[a]) ** 2 for a in range(3))
        blob = np.exp(-distance2 / (2.0 * sigma**2))
        # no multiplication at all without amplitudes: every earlier study stays bit-identical
        values += blob if amplitudes is None else amplitudes[index] * blob
    return CroppedField(values=(np.clip(values, 0.0, 1.0) * band).astype(np.float32), start=(0, 0, 0), stride=stride)


def generate(seed: int, **ranges: Any) -> SyntheticStudy:
    """One labelled synthetic study; the same ``seed`` and ranges give the same study.

    Args:
        seed: any non-negative integer.
        **ranges: overrides of :data:`DEFAULT_RANGES` (a (lo, hi) tuple is sampled, a
            scalar fixes the value), e.g. ``in_plane_spacing_mm=2.0``,
            ``slice_thickness_mm=(3, 7)``, ``lesion_volume_ml=(1, 20)``,
            ``lesion_kind="embolic"``, ``adc_unit="mm2/s"``, ``skull_stripped=True``.
    Returns:
        A :class:`SyntheticStudy`; ``params["lesion"]["volume_ml"]`` is the mask volume.
    Raises:
        BadInputError: the arterial atlas (training-time data) is absent.
    """
    options = check_ranges(ranges)
    rng = np.random.default_rng([int(seed), 20261122])
    template = load_tissue_template()
    territories = load_territories()
    head_distance = load_head_distance()
    params: dict[str, Any] = {"seed": int(seed)}

    # 1. acquisition
    in_plane = _draw(rng, options["in_plane_spacing_mm"])
    thickness = _draw(rng, options["slice_thickness_mm"])
    gap = _draw(rng, options["slice_gap_mm"]) if thickness > 2.5 else 0.0
    oblique = bool(rng.random() < options["oblique_probability"])
    tilt = _draw(rng, options["tilt_deg"]) if oblique else 0.0
    b_value = _draw(rng, options["b_value"])
    unit = options["adc_unit"] or str(rng.choice(ADC_UNITS))
    skull_stripped = (
        bool(options["skull_stripped"]) if options["skull_stripped"] is not None
        else bool(rng.random() < options["skull_stripped_probability"])
    )
    subject = _make_subject(rng, template.affine, _range(options["template_scale"]))
    # brain centre in scanner LPS, plus FOV/coverage cropping offsets
    centre_ras = subject.centre_ras + subject.shift_mm
    centre_lps = centre_ras * np.asarray([-1.0, -1.0, 1.0]) + rng.uniform(-1, 1, 3) * np.asarray([6.0, 8.0, 12.0])
    geometry = make_geometry(
        rng, centre_lps, in_plane, thickness, gap, tilt,
        fov_mm=_draw(rng, options["fov_mm"]), coverage_mm=_draw(rng, options["coverage_mm"]),
        flip_j=bool(rng.random() < 0.5),
    )
    params.update(in_plane_spacing_mm=in_plane, slice_thickness_mm=thickness, slice_gap_mm=gap,
                  oblique=oblique, tilt_deg=tilt, b_value=b_value, adc_unit=unit, skull_stripped=skull_stripped,
                  template_scale=float(np.cbrt(abs(np.linalg.det(subject.matrix)))))

    # 4. infarct and look-alikes, on the template
    kind = options["lesion_kind"]
    if kind is None:
        kind = "none" if rng.random() < options["lesion_free_probability"] else choose_kind(rng, options["lesion_volume_ml"])
        if kind == "territorial" and rng.random() < options["lesymap_probability"]:
            kind = "lesymap"
    lesion: CroppedField | None = None
    lesion_stack: CroppedField | None = None  # [fraction, adc_factor - 1, s0_factor - 1] (0 outside the crop)
    if kind != "none":
        lo, hi = options["lesion_volume_ml"]
        massive = kind == "territorial" and hi >= WHOLE_TERRITORY_ML[0] and bool(rng.random() < options["massive_infarct_probability"])
        signal = draw_lesion_signal_params(
            rng, relative_adc=options["relative_adc"], edge_relative_adc=options["edge_relative_adc"],
            grade_mm=options["lesion_grade_mm"], grade_reach=options["lesion_grade_reach"], core_dwi_ratio=options["core_dwi_ratio"],
            edge_dwi_ratio=options["edge_dwi_ratio"], t2_shine_through=options["t2_shine_through"],
            older_fraction=options["older_fraction"], heterogeneity=options["lesion_heterogeneity"],
        )
        if kind == "lesymap":
            lesion, info = lesymap_lesion(rng, sample_volume_ml(rng, "lesymap", (lo, hi)), template.gm, template.wm)
            inside = lesion.values >= 0.5
            box = tuple(slice(a, a + n) for a, n in zip(lesion.start, lesion.values.shape))
            labels, counts = np.unique(territories[box][inside], return_counts=True)
            covered = [int(l) for l, c in zip(labels, counts) if 0 < l <= 30 and c >= 0.1 * inside.sum()]
            params["lesion"] = {"kind": "lesymap", "template_volume_ml": info["volume_ml"], "territories": covered,
                                "components": 1, "lesymap": info}
        else:
            volume_ml = sample_whole_territory_ml(rng, (lo, hi)) if massive else sample_volume_ml(rng, kind, (lo, hi))
            lesion, plan = draw_lesion(rng, kind, volume_ml, template.gm, template.wm, territories, whole_territory=massive,
                                       surface_pull=float(options["lesion_surface_pull"]))
            params["lesion"] = {"kind": plan.kind, "template_volume_ml": plan.volume_ml,
                                "territories": plan.territories, "components": plan.components}
        if massive:  # whole-territory infarcts: bulk ~3x brain DWI, largely pseudo-normalised ADC
            for name in ("core_dwi_ratio", "older_fraction"):  # in this order: the random stream as before
                signal[name] = max(signal[name], float(rng.uniform(*WHOLE_TERRITORY_SIGNAL[name])))
        # drawn only when asked for, so that the default leaves every study's random stream as before
        faint = not massive and options["faint_lesion_probability"] > 0 and bool(rng.random() < options["faint_lesion_probability"])
        if faint:
            faint_ranges = _faint_ranges(options)
            signal["core_dwi_ratio"] = float(rng.uniform(*faint_ranges["core_dwi_ratio"]))
            signal["edge_dwi_ratio"] = min(float(rng.uniform(*faint_ranges["edge_dwi_ratio"])), signal["core_dwi_ratio"])
            signal["relative_adc"] = float(rng.uniform(*faint_ranges["relative_adc"]))
            signal["edge_relative_adc"] = max(signal["edge_relative_adc"], signal["relative_adc"])
            signal["grade_reach"] = float(rng.uniform(*faint_ranges["grade_reach"]))
        params["lesion"]["massive"] = massive
        params["lesion"]["faint"] = faint
        params["lesion"]["signal"] = {name: round(value, 4) for name, value in signal.items()}
        adc_factor, s0_factor = lesion_signal(rng, lesion.values, float(lesion.stride), **signal)
        lesion_stack = CroppedField(np.stack([lesion.values, adc_factor - 1.0, s0_factor - 1.0]), lesion.start, lesion.stride)
    else:
        params["lesion"] = {"kind": "none", "template_volume_ml": 0.0, "territories": [], "components": 0}
    tissue_mask = (template.gm + template.wm) > 0.5
    old_infarct = None
    if rng.random() < 0.3:
        old_kind = str(rng.choice(["territorial", "lacunar"]))
        old_infarct, old_plan = draw_lesion(rng, old_kind, sample_volume_ml(rng, old_kind, (0.05, 60.0)),
                                            template.gm, template.wm, territories)
        params["old_infarct"] = {"kind": old_kind, "volume_ml": old_plan.volume_ml, "territories": old_plan.territories}
    wm_hyperintensity = None
    if rng.random() < 0.5:
        deep_wm = (template.wm > 0.7) & (head_distance < -12.0)
        wm_hyperintensity = scatter_blobs(rng, deep_wm, template.gm, int(rng.integers(1, 12)),
                                          float(np.exp(rng.uniform(np.log(0.2), np.log(15.0)))), gm_preference=0.0)
        params["wm_hyperintensity"] = True
    artefact = None
    extent_lo, extent_hi = _range(options["susceptibility_extent_mm"])
    depth_lo, depth_hi = _range(options["susceptibility_depth_mm"])
    # mirror realism (displaced, unequal partners): drawn from their own generators, and only
    # when asked for, so that every other draw of the study stays as without them
    offset_range = _range(options["susceptibility_mirror_offset_mm"])
    side_range = _range(options["susceptibility_side_gain"])
    side_gain = (None if side_range == (1.0, 1.0)
                 else float(np.random.default_rng([int(seed), 20261122, 3]).uniform(*side_range)))
    if side_gain is not None:
        params["susceptibility_side_gain"] = side_gain
    offsets_on = offset_range[1] > 0.0
    offset_lengths: dict[str, list[float]] = {}
    if rng.random() < options["susceptibility_probability"]:
        # susceptibility pile-up: orbitofrontal, temporal poles, inferior cerebellum and
        # occipital poles, near the brain surface, mostly on both sides (the sinuses and
        # mastoids are bilateral)
        base = np.argwhere(_skull_base_region())
        picks = base[rng.integers(len(base), size=int(rng.integers(1, 5)))].astype(np.float32)
        amplitudes = None
        if rng.random() < options["susceptibility_bilateral_probability"]:
            picks, amplitudes, offset_lengths["skull_base"] = _bilateral(
                picks, template.gm.shape[0], _offset_rng(int(seed), 1) if offsets_on else None, offset_range, side_gain)
        artefact = _surface_artefact_field(picks, rng.uniform(extent_lo, extent_hi, len(picks)), rng.uniform(depth_lo, depth_hi),
                                           amplitudes)
        params["susceptibility"] = len(picks)
    if options["susceptibility_temporal_probability"] > 0.0:
        # its own generator, so that every other draw of the study stays as without it
        temporal_rng = np.random.default_rng([int(seed), 20261122, 2])
        if temporal_rng.random() < options["susceptibility_temporal_probability"]:
            temporal = np.argwhere(_skull_base_region(("temporal",)))
            picks = temporal[temporal_rng.integers(len(temporal), size=int(temporal_rng.integers(1, 3)))].astype(np.float32)
            picks, amplitudes, offset_lengths["temporal"] = _bilateral(
                picks, template.gm.shape[0], _offset_rng(int(seed), 2) if offsets_on else None, offset_range, side_gain)
            pile_up = _surface_artefact_field(picks, temporal_rng.uniform(extent_lo, extent_hi, len(picks)),
                                              temporal_rng.uniform(depth_lo, depth_hi), amplitudes)
            artefact = pile_up if artefact is None else dataclasses.replace(artefact, values=np.maximum(artefact.values, pile_up.values))
            params["susceptibility_temporal"] = len(picks)
    if offsets_on and offset_lengths:
        params["susceptibility_mirror_offset_mm"] = offset_lengths  # per block, each partner's offset (mm)

    # 5. tissue properties for this study (ADC in 1e-3 mm^2/s, S0 relative to WM)
    adc_gm, adc_wm, adc_csf = rng.uniform(0.78, 0.95), rng.uniform(0.66, 0.82), rng.uniform(2.8, 3.3)
    s0_gm, s0_wm, s0_csf = _draw(rng, options["cortical_s0"]), 1.0, _draw(rng, options["csf_s0"])
    # Clinical DWI is fat-suppressed: what is left of the scalp (muscle, fluid) is dark at b1000.
    # On the two real skull-on series in ../shared its DWI is 0.13-0.19x the brain median (p99 0.38),
    # benchmarks/synthesis_scalp.py; the earlier 0.2-0.9 / 0.6-1.6 made it up to 0.8x, as bright as tissue.
    s0_scalp, adc_scalp = rng.uniform(0.2, 0.6), rng.uniform(1.0, 2.0)
    atrophy = rng.uniform(0.0, 0.5)
    old_fill, wmh_t2, wmh_adc = rng.uniform(0.4, 0.9), rng.uniform(0.3, 1.0), rng.uniform(0.1, 0.5)
    gain_lo, gain_hi = _range(options["susceptibility_gain"])
    artefact_gain = float(np.exp(rng.uniform(np.log(gain_lo), np.log(gain_hi))))
    artefact_adc_shift = _draw(rng, options["susceptibility_adc_shift"])  # b0/b1000 distort differently
    sharpening = _draw(rng, options["tissue_sharpening"])
    sulcal = _draw(rng, options["sulcal_csf"])
    extra_axial = _draw(rng, options["extra_axial_csf_mm"])
    dura = bool(rng.random() < options["dura_probability"])
    dura_s0, dura_adc, dura_offset = _draw(rng, options["dura_s0"]), rng.uniform(0.3, 1.1), rng.uniform(0.5, 2.5)
    # drawn either way, from its own generator: see skull_on_dura (True and False keep every study as before)
    skull_on_shell = bool(np.random.default_rng([int(seed), 20261127, 1]).random() < float(options["skull_on_dura"]))
    dura_shell = dura and (skull_stripped or skull_on_shell)
    vessels = bool(rng.random() < options["vessel_probability"])
    vessel_s0, vessel_adc = rng.uniform(1.0, 3.0), rng.uniform(0.4, 1.2)
    scalp_inner, scalp_outer = rng.uniform(3.0, 7.0), rng.uniform(12.0, 18.0)
    params.update(adc_gm=adc_gm, adc_wm=adc_wm, adc_csf=adc_csf, s0_gm=s0_gm, s0_csf=s0_csf, atrophy=atrophy,
                  tissue_sharpening=sharpening, sulcal_csf=sulcal, dura=dura_shell, vessels=vessels)
    expansion_lo, expansion_hi = _range(options["csf_expansion"])
    expansion = 0.0
    if expansion_hi > 0.0:
        # its own generator, so that every other draw of the study stays as without it
        expansion = float(np.random.default_rng([int(seed), 20261125, 2]).uniform(expansion_lo, expansion_hi))
        params["csf_expansion"] = expansion
    if artefact is not None:
        params["susceptibility_gain"], params["susceptibility_adc_shift"] = artefact_gain, artefact_adc_shift

    tissue_channels, territory_channel = _template_channels()
    head_box = _head_box()
    ni, nj, nk = geometry.size_ijk
    shape = (nk, nj, ni)
    s0 = np.zeros(shape, np.float32)
    sb = np.zeros(shape, np.float32)
    fractions = np.zeros((4, *shape), np.float32)  # background, CSF, GM, WM
    lesion_fraction = np.zeros(shape, np.float32)
    territory_map = np.zeros(shape, np.int16)
    texture_s0 = 1.0 + rng.uniform(0.03, 0.09) * smooth_noise(rng, shape, 1.5)
    texture_adc = 1.0 + rng.uniform(0.03, 0.08) * smooth_noise(rng, shape, 1.5)
    # thin sheets (sulci: one noise's zero crossing, ~4 mm scale, i.e. gyri ~8-10 mm wide)
    # and lines (vessels: two noises' common zero crossing) on the acquisition grid
    sheet_sigma = 2.5 / in_plane
    sulci = np.exp(-((smooth_noise(rng, shape, 4.0 / in_plane) / 0.25) ** 2)) if sulcal > 0 else None
    vessel_map = (np.exp(-((smooth_noise(rng, shape, 2.0 * sheet_sigma) / 0.3) ** 2)
                         - (smooth_noise(rng, shape, 2.0 * sheet_sigma) / 0.3) ** 2) if vessels else None)
    dura_patches = np.clip(0.6 + smooth_noise(rng, shape, 6.0 / in_plane), 0.0, 1.0) if dura else None
    if not dura_shell:
        dura_patches = None  # drawn all the same above, so that every later draw stays as with the shell

    def per_sample(field: np.ndarray, k: int, n_sub: int, head: np.ndarray) -> np.ndarray:
        """A slice of an acquisition-grid field at slice k's thin samples inside the head box."""
        return np.repeat(field[k][None], n_sub, 0).ravel()[head]
    for k in range(nk):
        ijk = _lattice_template_index(subject, geometry, k)  # (3, s, nj, ni)
        n_sub = ijk.shape[1]
        ijk_all = ijk.reshape(3, -1)
        # only points inside the head's bounding box carry signal; skip the rest
        head = np.all((ijk_all >= head_box[0][:, None]) & (ijk_all <= head_box[1][:, None]), axis=0)
        ijk = ijk_all[:, head]
        gm, wm, csf, distance = sample_channels(tissue_channels, ijk)
        if sharpening > 1.0:
            # sharper partial volume than the population template's (it averages many brains)
            powered = [np.power(np.clip(f, 0.0, 1.0), sharpening) for f in (gm, wm, csf, np.clip(1.0 - gm - wm - csf, 0.0, 1.0))]
            total = powered[0] + powered[1] + powered[2] + powered[3] + 1e-12
            gm, wm, csf = powered[0] / total, powered[1] / total, powered[2] / total
        if sulci is not None:
            # thin CSF sheets through the cortex (the template's sulci are averaged away)
            move = sulcal * per_sample(sulci, k, n_sub, head) * gm * np.clip((distance + 15.0) / 5.0, 0.0, 1.0)
            gm, csf = gm - move, csf + move
        # atrophy: grey matter at its CSF boundary turns into CSF (wider sulci)
        shrink = atrophy * gm * np.clip(1.0 - gm - wm, 0.0, 1.0) * 2.0
        gm, csf = gm - shrink, csf + shrink
        if expansion > 0.0:
            # CSF grows into the tissue around it, grey and white matter giving way in proportion
            tissue = gm + wm
            taken = np.minimum(np.clip(np.power(np.clip(csf, 0.0, 1.0), 1.0 / (1.0 + expansion)) - csf, 0.0, None), tissue)
            kept = np.where(tissue > 1e-6, 1.0 - taken / np.maximum(tissue, 1e-6), 1.0)
            gm, wm, csf = gm * kept, wm * kept, csf + taken
        adc_g = np.full_like(gm, adc_gm)
        adc_w = np.full_like(gm, adc_wm)
        s0_g = np.full_like(gm, s0_gm)
        s0_w = np.full_like(gm, s0_wm)
        if lesion_stack is not None:
            lesion_here, adc_change, s0_change = lesion_stack.sample(ijk)
        else:
            lesion_here = np.zeros_like(gm)
        if old_infarct is not None:
            # an old infarct never overlaps the acute one (that would contradict the label)
            old = old_infarct.sample(ijk) * old_fill * np.clip(1.0 - 2.0 * lesion_here, 0.0, 1.0)
            csf = csf + old * (gm + wm)
            gm, wm = gm * (1 - old), wm * (1 - old)
            adc_g, adc_w = adc_g * (1 + old), adc_w * (1 + old)  # gliosis
        if wm_hyperintensity is not None:
            wmh = wm_hyperintensity.sample(ijk) * np.clip(1.0 - 2.0 * lesion_here, 0.0, 1.0)
            s0_w = s0_w * (1 + wmh_t2 * wmh)
            adc_w = adc_w * (1 + wmh_adc * wmh)
        if lesion is not None:
            # the one lesion model (lesion_signal.py), sampled from its template crop
            adc_g, adc_w = adc_g * (1.0 + adc_change), adc_w * (1.0 + adc_change)
            s0_g, s0_w = s0_g * (1.0 + s0_change), s0_w * (1.0 + s0_change)
        tex_s0 = per_sample(texture_s0, k, n_sub, head)
        tex_adc = per_sample(texture_adc, k, n_sub, head)
        bk = b_value / 1000.0  # ADC in 1e-3 mm^2/s times b in s/mm^2
        signal_0 = (gm * s0_g + wm * s0_w) * tex_s0 + csf * s0_csf
        signal_b = (gm * s0_g * np.exp(-bk * adc_g * tex_adc) + wm * s0_w * np.exp(-bk * adc_w * tex_adc)) * tex_s0 \
            + csf * s0_csf * np.exp(-bk * adc_csf)
        outside = np.clip(1.0 - gm - wm - csf, 0.0, 1.0)
        if extra_axial > 0:
            # the subarachnoid CSF between the brain and the dura (what a generous brain mask keeps)
            csf_out = outside * np.clip((extra_axial - distance) / 1.0, 0.0, 1.0) * (distance > -1.0)
            signal_0 = signal_0 + csf_out * s0_csf
            signal_b = signal_b + csf_out * s0_csf * np.exp(-bk * adc_csf)
            outside = outside - csf_out
        if dura_patches is not None:
            # dura / partial-volume shell hugging the surface: bright b1000, low ADC
            shell = outside * np.exp(-(((distance - dura_offset) / 1.5) ** 2)) * per_sample(dura_patches, k, n_sub, head)
            signal_0 = signal_0 + shell * dura_s0
            signal_b = signal_b + shell * dura_s0 * np.exp(-bk * dura_adc)
        if vessel_map is not None:
            # vessels in the sulcal CSF and along the surface, not lesions
            vessel = per_sample(vessel_map, k, n_sub, head) * (
                np.clip(3.0 * csf, 0.0, 1.0) * (distance > -20.0) + outside * np.exp(-((distance / 1.5) ** 2)))
            vessel = np.clip(vessel, 0.0, 1.0) * 0.8
            signal_0 = signal_0 * (1.0 - vessel) + vessel * vessel_s0
            signal_b = signal_b * (1.0 - vessel) + vessel * vessel_s0 * np.exp(-bk * vessel_adc)
        if not skull_stripped:
            scalp = ((distance > scalp_inner) & (distance < scalp_outer)).astype(np.float32) * np.clip(1.0 - gm - wm - csf, 0, 1)
            signal_0 = signal_0 + scalp * s0_scalp
            signal_b = signal_b + scalp * s0_scalp * np.exp(-bk * adc_scalp)
        if artefact is not None:
            # b1000 gain exactly 1 + gain x field; b0's differs (b0/b1000 distortion mismatch):
            # the ADC shifts by shift x ln(gain) / b (in 1e-3 mm^2/s per 1000 s/mm^2)
            gain = 1.0 + artefact_gain * artefact.sample(ijk)
            signal_0, signal_b = signal_0 * gain ** (1.0 + artefact_adc_shift), signal_b * gain
        weights = geometry.slab_weights

        def average(values: np.ndarray, outside: float = 0.0) -> np.ndarray:
            full = np.full(head.shape, outside, dtype=np.float32)
            full[head] = values
            return np.tensordot(weights, full.reshape(n_sub, nj, ni), axes=1)

        s0[k], sb[k] = average(signal_0), average(signal_b)
        background = np.clip(1.0 - gm - wm - csf, 0.0, 1.0)
        fractions[:, k] = [average(background, 1.0), average(csf), average(gm), average(wm)]
        lesion_fraction[k] = average(lesion_here * np.clip((gm + wm) * 2.0, 0.0, 1.0))
        centre = ijk_all.reshape(3, n_sub, nj, ni)[:, n_sub // 2]
        territory_map[k] = sample_channels(territory_channel, centre.reshape(3, -1), mode="nearest").reshape(nj, ni)

    brain_fraction = fractions[1:].sum(axis=0)
    # edge patches where b0 and b1000 are misregistered: low ADC, unchanged DWI
    if rng.random() < 0.5:
        edge = (brain_fraction > 0.1) & (brain_fraction < 0.9)
        edge = ndimage.binary_dilation(edge, iterations=1)
        patches = edge & (smooth_noise(rng, shape, 2.0) > rng.uniform(0.5, 1.5))
        s0 = s0 * np.where(patches, 1.0 - rng.uniform(0.1, 0.35), 1.0).astype(np.float32)
        params["edge_patches"] = True
    # b1000 misregistered against b0 along the rows (eddy currents): at the edges the ADC
    # is too low on one side and too high on the other
    shift_mm = _draw(rng, options["b0_b1000_shift_mm"]) * float(rng.choice([-1.0, 1.0]))
    if abs(shift_mm) > 0.05:
        sb = ndimage.shift(sb, (0.0, shift_mm / in_plane, 0.0), order=1, mode="nearest")
    params["b0_b1000_shift_mm"] = shift_mm
    # in-plane PSF (EPI blurring), bias field, noise
    psf = _draw(rng, options["psf_sigma_voxels"])
    if psf > 0.05:
        s0 = ndimage.gaussian_filter(s0, (0, psf, psf))
        sb = ndimage.gaussian_filter(sb, (0, psf, psf))
    bias = np.exp(rng.uniform(0.05, 0.3) * smooth_noise(rng, shape, 12.0 / in_plane * 4))
    s0, sb = s0 * bias, sb * bias
    sigma = 1.0 / _draw(rng, options["snr_b0"])
    averages = int(rng.integers(1, 4))
    s0_noisy = rician(rng, s0, sigma)
    sb_noisy = rician(rng, sb, sigma / np.sqrt(averages * 3.0))
    s0_for_adc = s0_noisy
    noise_lo, noise_hi = _range(options["adc_b0_noise"])
    if noise_hi > 0.0:
        # its own generator, so that every other draw of the study stays as without it
        extra_rng = np.random.default_rng([int(seed), 20261122, 1])
        extra_sigma = float(extra_rng.uniform(noise_lo, noise_hi))
        s0_for_adc = rician(extra_rng, s0_noisy, extra_sigma)
        params["adc_b0_noise"] = extra_sigma
    with np.errstate(divide="ignore", invalid="ignore"):
        adc = np.log(np.maximum(s0_for_adc, 1e-6) / np.maximum(sb_noisy, 1e-6)) / (b_value / 1000.0)
    adc = np.clip(adc, 0.0, 4.5).astype(np.float32)
    if skull_stripped:
        # a hard mask edge as a research pipeline's brain extraction leaves it, often a
        # voxel or two wide of the brain (partial-volume cortex, CSF and dura kept)
        keep = brain_fraction > rng.uniform(0.3, 0.6)
        rim = int(round(_draw(rng, options["mask_rim_voxels"])))
        if rim > 0:
            keep = ndimage.binary_dilation(keep, structure=np.ones((1, 3, 3), bool), iterations=rim)
        params["mask_rim_voxels"] = rim
    else:
        keep = s0_noisy > rng.uniform(0.1, 0.25) * float(np.median(s0[brain_fraction > 0.5]) if (brain_fraction > 0.5).any() else 1.0)
    adc = np.where(keep, adc, 0.0).astype(np.float32)
    dwi = sb_noisy * rng.uniform(100.0, 2000.0)
    if skull_stripped:
        dwi = np.where(keep, dwi, 0.0)
    dwi = dwi.astype(np.float32)
    mask = ((lesion_fraction >= float(options["label_fraction"])) & (brain_fraction > 0.5)).astype(np.uint8)
    if options["small_lesion_label_share"] is not None:
        mask |= small_lesion_labels(lesion_fraction, brain_fraction > 0.5, mask != 0,
                                    float(options["small_lesion_label_share"])).astype(np.uint8)
    tissue = np.argmax(fractions, axis=0).astype(np.uint8)
    tissue[brain_fraction < 0.5] = 0
    canonical_adc = Volume(adc, geometry.spacing_mm, geometry.origin_mm, geometry.direction)
    eadc = eadc_from_adc(canonical_adc, b_value).array  # the library's one eADC rule (0 = no data)

    def volume(array: np.ndarray) -> Volume:
        return Volume(array, geometry.spacing_mm, geometry.origin_mm, geometry.direction)

    voxel_ml = float(np.prod(geometry.spacing_mm)) / 1000.0
    params["lesion"]["volume_ml"] = float(mask.sum()) * voxel_ml
    params["lesion"]["components"] = int(ndimage.label(mask)[1]) if mask.any() else 0
    return SyntheticStudy(
        dwi=volume(dwi),
        adc=volume((adc / ADC_UNIT_TO_CANONICAL[unit]).astype(np.float32)),
        eadc=volume(eadc),
        mask=volume(mask),
        tissue=volume(tissue),
        territory=volume(territory_map),
        b_value=b_value,
        adc_unit=unit,
        params=params,
        lesion_fraction=volume(lesion_fraction),
    )
