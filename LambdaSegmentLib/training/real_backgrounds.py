"""Real studies as training backgrounds: synthetic infarcts injected through the signal equation.

A handful of real labelled studies, served as plain windows, is memorised (issue 13: a
quick trial reached Dice 0.85 on its training case and got worse on unseen scans). Served
as *backgrounds*, each real study becomes thousands of different training studies whose
real edges, rims and artefacts are negatives every time:

1. synthetic infarcts are grown on the MNI152 template inside an arterial territory (the
   generator's own ``synthesis.lesions.draw_lesion``) and brought onto the study through an
   affine registration of the template's brain mask to the study's brain mask (once per
   study);
2. they are written into the study's signals, not painted on its image: with
   S0 = DWI · exp(b · ADC), the lesion lowers the ADC (``synthesis.lesion_signal``) and
   raises S0 (the generator's one lesion model), and DWI = S0 · exp(−b · ADC) is recomputed
   (``synthesis.lesion_signal.apply_lesion_signal``), so a lesion on a bright rim is as
   bright as the rim makes it;
3. only lesion-free brain tissue receives them: never outside the brain, never in CSF
   (ADC ≥ 1.6×10⁻³ mm²/s), never within ``margin_voxels`` of a real lesion; the real
   lesions keep their expert label, the injected ones get theirs (lesion fraction ≥ 0.5, or
   ``label_fraction``: the synthesis option of the same name, issue 13's rule 107); with
   ``surface_pull`` (the synthesis option ``lesion_surface_pull``, rule 116) they are drawn
   nearer the brain's surface, as the generator draws its own;
4. heavy augmentation follows on the model grid (:mod:`.window_augmentation`).

Windows are cut around a lesion (``lesion_probability``) or anywhere. With
``rim_probability`` > 0 that share of windows is instead cut around one of the background's
own bright edge rims (:func:`bright_rim_voxels`: unlabelled voxels at least twice the brain's
median DWI within 8 mm of the brain's edge in-plane), so the susceptibility and partial-volume
rims of the real case are seen as negatives far more often than lesion-centred windows show
them (issue 13, rule 81: those rims are what the folds mark on the other case). With
``real_lesion_probability`` > 0 that share of windows is cut around one of the background's own
expert lesions, each lesion (26-connected component of the expert mask on the model grid) as
likely as any other whatever its size, where lesion-centred windows pick a labelled voxel. It
changes less than that suggests: the recipe's windows already show 6-8 of the two real cases'
expert lesions each, and the option raises that by 5-15 % at 0.3 and 23-36 % at 1.0
(``benchmarks/real_lesion_window_exposure.py``, issue 13's diagnostic after rule 129). With
``faint_probability`` > 0 that share of studies writes its infarcts with the faint lesion
signal (the synthesis's ``faint_*`` ranges, :func:`..synthesis.generator.faint_signal_ranges`:
DWI 1.25-1.7x in the core, a short grading reach), as real embolic dots often are; the
injected shapes and every other draw of the study stay those without the option (issue 13,
rule 87). With ``whole_territory_probability`` > 0 that share of studies gets one whole-territory
infarct instead of its 0-3 (as the generator's ``massive_infarct_probability``: 100-300 mL on
the template over one major artery's territories on one side, its bulk ~3x the brain's DWI),
so that a fold whose real case holds only small lesions still sees large ones on real texture
(issue 13, rule 88: a stage 2 of 16 real-background studies may otherwise draw none over 25 mL);
``whole_territory_per_epoch`` makes that a quota of exactly K studies per epoch, as a share leaves
some training seeds far fewer such studies than others (rule 96; :func:`whole_territory_studies`).
With ``bright_field_probability`` > 0 that share of windows is brightened, after the
augmentation, by one broad gain field with the ADC unchanged (:func:`.augmentation.add_bright_field`:
coil bias, bright cortex, T2 shine-through), unlabelled (rule 100). With
``bright_cortex_probability`` > 0 that share of studies has its grey matter's S0 raised by 10-60 %
with the ADC unchanged (:func:`brighten_grey_matter`), as a bright cortical ribbon of normal
diffusion, which the real cases lack and the stage-2 networks marked (rule 101). With
``dimming_probability`` > 0 that share of studies has the background's own small expert lesions
dimmed towards their ring (:func:`dim_real_lesions`), so that the fold's real satellites are also
seen as faint as the other case's emboli, with their real shapes on real texture (rule 130).

Training-time only (it needs the template, the atlas and the generator).
"""

from __future__ import annotations

from dataclasses import dataclass
import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np
import SimpleITK as sitk
import torch
from scipy import ndimage
from torch.utils.data import Dataset

