"""CarveMix: the fold's real lesions carved out of their cases and pasted into other brains.

The reverse of :mod:`.real_backgrounds` (synthetic infarcts in real brains): every
connected component of a real case's expert mask is carved out, with its signal expressed
as ratios to that brain's normal tissue, and pasted into synthetic studies at random
positions and poses, so the real expert-labelled lesion appearance (faint emboli, a
territorial infarct and its satellites) is seen in thousands of new brains.

1. :func:`carve_lesions`: per component, in the source's *physical* space (a crop of the
   source grid, the component's box plus ``margin_mm``), the lesion fraction (0/1), the
   ratios r_adc = ADC / median normal ADC and r_s0 = S0 / median normal S0 (S0 = DWI ·
   exp(b · ADC); normal = brain, not lesion, ADC < ``CSF_ADC``), and the distance (mm)
   outside the component. Source CSF and non-brain voxels get ratio 1: pasting CSF into
   brain would create a fake signal.
2. :func:`paste_lesions`: a random pose (left-right mirror, rotation, isotropic scale) and
   target centre in the target's lesion-free brain tissue; the CarveMix weight w is 1 in the
   lesion and falls linearly to 0 over 1-4 mm outside it; at least 90 % of it must land in
   that tissue (in the centre's hemisphere where the target's territories are known). Everything is resampled onto the
   target's own grid with ``sitk.Resample`` (linear), averaged over sub-positions across a
   thick slice (the partial volume of a slab, as the generator's slice profile gives it);
   the target itself is never resampled. ADC' = ADC·(1 + w(r_adc − 1)), S0' = S0·(1 +
   w(r_s0 − 1)), DWI' = S0'·exp(−b·ADC') through ``synthesis.lesion_signal.apply_lesion_signal``.
   The label gains (pasted fraction ≥ 0.5) in allowed tissue.

Axis letters: arrays are (k, j, i); ``spacing_mm``/``origin_mm`` are (i, j, k) / LPS mm.
ADC is in 10⁻³ mm²/s throughout. Training-time only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import SimpleITK as sitk
from scipy import ndimage
from scipy.spatial.transform import Rotation

from LambdaSegmentLib.io import Study, Volume
from LambdaSegmentLib.io.units import eadc_from_adc

from .prepared import PreparedCase, load_synthetic, prepare_labelled
from .real_backgrounds import CSF_ADC, RealBackground, lesion_free_tissue

#: Placement tries per lesion before it is given up.
MAX_TRIES = 20
#: Share of the pasted weight that must land in allowed tissue.
MIN_ALLOWED_SHARE = 0.9
#: Sub-positions averaged across a target slice thicker than the source's finest spacing.
SLICE_SUBSAMPLES = 5
#: Study-level lesion counts pasted into a carved synthetic study, drawn uniformly.
CARVED_PER_STUDY = (1, 2, 3)
#: Resampled distance outside the lesion where the crop does not reach (mm): weight 0.
_FAR_MM = 1.0e6


@dataclass(frozen=True)
class CarvedLesion:
    """One connected component of a real expert mask, in its source's physical space.

    All four Volumes share one grid: a crop of the source's grid (same spacing, direction;
    origin at the crop's first voxel), the component's box plus a margin.

    Attributes:
        source: the source case's name.
        component: the component's number (1-based, as ``scipy.ndimage.label`` numbers it).
        fraction: float32 (nk, nj, ni), 1 in the component, 0 elsewhere (other components
            of the same case included).
        r_adc: float32, ADC / the source brain's median normal ADC; 1 in CSF and outside the brain.
        r_s0: float32, S0 / the source brain's median normal S0; 1 in CSF and outside the brain.
        outside_mm: float32, distance (mm) from the component, 0 inside it.
        volume_ml: the component's volume in mL.
        centre_lps: (3,) LPS mm, the component's centre of mass.
    """

    source: str
    component: int
    fraction: Volume
    r_adc: Volume
    r_s0: Volume
    outside_mm: Volume
    volume_ml: float
    centre_lps: np.ndarray


def s0_from(dwi: np.ndarray, adc: np.ndarray, b_value: float) -> np.ndarray:
    """S0 = DWI · exp(b · ADC) (float64), ADC in 10⁻³ mm²/s and b in s/mm²."""
    return np.asarray(dwi, dtype=np.float64) * np.exp(b_value / 1000.0 * np.asarray(adc, dtype=np.float64))


def carve_lesions(background: RealBackground, *, margin_mm: float = 8.0) -> list[CarvedLesion]:
    """One :class:`CarvedLesion` per connected component (full 3D connectivity) of the expert mask.

    Args:
        background: the source case (its study, expert ``lesion`` and ``brain`` on the DWI grid).
        margin_mm: margin around each component's box (mm); at least the widest CarveMix ramp (4 mm).
    """
    study = background.study
    dwi, adc = np.asarray(study.dwi.array), np.asarray(study.adc.array, dtype=np.float64)
    s0 = s0_from(dwi, adc, study.b_value)
    normal = background.brain & ~background.lesion & (adc < CSF_ADC) & (adc > 0)
    if not normal.any():
        raise ValueError(f"{background.name}: no lesion-free brain tissue to take the normal signal from")
    # CSF and non-brain voxels keep ratio 1 (no signal change where they are pasted)
    tissue = background.brain & (adc < CSF_ADC)
    r_adc = np.where(tissue, adc / np.median(adc[normal]), 1.0).astype(np.float32)
    r_s0 = np.where(tissue, s0 / np.median(s0[normal]), 1.0).astype(np.float32)
    components, count = ndimage.label(background.lesion, structure=np.ones((3, 3, 3), dtype=bool))
    spacing_kji = np.asarray(study.dwi.spacing_mm[::-1])
    margin = np.ceil(margin_mm / spacing_kji).astype(int)
    carved: list[CarvedLesion] = []
    for number, box in enumerate(ndimage.find_objects(components), start=1):
        crop = tuple(
            slice(max(0, s.start - m), min(n, s.stop + m)) for s, m, n in zip(box, margin, components.shape)
        )
        inside = components[crop] == number
        start_ijk = np.asarray([crop[2].start, crop[1].start, crop[0].start], dtype=np.float64)
        origin = tuple(study.dwi.index_to_lps(start_ijk))

        def cropped(array: np.ndarray) -> Volume:
            return Volume(np.ascontiguousarray(array, dtype=np.float32), study.dwi.spacing_mm, origin, study.dwi.direction)

        centre_kji = np.asarray(ndimage.center_of_mass(inside)) + start_ijk[::-1]
        carved.append(
            CarvedLesion(
                source=background.name,
                component=number,
                fraction=cropped(inside),
                r_adc=cropped(r_adc[crop]),
                r_s0=cropped(r_s0[crop]),
                outside_mm=cropped(ndimage.distance_transform_edt(~inside, sampling=spacing_kji)),
                volume_ml=float(inside.sum()) * study.dwi.voxel_volume_mm3 / 1000.0,
                centre_lps=study.dwi.index_to_lps(centre_kji[::-1]),
            )
        )
    return carved


@dataclass(frozen=True)
class _Pose:
    mirror: bool
    angles_deg: tuple[float, float, float]
    scale: float
    ramp_mm: float


def _target_to_source(lesion: CarvedLesion, pose: _Pose, centre_lps: np.ndarray) -> sitk.AffineTransform:
    """The transform sitk.Resample needs: target LPS point → source LPS point.

    Forward (source → target): p_t = c_t + s·R·M·(p_s − c_s), M the left-right (LPS x)
    mirror about the lesion's centre; its inverse is p_s = c_s + M·Rᵀ·(p_t − c_t)/s. A
    mirror is not a rigid or similarity transform, hence an affine one.
    """
    mirror = np.diag([-1.0 if pose.mirror else 1.0, 1.0, 1.0])
    rotation = Rotation.from_euler("xyz", pose.angles_deg, degrees=True).as_matrix()
    transform = sitk.AffineTransform(3)
    transform.SetMatrix(tuple((mirror @ rotation.T / pose.scale).flatten()))
    transform.SetCenter(tuple(float(c) for c in centre_lps))
    transform.SetTranslation(tuple(float(c) for c in np.asarray(lesion.centre_lps) - centre_lps))
    return transform


def _target_box(lesion: CarvedLesion, transform: sitk.AffineTransform, target: Volume) -> tuple[slice, slice, slice] | None:
    """(k, j, i) slices of the target covering the posed crop (one voxel of slack), or None if outside."""
    matrix = np.asarray(transform.GetMatrix()).reshape(3, 3)
    centre, translation = np.asarray(transform.GetCenter()), np.asarray(transform.GetTranslation())
    corners_ijk = np.stack(np.meshgrid(*[[0.0, n - 1.0] for n in lesion.fraction.size_ijk], indexing="ij"), -1).reshape(-1, 3)
    source = lesion.fraction.index_to_lps(corners_ijk)
    # invert p_s = A (p_t − c) + c + t
    target_lps = (source - centre - translation) @ np.linalg.inv(matrix).T + centre
    to_index = np.linalg.inv(target.ijk_to_lps_matrix())
    ijk = target_lps @ to_index[:3, :3].T + to_index[:3, 3]
    low = np.maximum(np.floor(ijk.min(axis=0)).astype(int) - 1, 0)
    high = np.minimum(np.ceil(ijk.max(axis=0)).astype(int) + 2, np.asarray(target.size_ijk))
    if (high <= low).any():
        return None
    return tuple(slice(int(low[a]), int(high[a])) for a in (2, 1, 0))  # type: ignore[return-value]


def _resample_posed(
    lesion: CarvedLesion, pose: _Pose, transform: sitk.AffineTransform, target: Volume, box: tuple[slice, slice, slice]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(fraction, weight, adc_factor, s0_factor), float64 (nk, nj, ni) of ``box``, on the target grid.

    Averaged over ``SLICE_SUBSAMPLES`` positions along the slice normal within each target
    voxel when the target's slices are thicker than the source's finest spacing (a thick
    slice gets the partial volume of the slab); the factors are averaged, as the slab mixes
    the tissues' signals.
    """
    thickness = target.spacing_mm[2]
    subsamples = SLICE_SUBSAMPLES if thickness > 1.01 * min(lesion.fraction.spacing_mm) else 1
    normal = target.direction[:, 2]
    start_ijk = np.asarray([box[2].start, box[1].start, box[0].start], dtype=np.float64)
    size = [int(box[a].stop - box[a].start) for a in (2, 1, 0)]
    images = {name: getattr(lesion, name).to_sitk() for name in ("fraction", "r_adc", "r_s0", "outside_mm")}
    defaults = {"fraction": 0.0, "r_adc": 1.0, "r_s0": 1.0, "outside_mm": _FAR_MM}
    fraction = weight = adc_factor = s0_factor = 0.0
    for step in range(subsamples):
        offset = ((step + 0.5) / subsamples - 0.5) * thickness
        origin = target.index_to_lps(start_ijk) + offset * normal
        sampled = {}
        for name, image in images.items():
            out = sitk.Resample(image, size, transform, sitk.sitkLinear, tuple(float(o) for o in origin), target.spacing_mm,
                                tuple(target.direction.flatten()), defaults[name], sitk.sitkFloat32)
            sampled[name] = sitk.GetArrayFromImage(out).astype(np.float64)
        w = np.clip(1.0 - sampled["outside_mm"] / pose.ramp_mm, 0.0, 1.0)
        fraction = fraction + sampled["fraction"]
        weight = weight + w
        adc_factor = adc_factor + 1.0 + w * (sampled["r_adc"] - 1.0)
        s0_factor = s0_factor + 1.0 + w * (sampled["r_s0"] - 1.0)
    return fraction / subsamples, weight / subsamples, adc_factor / subsamples, s0_factor / subsamples