from LambdaSegmentLib.io import Study, Volume, load_study, read_volume
from LambdaSegmentLib.io.units import eadc_from_adc
from LambdaSegmentLib.metrics.thick_slices import majority_slabs, thick_slice_study
from LambdaSegmentLib.preprocessing import find_slice_axis

from .augmentation import add_bright_field
from .cases import LabelledCase
from .prepared import PreparedCase, prepare_with_masks
from .window_augmentation import DWI_MAX, elastic_warp
from .windows import random_window, window_holding

CSF_ADC = 1.6  # 10⁻³ mm²/s: at or above this a voxel is CSF, never infarcted here
#: How far (6-connected voxel steps) injected infarcts keep from a real lesion.
MARGIN_VOXELS = 2
#: A study's number of injected infarcts is drawn uniformly from these (so 1 twice as often).
INJECTED_COUNTS = (0, 1, 1, 2, 3)
#: A bright edge rim (:func:`bright_rim_voxels`): within this in-plane depth below the brain's
#: edge, at least this many times the brain's median DWI: the skull-base zone and brightness of
#: ``benchmarks/skull_base_marks.py``, without its inferior-slices limit (rims lie at the
#: occipital poles too).
RIM_DEPTH_MM = 8.0
RIM_DWI = 2.0
#: DWI channel normalisations in brain-median units, on which :data:`RIM_DWI` can be read.
RIM_NORMALISATIONS = frozenset({"brain_median", "brain_median_clip4"})
#: The faint-or-not draw of a study comes from its own generator, seeded (base seed, epoch,
#: study, this), so that the option leaves every other draw of the study unchanged.
FAINT_STREAM = 20261127
#: The same for the whole-territory-or-not draw: studies that do not draw one stay as before.
WHOLE_TERRITORY_STREAM = 20261128
#: The same for the bright-cortex draw (whether, and by how much): other draws stay as before.
BRIGHT_CORTEX_STREAM = 20261129
#: The same for a window's elastic draw (whether, and its field): every other draw of the
#: window, the bright field's included, stays as without it.
ELASTIC_STREAM = 20261130
#: The same for a window's real-lesion draw (whether, which real lesion, where in the window):
#: every window that does not draw one stays as without the option.
REAL_LESION_STREAM = 20261206
#: The grey matter's S0 gain of a bright-cortex study, drawn uniformly: the two real cases'
#: ribbon is no brighter than their deep tissue, where the generator's cortical S0 reaches 1.8 x
#: white matter's (issue 13, rule 101).
BRIGHT_CORTEX_GAIN = (0.1, 0.6)
#: The dimming draw of a study (whether, and its factor) comes from a generator of its own, so
#: every other draw of the study stays as without it (issue 13, rule 130).
DIMMING_STREAM = 20261207
#: A dimmed study's factor on its small lesions' contrast, drawn uniformly (1: unchanged).
DIMMING_FACTOR = (0.4, 0.9)
#: Dimming stops at this DWI over the ring (medians): 0001's emboli of 5-25 voxels are 1.34 x
#: their ring, the faintest expert-labelled lesions known here (benchmarks/lesion_contrast.py),
#: so no lesion is taught fainter than a real one.
DIMMING_FLOOR = 1.3
#: Only lesions up to this volume are dimmed: the satellites and emboli, not a territorial
#: infarct (a whole infarct at 1.3 x its ring is no lesion the two cases show).
DIMMING_MAX_ML = 0.5
#: The ring a lesion is dimmed towards: brain voxels within this many voxel steps (26-connected)
#: of it, not labelled, not CSF.
DIMMING_RING_VOXELS = 2


@dataclass(frozen=True)
class RealBackground:
    """One real labelled study ready for injection.

    Attributes:
        name: the case's name.
        study: the study as loaded (ADC in 10⁻³ mm²/s).
        lesion: bool (nk, nj, ni), the expert mask on the DWI grid.
        brain: bool (nk, nj, ni), the study's brain (nonzero DWI and ADC).
        template_ijk: float32 (3, nk, nj, ni), the MNI152 template voxel index of every voxel.
    """

    name: str
    study: Study
    lesion: np.ndarray
    brain: np.ndarray
    template_ijk: np.ndarray


def template_index_map(volume: Volume, brain: np.ndarray) -> np.ndarray:
    """float32 (3, nk, nj, ni): template voxel index (x, y, z) of every voxel of ``volume``.

    Affine registration of the template brain mask (moving) to ``brain`` (fixed); the
    transform is turned into a displacement field on the study's grid (no per-point Python).
    """
    from LambdaSegmentLib.synthesis.template import _register_masks, _template_image, load_tissue_template

    template = load_tissue_template()
    moving = _template_image(((template.gm + template.wm + template.csf) > 0.5).astype(np.float32), template.affine)
    fixed = sitk.Cast(volume.with_array(np.asarray(brain, dtype=np.float32)).to_sitk(), sitk.sitkFloat32)
    transform = _register_masks(fixed, moving)
    field = sitk.TransformToDisplacementField(
        transform, sitk.sitkVectorFloat64, fixed.GetSize(), fixed.GetOrigin(), fixed.GetSpacing(), fixed.GetDirection()
    )
    displacement = sitk.GetArrayFromImage(field)  # (nk, nj, ni, 3) LPS mm
    kji = np.indices(brain.shape, dtype=np.float64)
    lps = volume.index_to_lps(np.stack([kji[2], kji[1], kji[0]], axis=-1)) + displacement
    ras = lps * np.asarray([-1.0, -1.0, 1.0])
    to_index = np.linalg.inv(template.affine)
    ijk = ras @ to_index[:3, :3].T + to_index[:3, 3]
    return np.moveaxis(ijk, -1, 0).astype(np.float32)


def load_background(case: LabelledCase) -> RealBackground:
    """Read a labelled case (``BadInputError`` naming the file on bad input) and register the template to it."""
    study = load_study(dwi=case.dwi, adc=case.adc, eadc=case.eadc)
    lesion = np.asarray(read_volume(case.mask).array) != 0
    brain = (np.asarray(study.dwi.array) > 0) & (np.asarray(study.adc.array) > 0)
    return RealBackground(case.name, study, lesion, brain, template_index_map(study.dwi, brain))


def lesion_free_tissue(brain: np.ndarray, adc: np.ndarray, lesion: np.ndarray, margin_voxels: int) -> np.ndarray:
    """bool (nk, nj, ni): where a new lesion may go: brain, not CSF (ADC < ``CSF_ADC``, ADC in
    10⁻³ mm²/s), and more than ``margin_voxels`` (6-connected steps) from any ``lesion`` voxel."""
    near = ndimage.binary_dilation(lesion, iterations=margin_voxels) if margin_voxels > 0 else lesion  # 0 iterations would dilate to convergence
    return brain & (adc < CSF_ADC) & ~near


def inject_infarcts(
    background: RealBackground,
    rng: np.random.Generator,
    *,
    count: int,
    volume_range_ml: tuple[float, float] = (0.05, 300.0),
    margin_voxels: int = MARGIN_VOXELS,
    signal: Mapping[str, Any] | None = None,
    whole_territory: bool = False,
    label_fraction: float = 0.5,
    surface_pull: float = 0.0,
) -> tuple[Study, np.ndarray, list[dict[str, Any]]]:
    """``count`` synthetic infarcts written into the background's signals.

    With ``whole_territory`` they are whole-territory territorial infarcts (the generator's
    :data:`..synthesis.lesions.WHOLE_TERRITORY_ML` on the template, every level-1 territory of
    the drawn one's major artery on its side), their core DWI ratio and older share drawn from
    :data:`..synthesis.generator.WHOLE_TERRITORY_SIGNAL`'s ranges (the generator's floors for
    them; these win over ``signal``).

    ``signal`` overrides :data:`..synthesis.lesion_signal.LESION_SIGNAL_DEFAULTS` for all of
    them (e.g. :func:`..synthesis.generator.faint_signal_ranges`); (lo, hi) pairs in place of
    the defaults' pairs leave the random stream as without them.

    ``label_fraction``: an injected voxel is labelled where its lesion fraction is at least this
    (the synthesis option of the same name; the signal is written wherever the fraction is > 0).

    ``surface_pull``: the shapes' pull towards the brain's surface (the synthesis option
    ``lesion_surface_pull``, :func:`..synthesis.lesions.draw_lesion`); reads no random number.

    Returns:
        (study, label, drawn): the new study (same grid, ADC in 10⁻³ mm²/s, eADC
        recomputed), the bool (nk, nj, ni) label (real ∪ injected) and what was drawn.
    """
    from LambdaSegmentLib.synthesis.generator import WHOLE_TERRITORY_SIGNAL
    from LambdaSegmentLib.synthesis.lesion_signal import apply_lesion_signal, lesion_signal
    from LambdaSegmentLib.synthesis.lesions import choose_kind, draw_lesion, sample_volume_ml, sample_whole_territory_ml
    from LambdaSegmentLib.synthesis.template import load_territories, load_tissue_template

    study = background.study
    dwi = np.asarray(study.dwi.array, dtype=np.float64)
    adc = np.asarray(study.adc.array, dtype=np.float64)
    allowed = lesion_free_tissue(background.brain, adc, background.lesion, margin_voxels)
    template = load_tissue_template()
    territories = load_territories()
    points = background.template_ijk.reshape(3, -1)
    fraction = np.zeros(dwi.shape, dtype=np.float32)
    drawn: list[dict[str, Any]] = []
    for _ in range(count):
        if whole_territory:
            kind = "territorial"
            volume_ml = sample_whole_territory_ml(rng, volume_range_ml)
        else:
            kind = choose_kind(rng, volume_range_ml)
            volume_ml = sample_volume_ml(rng, kind, volume_range_ml)
        field, plan = draw_lesion(rng, kind, volume_ml, template.gm, template.wm, territories, whole_territory=whole_territory,
                                  surface_pull=surface_pull)
        fraction = np.maximum(fraction, field.sample(points).reshape(dwi.shape))
        drawn.append({"kind": plan.kind, "template_volume_ml": plan.volume_ml, "territories": plan.territories})
    fraction = np.where(allowed, fraction, 0.0).astype(np.float32)
    injected = fraction >= label_fraction  # the label; the signal is written wherever the fraction is > 0
    if fraction.any():
        # spacing along the array axes (k, j, i); factors are exactly 1 where the fraction is 0
        overrides = {**(signal or {}), **(WHOLE_TERRITORY_SIGNAL if whole_territory else {}), "b_value": study.b_value}
        adc_factor, s0_factor = lesion_signal(rng, fraction, study.dwi.spacing_mm[::-1], **overrides)
        dwi, adc = apply_lesion_signal(dwi, adc, study.b_value, adc_factor, s0_factor)
    # The unit is known (canonical): no re-detection, which a large injected infarct in a
    # small brain could fool by lowering the brain's median ADC.
    new_adc = study.adc.with_array(adc.astype(np.float32))
    new = dataclasses.replace(study, dwi=study.dwi.with_array(dwi.astype(np.float32)), adc=new_adc,
                              eadc=eadc_from_adc(new_adc, study.b_value))
    return new, background.lesion | injected, drawn