def paste_lesions(
    study: Study,
    label: np.ndarray,
    lesions: Sequence[CarvedLesion],
    rng: np.random.Generator,
    count: int,
    *,
    brain: np.ndarray | None = None,
    hemisphere: np.ndarray | None = None,
    mirror_probability: float = 0.5,
    max_rotation_deg: float = 20.0,
    scale_range: tuple[float, float] = (0.8, 1.25),
    ramp_mm: tuple[float, float] = (1.0, 4.0),
    margin_voxels: int = 2,
) -> tuple[Study, np.ndarray, list[dict[str, Any]]]:
    """``count`` carved lesions, drawn at random, pasted into ``study`` through its signals.

    A lesion is drawn by first drawing its source case (uniformly), then one of that case's
    components (uniformly), so a case with many small satellites does not crowd out the other.

    Args:
        study: the target (ADC in 10⁻³ mm²/s); never resampled.
        label: bool (nk, nj, ni), the target's existing lesion label on the DWI grid.
        lesions: from :func:`carve_lesions`.
        rng: all randomness comes from it.
        count: lesions to paste (each given up after ``MAX_TRIES`` placements that put less
            than ``MIN_ALLOWED_SHARE`` of the weight in allowed tissue, or that label no voxel:
            a pasted signal always comes with its label).
        brain: bool (nk, nj, ni), the target's brain; default nonzero DWI and ADC.
        hemisphere: int (nk, nj, ni), 1 left, 2 right, 0 unknown: when given, a lesion
            centred in one hemisphere counts the other as disallowed tissue (a territorial
            infarct does not cross the midline); default: no such rule.
        mirror_probability, max_rotation_deg, scale_range, ramp_mm: the pose and the CarveMix
            ramp (mm outside the lesion over which the weight falls to 0).
        margin_voxels: pasted signal stays farther than this from any existing label.

    Returns:
        (study, label, drawn): the new study (same grid, ADC in 10⁻³ mm²/s, eADC recomputed),
        bool label (existing ∪ pasted fraction ≥ 0.5 in allowed tissue), and one dict per
        lesion: source, component, source_ml, pasted_ml, pose, placed (False if given up).
    """
    from LambdaSegmentLib.synthesis.lesion_signal import apply_lesion_signal

    if not lesions:
        raise ValueError("no carved lesions to paste")
    target = study.dwi
    dwi = np.array(target.array, dtype=np.float32)  # copies: written below, the input stays as it is
    adc = np.array(study.adc.array, dtype=np.float32)
    brain = (dwi > 0) & (adc > 0) if brain is None else np.asarray(brain, dtype=bool)
    label = np.asarray(label, dtype=bool).copy()
    sources = sorted({lesion.source for lesion in lesions})
    by_source = {name: [lesion for lesion in lesions if lesion.source == name] for name in sources}
    drawn: list[dict[str, Any]] = []
    for _ in range(int(count)):
        group = by_source[sources[int(rng.integers(len(sources)))]]
        lesion = group[int(rng.integers(len(group)))]
        # recomputed per lesion: a lesion pasted before is an existing label for the next one
        allowed = lesion_free_tissue(brain, adc, label, margin_voxels)
        candidates = np.flatnonzero(allowed)
        record: dict[str, Any] = {"source": lesion.source, "component": lesion.component,
                                  "source_ml": lesion.volume_ml, "pasted_ml": 0.0, "placed": False}
        for _try in range(MAX_TRIES if candidates.size else 0):
            pose = _Pose(
                mirror=bool(rng.random() < mirror_probability),
                angles_deg=tuple(float(a) for a in rng.uniform(-max_rotation_deg, max_rotation_deg, 3)),
                scale=float(rng.uniform(*scale_range)),
                ramp_mm=float(rng.uniform(*ramp_mm)),
            )
            centre_kji = np.unravel_index(candidates[int(rng.integers(candidates.size))], allowed.shape)
            centre = target.index_to_lps(np.asarray(centre_kji[::-1], dtype=np.float64))
            transform = _target_to_source(lesion, pose, centre)
            box = _target_box(lesion, transform, target)
            if box is None:
                continue
            fraction, weight, adc_factor, s0_factor = _resample_posed(lesion, pose, transform, target, box)
            inside = allowed[box]
            if hemisphere is not None and hemisphere[centre_kji] > 0:
                inside = inside & (hemisphere[box] != 3 - hemisphere[centre_kji])  # not the other side
            if weight.sum() <= 0 or weight[inside].sum() < MIN_ALLOWED_SHARE * weight.sum():
                continue
            pasted = inside & (fraction >= 0.5)
            if not pasted.any():
                # a satellite thinner than half a thick slice here: its signal would be an
                # unlabelled bright spot, teaching the model to ignore faint emboli; try elsewhere
                continue
            # factors exactly 1 outside allowed tissue and the ROI: those voxels stay bit-identical
            keep = inside & (weight > 0)
            adc_factor = np.where(keep, adc_factor, 1.0).astype(np.float32)
            s0_factor = np.where(keep, s0_factor, 1.0).astype(np.float32)
            dwi[box], adc[box] = apply_lesion_signal(dwi[box], adc[box], study.b_value, adc_factor, s0_factor)
            label[box] |= pasted
            record.update(pasted_ml=float(pasted.sum()) * target.voxel_volume_mm3 / 1000.0, placed=True,
                          pose=dataclasses.asdict(pose), centre_lps=[float(c) for c in centre])
            break
        drawn.append(record)
    # canonical units already: no re-detection (a pasted infarct could fool the brain median)
    new_adc = study.adc.with_array(adc)
    new = dataclasses.replace(study, dwi=target.with_array(dwi), adc=new_adc, eadc=eadc_from_adc(new_adc, study.b_value))
    return new, label, drawn


def territory_hemisphere(territory: np.ndarray) -> np.ndarray:
    """int8 (nk, nj, ni): 1 left, 2 right, 0 elsewhere, from JHU arterial territory labels
    (``synthesis.template.TERRITORY_NAMES``: odd 1-29 left, even 2-30 right; ventricles 31-32 neither)."""
    territory = np.asarray(territory)
    return np.where((territory >= 1) & (territory <= 30), 2 - territory % 2, 0).astype(np.int8)


def prepare_carved_synthetic(
    seed: int, preprocessing: Mapping[str, Any], ranges: Mapping[str, Any], lesions: Sequence[CarvedLesion],
    rng: np.random.Generator,
) -> PreparedCase:
    """Synthetic study ``seed`` with 1-3 carved lesions pasted in (before preprocessing) → :class:`PreparedCase`.

    The generator's own infarcts keep their label; the target's brain is the generator's
    tissue map (CSF included: ``paste_lesions`` keeps out of it by its ADC); its arterial
    territories keep each pasted lesion in one hemisphere.
    """
    study, synthetic = load_synthetic(seed, ranges)
    brain = np.asarray(synthetic.tissue.array) > 0
    count = int(rng.choice(CARVED_PER_STUDY))
    pasted, label, _drawn = paste_lesions(study, np.asarray(synthetic.mask.array) > 0, lesions, rng, count, brain=brain,
                                          hemisphere=territory_hemisphere(np.asarray(synthetic.territory.array)))
    mask = synthetic.mask.with_array(label.astype(np.uint8))
    return prepare_labelled(f"synthetic-{seed}-carved", pasted, mask, preprocessing)