def brighten_grey_matter(background: RealBackground, study: Study, gain: float) -> Study:
    """``study`` (on ``background``'s grid) with its grey matter's S0 raised by ``gain`` and its ADC unchanged.

    DWI × (1 + gain · GM fraction) inside the background's brain, the GM fraction the MNI152
    template's (cortex and deep grey matter) at each voxel's registered template position, so
    the cortical ribbon and deep grey matter brighten as a longer TE or another scanner makes
    them; with DWI = S0 · exp(−b · ADC) and the ADC (and eADC) kept, they are bright tissue of
    normal diffusion, not infarct. Injected and real lesions on grey matter brighten with it.
    """
    from LambdaSegmentLib.synthesis.fields import sample_channels
    from LambdaSegmentLib.synthesis.template import load_tissue_template

    grey = sample_channels(torch.from_numpy(np.ascontiguousarray(load_tissue_template().gm))[None],
                           background.template_ijk.reshape(3, -1))[0].reshape(background.brain.shape)
    dwi = np.asarray(study.dwi.array, dtype=np.float32)
    brightened = np.where(background.brain, dwi * (1.0 + gain * np.clip(grey, 0.0, 1.0)), dwi).astype(np.float32)
    return dataclasses.replace(study, dwi=study.dwi.with_array(brightened))


def dim_real_lesions(study: Study, lesion: np.ndarray, label: np.ndarray, brain: np.ndarray, factor: float) -> Study:
    """``study`` with each small component of ``lesion`` moved towards its ring in log DWI and ADC.

    Per 26-connected component of ``lesion`` (bool (nk, nj, ni), the real expert lesions) of at
    most :data:`DIMMING_MAX_ML`: its ring is the brain within :data:`DIMMING_RING_VOXELS` voxels,
    outside ``label`` (every labelled voxel, real and injected) and CSF. With C the median
    contrast over the component (log DWI minus the ring's median; ADC minus the ring's median, in
    10⁻³ mm²/s) and k = max(``factor``, ln :data:`DIMMING_FLOOR` / C of log DWI), a voxel of
    contrast c moves by (1 − k) · clip(c / C, 0, 1) · C towards the ring: the component's median
    contrast becomes k · C (no fainter than the floor on DWI), the voxels above its median keep
    their texture and noise, the fainter edge voxels shrink in proportion and never cross to the
    other side. log DWI and ADC move together, so log S0 = log DWI + b · ADC moves by the same
    rule and DWI = S0 · exp(−b · ADC) still holds. A lesion already at or under the floor, or
    without a ring, is left alone; so is everything outside ``lesion``. The label is unchanged.
    The eADC is recomputed from the new ADC.
    """
    dwi = np.asarray(study.dwi.array, dtype=np.float64)
    adc = np.asarray(study.adc.array, dtype=np.float64).copy()
    log_dwi = np.log(np.maximum(dwi, 1e-6))
    components, count = ndimage.label(lesion & brain, structure=np.ones((3, 3, 3), dtype=bool))
    voxel_ml = study.dwi.voxel_volume_mm3 / 1000.0
    sizes = np.bincount(components.ravel(), minlength=count + 1)
    floor = float(np.log(DIMMING_FLOOR))
    reach = DIMMING_RING_VOXELS
    for number, box in enumerate(ndimage.find_objects(components), start=1):
        if box is None or sizes[number] * voxel_ml > DIMMING_MAX_ML:
            continue
        box = tuple(slice(max(0, b.start - reach), min(n, b.stop + reach)) for b, n in zip(box, lesion.shape))
        component = components[box] == number
        ring = (ndimage.binary_dilation(component, structure=np.ones((3, 3, 3), dtype=bool), iterations=reach)
                & brain[box] & ~label[box] & (adc[box] < CSF_ADC))
        if not ring.any():
            continue
        local_log, local_adc = log_dwi[box], adc[box]
        contrast = float(np.median(local_log[component]) - np.median(local_log[ring]))
        if contrast <= floor:
            continue
        k = max(float(factor), floor / contrast)
        for values in (local_log, local_adc):  # views into log_dwi and adc
            ring_median = float(np.median(values[ring]))
            median_contrast = float(np.median(values[component])) - ring_median
            if median_contrast == 0.0:
                continue
            c = values[component] - ring_median
            values[component] = values[component] - (1.0 - k) * np.clip(c / median_contrast, 0.0, 1.0) * median_contrast
    new_adc = study.adc.with_array(adc.astype(np.float32))
    new_dwi = np.where(dwi > 0, np.exp(log_dwi), dwi)
    return dataclasses.replace(study, dwi=study.dwi.with_array(new_dwi.astype(np.float32)), adc=new_adc,
                               eadc=eadc_from_adc(new_adc, study.b_value))


def bright_rim_voxels(case: PreparedCase, *, dwi_channel: int, in_plane_spacing_mm: float,
                      depth_mm: float = RIM_DEPTH_MM, brightness: float = RIM_DWI) -> np.ndarray:
    """(n, 3) int (slice, row, column) model-grid voxels of ``case``'s bright edge rims.

    A rim voxel is brain (DWI channel > 0: a real background is skull-stripped, 0 outside),
    unlabelled, within ``depth_mm`` of the brain's edge in its own slice, and at least
    ``brightness`` on the DWI channel, which the ``brain_median_clip4`` normalisation puts in
    brain-median units. The depth is in-plane only: a thick slab's neighbours lie 6 mm away,
    and the rims are in-plane structures.

    Args:
        case: a prepared real-background study (channels (c, t, h, w), mask (t, h, w)).
        dwi_channel: index of the DWI channel in ``case.channels``.
        in_plane_spacing_mm: the model grid's in-plane spacing (the manifest's preprocessing).
    """
    dwi = case.channels[dwi_channel]
    brain = dwi > 0
    padded = np.pad(brain, ((0, 0), (1, 1), (1, 1)))  # the field of view's border is an edge too
    depth = np.stack([ndimage.distance_transform_edt(plane, sampling=in_plane_spacing_mm) for plane in padded])
    rim = brain & (depth[:, 1:-1, 1:-1] <= depth_mm) & (dwi >= brightness) & (case.mask == 0)
    return np.argwhere(rim)


def real_lesion_voxels(real: np.ndarray) -> list[np.ndarray]:
    """One int (n, 3) array of (slice, row, column) voxels per 26-connected component of the bool
    (t, h, w) ``real`` (the background's expert lesions on the model grid), in label order."""
    labels, count = ndimage.label(real, structure=np.ones((3, 3, 3), dtype=bool))
    if count == 0:
        return []
    order = np.argsort(labels, axis=None, kind="stable")
    flat = labels.ravel()[order]
    starts = np.searchsorted(flat, np.arange(1, count + 2))
    coordinates = np.stack(np.unravel_index(order, labels.shape), axis=1)
    return [coordinates[starts[k]:starts[k + 1]] for k in range(count)]


def whole_territory_studies(base_seed: int, epoch: int, studies: int, *, probability: float = 0.0,
                            per_epoch: int = 0) -> frozenset[int]:
    """Which of an epoch's ``studies`` real-background studies inject one whole-territory infarct.

    With ``per_epoch`` = K > 0 exactly K of them (drawn from ``default_rng([base_seed, epoch,
    WHOLE_TERRITORY_STREAM])``); otherwise each with ``probability`` (from ``default_rng([base_seed,
    epoch, study, WHOLE_TERRITORY_STREAM])``; at 0 nothing is drawn).
    """
    if per_epoch > 0:
        chosen = np.random.default_rng([base_seed, epoch, WHOLE_TERRITORY_STREAM]).choice(studies, size=per_epoch, replace=False)
        return frozenset(int(s) for s in chosen)
    if probability <= 0:
        return frozenset()
    return frozenset(s for s in range(studies)
                     if np.random.default_rng([base_seed, epoch, s, WHOLE_TERRITORY_STREAM]).random() < probability)


class RealBackgroundWindows(Dataset):
    """``studies`` augmented real-background studies per epoch, ``windows_per_study`` windows each.

    Study ``s`` of epoch ``e`` draws its background, its 0-3 injected infarcts and its
    acquisition (native, or 3 slices averaged into a thick slab with probability
    ``thick_probability``) from ``default_rng([base_seed, e, s])``; windows are cut as from
    synthetic studies and augmented by ``augment`` (a window, rng → window function); with
    ``rim_probability`` > 0 that share of windows holds a :func:`bright_rim_voxels` voxel of the
    study instead (its window rng draws that choice first; at 0 nothing extra is drawn, so the
    windows are exactly those without the option). With ``faint_probability`` > 0 that share of
    studies (drawn from ``default_rng([base_seed, e, s, FAINT_STREAM])``) writes its infarcts
    with ``faint_signal`` (lesion-signal ranges: the synthesis's faint ones); at 0 nothing is
    drawn. With ``whole_territory_probability`` > 0 that share of studies (drawn from
    ``default_rng([base_seed, e, s, WHOLE_TERRITORY_STREAM])``) injects one whole-territory
    infarct in place of its 0-3 (never faint); at 0 nothing is drawn. ``whole_territory_per_epoch``
    = K > 0 instead makes exactly K of each epoch's studies whole-territory ones (which K is drawn
    from ``default_rng([base_seed, e, WHOLE_TERRITORY_STREAM])``): a quota, so that no training
    seed goes without them (issue 13, rule 96). With ``bright_field_probability`` > 0 that share
    of windows gets :func:`.augmentation.add_bright_field` after ``augment`` (its window rng draws
    that choice last; at 0 nothing extra is drawn). With ``bright_cortex_probability`` > 0 that
    share of studies (drawn, with the gain in :data:`BRIGHT_CORTEX_GAIN`, from
    ``default_rng([base_seed, e, s, BRIGHT_CORTEX_STREAM])``) has its grey matter's S0 raised
    after the injection (:func:`brighten_grey_matter`); at 0 nothing is drawn. With
    ``elastic_probability`` > 0 that share of windows is bent by
    :func:`.window_augmentation.elastic_warp` after ``augment`` and before the bright field
    (drawn from ``default_rng([base_seed, e, s, window, ELASTIC_STREAM])``); at 0 nothing is
    drawn. With ``real_lesion_probability`` > 0 that share of windows (drawn, with the lesion and
    the window's place around it, from ``default_rng([base_seed, e, s, window, REAL_LESION_STREAM])``)
    holds a voxel of one of the background's expert lesions, the lesion drawn uniformly among its
    26-connected components on the model grid (those left by a thick slab's majority); the rim and
    lesion draws are then skipped, and at 0 nothing is drawn. With ``dimming_probability`` > 0 that
    share of studies (drawn, with the factor in :data:`DIMMING_FACTOR`, from ``default_rng([base_seed,
    e, s, DIMMING_STREAM])``) has its background's small expert lesions dimmed after the injection
    and the bright cortex (:func:`dim_real_lesions`); at 0 nothing is drawn. Consecutive items
    share a study (a one-study cache), so keep it unshuffled.
    """

    def __init__(
        self,
        backgrounds: Sequence[RealBackground],
        *,
        studies: int,
        preprocessing: Mapping[str, Any],
        windows_per_study: int,
        window_slices: int,
        size_hw: tuple[int, int],
        base_seed: int,
        epoch: int,
        lesion_probability: float = 0.7,
        thick_probability: float = 0.25,
        augment: Any = None,
        rim_probability: float = 0.0,
        dwi_channel: int | None = None,
        faint_probability: float = 0.0,
        faint_signal: Mapping[str, Any] | None = None,
        whole_territory_probability: float = 0.0,
        whole_territory_per_epoch: int = 0,
        bright_field_probability: float = 0.0,
        bright_cortex_probability: float = 0.0,
        label_fraction: float = 0.5,
        elastic_probability: float = 0.0,
        surface_pull: float = 0.0,
        real_lesion_probability: float = 0.0,
        dimming_probability: float = 0.0,
    ) -> None:
        if not backgrounds:
            raise ValueError("no real backgrounds")
        for name, share in (("rim_probability", rim_probability), ("faint_probability", faint_probability),
                            ("whole_territory_probability", whole_territory_probability),
                            ("bright_field_probability", bright_field_probability),
                            ("bright_cortex_probability", bright_cortex_probability),
                            ("elastic_probability", elastic_probability),
                            ("real_lesion_probability", real_lesion_probability),
                            ("dimming_probability", dimming_probability)):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {share}")
        if not 0 <= whole_territory_per_epoch <= studies:
            raise ValueError(f"whole_territory_per_epoch must be in [0, studies = {studies}], got {whole_territory_per_epoch}")
        if whole_territory_per_epoch > 0 and whole_territory_probability > 0:
            raise ValueError("give whole_territory_probability or whole_territory_per_epoch, not both")
        if bright_field_probability > 0 and dwi_channel is None:
            raise ValueError("bright_field_probability > 0 needs the DWI channel's index (dwi_channel)")
        if faint_probability > 0 and not faint_signal:
            raise ValueError("faint_probability > 0 needs faint_signal: the lesion-signal ranges of a faint lesion")
        if rim_probability > 0 and dwi_channel is None:
            raise ValueError("rim_probability > 0 needs the DWI channel's index (dwi_channel)")
        for name, share, why in (("elastic_probability", elastic_probability, "the field's scale is in mm"),
                                 ("rim_probability", rim_probability, "the rims' depth is measured on it")):
            if share > 0 and not preprocessing.get("in_plane_spacing_mm"):
                raise ValueError(f"{name} > 0 needs a fixed model grid (preprocessing in_plane_spacing_mm): {why}")
        if rim_probability > 0 and dict(preprocessing.get("normalization", {})).get("dwi") not in RIM_NORMALISATIONS:
            raise ValueError(f"rim_probability > 0 needs the DWI channel in brain-median units (normalization "
                             f"{sorted(RIM_NORMALISATIONS)}): the rims' brightness is read on it")
        self.backgrounds = list(backgrounds)
        self.studies, self.windows_per_study = int(studies), int(windows_per_study)
        self.preprocessing = dict(preprocessing)
        self.window_slices, self.size_hw = window_slices, size_hw
        self.base_seed, self.epoch = int(base_seed), int(epoch)
        self.lesion_probability, self.thick_probability = float(lesion_probability), float(thick_probability)
        self.augment = augment
        self.rim_probability, self.dwi_channel = float(rim_probability), dwi_channel
        self.faint_probability, self.faint_signal = float(faint_probability), dict(faint_signal or {})
        self.whole_territory_probability = float(whole_territory_probability)
        self.whole_territory_per_epoch = int(whole_territory_per_epoch)
        self.bright_field_probability = float(bright_field_probability)
        self.bright_cortex_probability = float(bright_cortex_probability)
        self.elastic_probability = float(elastic_probability)
        self.real_lesion_probability = float(real_lesion_probability)
        self.dimming_probability = float(dimming_probability)
        if not 0.0 < label_fraction <= 1.0:
            raise ValueError(f"label_fraction must be in (0, 1], got {label_fraction}")
        self.label_fraction = float(label_fraction)
        if surface_pull < 0.0:
            raise ValueError(f"surface_pull must be >= 0, got {surface_pull}")
        self.surface_pull = float(surface_pull)
        self._cache: tuple[int, PreparedCase, np.ndarray | None, list[np.ndarray]] | None = None

    def __len__(self) -> int:
        return self.studies * self.windows_per_study

    def is_whole_territory(self, study: int) -> bool:
        """Whether study ``study`` of this epoch injects one whole-territory infarct."""
        return study in whole_territory_studies(self.base_seed, self.epoch, self.studies,
                                                probability=self.whole_territory_probability,
                                                per_epoch=self.whole_territory_per_epoch)

    def make_study(self, study: int) -> PreparedCase:
        """Study ``study`` of this epoch on the model grid (class docstring)."""
        return self._made(study, with_real_lesions=False)[0]

    def make_study_with_real_lesions(self, study: int) -> tuple[PreparedCase, np.ndarray]:
        """(:meth:`make_study`'s case, bool (t, h, w): where its label is the background's own expert
        lesions, on the same model grid: a thick study's slab majority of them)."""
        case, real = self._made(study, with_real_lesions=True)
        assert real is not None
        return case, real

    def _made(self, study: int, *, with_real_lesions: bool) -> tuple[PreparedCase, np.ndarray | None]:
        """The study, and its expert lesions on the model grid only when asked for: a study served
        without real-lesion windows carries no second mask through the slabs and the resampling."""
        rng = np.random.default_rng([self.base_seed, self.epoch, study])
        background = self.backgrounds[int(rng.integers(len(self.backgrounds)))]
        count = int(rng.choice(INJECTED_COUNTS))
        whole = self.is_whole_territory(study)
        faint = (not whole and self.faint_probability > 0
                 and np.random.default_rng([self.base_seed, self.epoch, study, FAINT_STREAM]).random() < self.faint_probability)
        injected, label, _drawn = inject_infarcts(background, rng, count=1 if whole else count,
                                                  signal=self.faint_signal if faint else None, whole_territory=whole,
                                                  label_fraction=self.label_fraction, surface_pull=self.surface_pull)
        if self.bright_cortex_probability > 0:
            cortex_rng = np.random.default_rng([self.base_seed, self.epoch, study, BRIGHT_CORTEX_STREAM])
            if cortex_rng.random() < self.bright_cortex_probability:
                injected = brighten_grey_matter(background, injected, float(cortex_rng.uniform(*BRIGHT_CORTEX_GAIN)))
        if self.dimming_probability > 0:
            dimming_rng = np.random.default_rng([self.base_seed, self.epoch, study, DIMMING_STREAM])
            if dimming_rng.random() < self.dimming_probability:
                injected = dim_real_lesions(injected, background.lesion, label, background.brain,
                                            float(dimming_rng.uniform(*DIMMING_FACTOR)))
        mask = injected.dwi.with_array(label.astype(np.uint8))
        real = injected.dwi.with_array(background.lesion.astype(np.uint8)) if with_real_lesions else None
        if rng.random() < self.thick_probability:
            if real is not None:
                real = majority_slabs(real, 3, find_slice_axis(injected.dwi))  # as thick_slice_study's reference
            injected, mask = thick_slice_study(injected, mask, 3)
        case, others = prepare_with_masks(f"{background.name}-e{self.epoch}-s{study}", injected, mask,
                                          () if real is None else (real,), self.preprocessing)
        return case, (others[0] & (case.mask > 0)) if others else None

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        study, window = divmod(int(item), self.windows_per_study)
        if self._cache is None or self._cache[0] != study:
            if self.real_lesion_probability > 0:
                case, real = self.make_study_with_real_lesions(study)
                lesions = real_lesion_voxels(real)
            else:
                case, lesions = self.make_study(study), []
            rims = (bright_rim_voxels(case, dwi_channel=int(self.dwi_channel),
                                      in_plane_spacing_mm=float(self.preprocessing["in_plane_spacing_mm"]))
                    if self.rim_probability > 0 else None)
            self._cache = (study, case, rims, lesions)
        _, case, rims, lesions = self._cache
        rng = np.random.default_rng([self.base_seed, self.epoch, study, window])
        lesion_rng = (np.random.default_rng([self.base_seed, self.epoch, study, window, REAL_LESION_STREAM])
                      if self.real_lesion_probability > 0 else None)
        if lesion_rng is not None and lesion_rng.random() < self.real_lesion_probability and lesions:
            voxels = lesions[int(lesion_rng.integers(len(lesions)))]
            out = window_holding(case, voxels[int(lesion_rng.integers(len(voxels)))], lesion_rng, self.window_slices, self.size_hw)
        elif rims is not None and rng.random() < self.rim_probability and len(rims):
            out = window_holding(case, rims[rng.integers(len(rims))], rng, self.window_slices, self.size_hw)
        else:
            out = random_window(case, rng, self.window_slices, self.size_hw, self.lesion_probability)
        out = self.augment(out, rng) if self.augment is not None else out
        if self.elastic_probability > 0:
            elastic_rng = np.random.default_rng([self.base_seed, self.epoch, study, window, ELASTIC_STREAM])
            if elastic_rng.random() < self.elastic_probability:
                out = elastic_warp(out, elastic_rng, spacing_mm=float(self.preprocessing["in_plane_spacing_mm"]))
        if self.bright_field_probability > 0 and rng.random() < self.bright_field_probability:
            clipped = dict(self.preprocessing.get("normalization", {})).get("dwi") == "brain_median_clip4"
            out = add_bright_field(out, rng, dwi_channel=int(self.dwi_channel), dwi_max=DWI_MAX if clipped else None)
        return out

