"""Accuracy on real scans by two-fold cross-validation over the two ISLES'22 cases (issue 13's protocol).

The protocol is fixed here, before any tuning, and every number in the model card's
accuracy tables and in the ablation table (docs/ablation.md) comes from this script.

Folds (``../shared/data/isles22``):
- fold A: case 0001 may be used in any way (training, injection, checkpoint choice,
  post-processing choice); scored on case 0003;
- fold B: the reverse.

Per fold, a model package (``--fold-packages A=DIR B=DIR``, or ``bundled`` for both) and
its post-processing, either the package's own (``--postprocessing package``), the bare
threshold 0.5 (``none``), or chosen by a grid search on the fold's own case
(``choose``; the steps the search may use: ``--steps``; ``flips`` lets it choose the
engine's test-time flips, averaged over 3 passes, against the plain pass). The choice maximises, fixed in
advance, the mean of (a) the fold case's score, native and as 6 mm slabs, and (b) the
mean score of 12 synthetic validation studies (seeds 32,000,000+, skull-stripped,
default ranges, or with ``--validation-synthesis JSON``'s generator options on top: these
studies only, never the ``--synthetic`` scoring studies; ``--validation-large N`` adds N
skull-stripped whole-territory infarcts of 100-300 mL, seeds 32,100,000+, so that the search
sees what a step costs them, and ``--validation-embolic N`` N skull-stripped embolic showers of
2-10 mL, seeds 32,200,000+, the same for scattered small lesions); (b) keeps one case from
dictating the rule. ``--search-data synthetic`` drops (a): no real case, of either lesion type,
chooses the post-processing. The score of one study (``--objective``): ``dice``, its volume Dice
(every package so far), or ``targets``, issue 13's three measures at once: (volume Dice +
lesion-wise F1) / 2 − 0.1 per mL of false positives beyond the target's 1 mL (:func:`targets_score`).

The held-out case is scored natively and as 6 mm slabs (3 slices averaged; reference =
slab majority; ``metrics.thick_slices``) for the model with its post-processing, the same
model with the bare threshold, and the ADC rule (``metrics/adc_rule.py``). Measures:
volume Dice, lesion-wise F1, |ΔV| mL, false-positive mL split into edge (≤ 6 mm from the
brain mask's edge) / posterior fossa / elsewhere (``metrics.regions``).

Synthetic held-out (``--synthetic``): 16 studies at default ranges (seeds 31,000,000+) and
6 whole-territory infarcts of 100-300 mL (seeds 31,100,000+), skull-stripped and skull-on,
scored with each fold's model and post-processing; the summary also averages the studies whose
true infarct is 100 mL or more as acquired.

Post-processing by slice thickness (``--by-thickness``): each fold's search is run twice, once
with its own case natively and once with its 6 mm slabs (each beside the same synthetic
validation half), and a study of slices at least ``THICK_SLICE_MM`` apart (the held-out 6 mm
slabs, thick synthetic studies) is scored with the second: what a product that read the
acquisition's slice spacing would do (issue 13's rule 147).

Two networks as one (``--partner-packages A=DIR B=DIR``): per fold, a copy of the fold
package with the second package attached as its partner network (``inference/package.py``),
so that ``segment_study`` averages the two networks' probabilities itself (both plain passes,
or both over the test-time flips) before the seed step and the post-processing, as a shipped
pair does: an ensemble of two recipes whose strengths differ (issue 13's rule 48: a
GroupNorm-stem network and a BatchNorm one).

Montages of the errors (false positives red, missed lesion blue, found lesion green) go
to ``--montage-dir`` (default ``benchmarks/results/real_scan_cv/montages/``, not committed:
the ISLES'22 images may not be redistributed; the command regenerates them).

    .venv/bin/python benchmarks/real_scan_cv.py --label bundled-raw --postprocessing none
    .venv/bin/python benchmarks/real_scan_cv.py --label bundled-pp --postprocessing choose
    .venv/bin/python benchmarks/real_scan_cv.py --label NAME --fold-packages A=runs/a/pkg B=runs/b/pkg --synthetic

The shipped package's post-processing is chosen by the same rule on everything it may use
(both cases, native and 6 mm, and the synthetic validation studies) and written into its
manifest; no held-out number comes from this mode:

    .venv/bin/python benchmarks/real_scan_cv.py --ship LambdaSegmentLib/resources/models/lambdaunet-dwi --steps threshold size edge
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.errors import BadInputError  # noqa: E402
from LambdaSegmentLib.inference import ModelPackage, load_model_package, segment_study  # noqa: E402
from LambdaSegmentLib.inference.package import MANIFEST_FILE, attach_partner_network  # noqa: E402
from LambdaSegmentLib.inference.engine import Segmentation  # noqa: E402
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask  # noqa: E402
from LambdaSegmentLib.inference.postprocess import (  # noqa: E402
    Components, PostProcessing, edge_depth_mm, find_components, height_fraction, keep_seeded_components, relative_adc,
    relative_dwi, apply_margin, with_bilateral,
)
from LambdaSegmentLib.preprocessing.symmetry import ContralateralRegistration, contralateral_search, register_contralateral  # noqa: E402
from LambdaSegmentLib.io import Study, Volume, load_study, read_volume  # noqa: E402
from LambdaSegmentLib.metrics import adc_threshold_rule, absolute_volume_difference_ml, lesion_detection, volume_dice  # noqa: E402
from LambdaSegmentLib.metrics.regions import false_positive_ml_by_contact, false_positive_ml_by_region, posterior_fossa_mask  # noqa: E402
from LambdaSegmentLib.metrics.thick_slices import thick_slice_study  # noqa: E402
from LambdaSegmentLib.preprocessing import find_slice_axis  # noqa: E402

ISLES = REPO.parent / "shared" / "data" / "isles22"
CASES = {"0001": "sub-strokecase0001", "0003": "sub-strokecase0003"}
FOLDS = {"A": ("0001", "0003"), "B": ("0003", "0001")}  # fold: (case it may use, held-out case)
OUT = REPO / "benchmarks" / "results" / "real_scan_cv"
SYNTHETIC_VALIDATION_SEEDS = range(32_000_000, 32_000_012)
# --validation-large N: the search's whole-territory studies (SYNTHETIC_LARGE_RANGES), seeds from here
SYNTHETIC_VALIDATION_LARGE_START = 32_100_000
# --validation-embolic N: the search's embolic showers (SYNTHETIC_EMBOLIC_RANGES), seeds from here
SYNTHETIC_VALIDATION_EMBOLIC_START = 32_200_000
VALIDATION_RANGES: dict[str, Any] = {"skull_stripped": True}  # the validation studies' fixed options
# --by-thickness: a study whose slice spacing is at least this takes the thick-slice settings (the
# clinical 4-6 mm acquisitions of issue 13; the real cases' 6 mm slabs; their 2 mm slices do not)
THICK_SLICE_MM = 4.0
SYNTHETIC_TEST_SEEDS = range(31_000_000, 31_000_016)
SYNTHETIC_LARGE_SEEDS = range(31_100_000, 31_100_006)
# whole-territory infarcts (a plain territorial lesion stops at its one JHU territory, 10-25 mL,
# whatever volume was drawn; a LESYMAP shape keeps its own size)
SYNTHETIC_LARGE_RANGES: dict[str, Any] = {"lesion_kind": "territorial", "lesion_volume_ml": (100.0, 300.0),
                                          "massive_infarct_probability": 1.0, "lesymap_probability": 0.0}
# embolic showers of many small lesions (the generator's default lesion signal; issue 13's rule 141)
SYNTHETIC_EMBOLIC_RANGES: dict[str, Any] = {"lesion_kind": "embolic", "lesion_volume_ml": (2.0, 10.0)}
# --seed-packages: a seed package's probability at or above this marks where it detects a lesion
# (fixed, its training threshold; never searched)
SEED_THRESHOLD = 0.5
STEPS = ("threshold", "size", "edge", "contralateral", "contralateral_search", "flips", "grow", "adc", "bilateral",
         "edge_keep", "margin", "margin_fraction", "margin_mirror", "satellite")
GRID = {
    "threshold": (0.3, 0.4, 0.5, 0.6, 0.7),
    "size": (0.0, 0.03, 0.1, 0.3),
    "edge": (None, 2.0, 4.0, 6.0),
    "contralateral": (None, 1.05, 1.1, 1.15, 1.2, 1.3, 1.4),
    # in-plane radius (mm) of the contralateral check's search for the brightest mirror value
    # (postprocess.PostProcessing.contralateral_search_mm); only with a contralateral ratio
    "contralateral_search": (0.0, 3.0, 6.0),
    "flips": (False, True),  # the engine's test-time flips (3 passes) averaged, or the plain pass
    # hysteresis (postprocess.PostProcessing.grow_threshold): lesions found at the threshold drawn
    # out to where the probability falls below this; off first, so a tie keeps it off
    "grow": (None, 0.1, 0.2),
    # largest kept median ADC of a lesion / the brain's median ADC (postprocess.PostProcessing.
    # max_relative_adc); off first, so a tie keeps it off (issue 13's rule 63)
    "adc": (None, 0.95, 0.9, 0.85, 0.8),
    # in-plane radius (mm) within which a lesion's registered mirror region is searched for another
    # candidate lesion, one found dropping it (postprocess.PostProcessing.bilateral_partner_mm);
    # off first, so a tie keeps it off (issue 13's rule 82). --bilateral-partner-mm fixes it on.
    "bilateral": (None, 4.0),
    # the edge check's exception (postprocess.PostProcessing.edge_keep_ratio): a shallow lesion
    # whose DWI is at least this many times its mirror's is kept; only with an edge depth; off
    # first, so a tie keeps it off (issue 13's rule 93)
    "edge_keep": (None, 1.3, 1.5, 2.0),
    # the margin step (postprocess.PostProcessing.margin_dwi_ratio): tissue within 3.5 mm of a kept
    # lesion whose DWI is at least this many times the brain's median joins it; off first, so a
    # tie keeps it off (issue 13's rule 109)
    "margin": (None, 1.3, 1.4, 1.5, 1.7),
    # the margin as a share of each lesion's own excess DWI (postprocess.PostProcessing.
    # margin_lesion_fraction), its floor margin_dwi_ratio at MARGIN_FLOOR unless the margin step is
    # searched as well; off first (issue 13's rule 110)
    "margin_fraction": (None, 0.2, 0.3, 0.4, 0.5),
    # the margin's mirror check (postprocess.PostProcessing.margin_mirror_ratio): searched, it is on
    # in every setting with a margin and off in every one without (issue 13's rule 111), so it is
    # never chosen for or against by itself
    "margin_mirror": (None, 1.2),
    # the satellite exemption (postprocess.PostProcessing.satellite_mm): a lesion that only the
    # edge or contralateral check drops is kept within this distance (mm) of a lesion that passes
    # every check; only with one of those checks on; off first, so a tie keeps it off (issue 13's rule 132)
    "satellite": (None, 10.0, 20.0),
}
# the margin step's floor where only margin_fraction is searched: below it lies the tissue just
# outside both the experts' labels (1.08-1.10 x the brain's DWI) and the generator's (1.21 x)
MARGIN_FLOOR = 1.2


@dataclass
class Prepared:
    """One study with a model's probability (plain, and averaged over the test-time flips when
    asked for) and everything the post-processing looks at."""

    name: str
    study: Study
    truth: np.ndarray
    brain: np.ndarray
    probability: np.ndarray
    depth_mm: np.ndarray
    pair: tuple[np.ndarray, np.ndarray]
    adc_ratio: np.ndarray  # postprocess.relative_adc of the study on the brain mask
    dwi_ratio: np.ndarray  # postprocess.relative_dwi of the study on the brain mask (the margin step)
    registration: ContralateralRegistration  # the study's registered mirror (pair is its DWI pair)
    height: np.ndarray  # postprocess.height_fraction of the study on the brain mask (the edge check's height)
    posterior_fossa: np.ndarray | None = None
    flipped_probability: np.ndarray | None = None
    seed: np.ndarray | None = None  # bool: where the seed package (--seed-packages) detects a lesion
    _components: dict[tuple[bool, float, float | None, float, float | None, bool], Components] | None = None
    _searched: dict[float, np.ndarray] | None = None

    def contralateral(self, search_mm: float) -> np.ndarray:
        """The contralateral image the check compares with at this search radius (one per radius)."""
        self._searched = self._searched or {}
        if search_mm not in self._searched:
            self._searched[search_mm] = contralateral_search(self.pair[1], self.study.dwi, search_mm)
        return self._searched[search_mm]

    def components(self, threshold: float, flips: bool = False, search_mm: float = 0.0,
                   grow_threshold: float | None = None, bilateral_mm: float | None = None,
                   bilateral_total: bool = False) -> Components:
        self._components = self._components or {}
        key = (flips, threshold, grow_threshold, search_mm, bilateral_mm, bilateral_total)
        if key not in self._components:
            if flips and self.flipped_probability is None:
                raise ValueError(f"{self.name}: prepared without the test-time flips")
            probability = self.flipped_probability if flips else self.probability
            if self.seed is not None:  # as segment_study: the seeds pick among the grown components
                lowest = threshold if grow_threshold is None else grow_threshold
                probability = keep_seeded_components(probability, lowest, self.brain, self.seed)
            self._components[key] = find_components(
                probability, threshold, brain=self.brain,
                voxel_volume_mm3=self.study.dwi.voxel_volume_mm3, depth_mm=self.depth_mm, dwi_smoothed=self.pair[0],
                contralateral=self.contralateral(search_mm), grow_threshold=grow_threshold,
                adc_ratio=self.adc_ratio, spacing_mm=self.study.dwi.spacing_mm, height=self.height,
            )
            if bilateral_mm is not None:
                components = self._components[key]
                self._components[key] = with_bilateral(components, self.registration.mirrored_labels(components.labels),
                                                       self.study.dwi, bilateral_mm, total=bilateral_total)
        return self._components[key]

    def components_for(self, settings: PostProcessing) -> Components:
        """The candidate components ``settings``' mask is cut from, with what its checks read."""
        # the search radius only changes what the contralateral checks see
        search_mm = settings.contralateral_search_mm if settings.needs_contralateral else 0.0
        return self.components(settings.threshold, settings.test_time_flips, search_mm, settings.grow_threshold,
                               settings.bilateral_partner_mm, settings.bilateral_partner_total)

    def mask(self, settings: PostProcessing) -> np.ndarray:
        """As :func:`~LambdaSegmentLib.inference.postprocess.postprocess` cuts it: the kept
        components, then the margin step."""
        return apply_margin(self.components_for(settings).mask(settings), settings, self.dwi_ratio, self.brain,
                            self.study.dwi.spacing_mm, self.pair)


def network_probability(segmentation: Segmentation) -> np.ndarray:
    """The package network's own probability: before its seed network's step, when it has one."""
    volume = segmentation.probability if segmentation.unseeded_probability is None else segmentation.unseeded_probability
    return np.asarray(volume.array)


def paired_package(package: ModelPackage, partner: ModelPackage, directory: Path) -> ModelPackage:
    """A copy of ``package`` in ``directory`` (created) with ``partner`` attached as its partner
    network: ``segment_study`` then runs both and averages them, as for a shipped pair. Neither
    may carry a seed or partner network (give ``--seed-packages``), and both must mask the
    brain alike (the pair uses ``package``'s mask for both)."""
    if any(network is not None for network in (package.seed, package.partner, partner.seed, partner.partner)):
        raise SystemExit("real_scan_cv: with --partner-packages neither package may carry seed networks or partners; "
                         "give --seed-packages")
    if partner.brain_mask_method != package.brain_mask_method:
        raise SystemExit(f"real_scan_cv: {partner.directory} masks the brain otherwise than {package.directory}")
    directory.mkdir(parents=True)
    for name in (MANIFEST_FILE, str(package.manifest["weights_file"])):
        (directory / name).write_bytes((package.directory / name).read_bytes())
    attach_partner_network(directory, partner.directory)
    return load_model_package(directory)


def prepare(name: str, study: Study, truth: np.ndarray, package: ModelPackage, *, regions: bool, flips: bool = False,
            seed_package: ModelPackage | None = None) -> Prepared:
    """Segment ``study`` (plain pass; with ``flips`` also averaged over the engine's test-time flips;
    with ``seed_package`` also by that package, whose plain pass at ``SEED_THRESHOLD`` is the seed)."""
    # the brain mask segment_study used (the manifest's method; a skull-stripped study passes
    # through as its nonzero DWI), so the edge depth here is the one the product's post-processing sees
    if seed_package is not None and package.seed is not None:
        raise SystemExit(f"real_scan_cv: {package.directory} carries a seed network; give no --seed-packages for it")
    seed = None
    try:
        segmentation = segment_study(study, package, device="cpu", tta=False)
        flipped = network_probability(segment_study(study, package, device="cpu", tta=True)) if flips else None
    except BadInputError as error:  # the product refuses the study (runaway outputs): the user gets no mask
        print(f"  {name}: refused by segment_study ({error}); scored as an empty mask", flush=True)
        brain = brain_mask(study.dwi, method=package.brain_mask_method, foreground=study.foreground)
        probability = np.zeros(brain.shape, dtype=np.float32)
        flipped = probability if flips else None
    else:
        brain = np.asarray(segmentation.brain.array) != 0
        # the search re-applies a package's own seed network at each threshold it tries
        probability = network_probability(segmentation)
        seed = None if segmentation.seed is None else np.asarray(segmentation.seed.array) != 0
    if seed_package is not None:
        try:
            seed_probability = np.asarray(segment_study(study, seed_package, device="cpu", tta=False).probability.array)
        except BadInputError as error:  # the seed package refuses the study: it seeds nothing, so nothing is kept
            print(f"  {name}: seed package refused by segment_study ({error}); no seeds", flush=True)
            seed_probability = np.zeros(brain.shape, dtype=np.float32)
        seed = (seed_probability >= SEED_THRESHOLD) & brain
    registration = register_contralateral(study.dwi, brain)
    return Prepared(
        name=name, study=study, truth=np.asarray(truth) != 0, brain=brain, probability=probability,
        depth_mm=edge_depth_mm(brain, study.dwi.spacing_mm), pair=registration.pair(),
        adc_ratio=relative_adc(np.asarray(study.adc.array), brain),
        dwi_ratio=relative_dwi(np.asarray(study.dwi.array), brain), registration=registration,
        height=height_fraction(study.dwi, brain) if brain.any() else np.zeros(brain.shape, np.float32),
        posterior_fossa=posterior_fossa_mask(study.dwi, brain) if regions else None, flipped_probability=flipped,
        seed=seed,
    )


def load_real(case: str, thick: bool) -> tuple[Study, np.ndarray]:
    prefix = ISLES / CASES[case] / f"{CASES[case]}_ses-0001_"
    study = load_study(dwi=f"{prefix}dwi.nii.gz", adc=f"{prefix}adc.nii.gz")
    truth = read_volume(f"{prefix}msk.nii.gz")
    if thick:
        study, truth = thick_slice_study(study, truth, 3)
    return study, np.asarray(truth.array) != 0


def validation_synthesis(text: str) -> dict[str, Any]:
    """``--validation-synthesis``: a JSON object of generator options (``synthesis.DEFAULT_RANGES``),
    checked by the generator's own rules so that a typo fails at once, not after the first fold.

    Raises:
        argparse.ArgumentTypeError: not JSON, not an object, or an unknown option / bad value.
    """
    from LambdaSegmentLib.cli import json_object
    from LambdaSegmentLib.synthesis import check_ranges

    options = json_object(text)
    fixed = sorted(set(options) & set(VALIDATION_RANGES))
    if fixed:
        raise argparse.ArgumentTypeError(f"{fixed} is fixed by the protocol ({VALIDATION_RANGES}); give other generator options")
    try:
        check_ranges({**options, **VALIDATION_RANGES})
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return options


def partner_fraction(text: str) -> float:
    """``--bilateral-partner-fraction``: a finite share >= 0, refused at once otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (np.isfinite(value) and value >= 0.0):
        raise argparse.ArgumentTypeError(f"must be a finite share >= 0 of a lesion's voxels, not {text}")
    return value


def large_validation_seeds(count: int) -> range:
    """The seeds of ``--validation-large``'s whole-territory studies."""
    return range(SYNTHETIC_VALIDATION_LARGE_START, SYNTHETIC_VALIDATION_LARGE_START + count)


def embolic_validation_seeds(count: int) -> range:
    """The seeds of ``--validation-embolic``'s embolic showers."""
    return range(SYNTHETIC_VALIDATION_EMBOLIC_START, SYNTHETIC_VALIDATION_EMBOLIC_START + count)


def extra_validation_groups(large: int, embolic: int) -> list[tuple[str, str, dict[str, Any], range]]:
    """The search's validation groups beyond the default studies, in order, as (name, what they
    are, generator ranges, seeds): ``large`` whole-territory infarcts, then ``embolic`` showers."""
    groups = (("large", "whole-territory", SYNTHETIC_LARGE_RANGES, large_validation_seeds(large)),
              ("embolic", "embolic", SYNTHETIC_EMBOLIC_RANGES, embolic_validation_seeds(embolic)))
    return [(name, f"{kind} ({ranges['lesion_volume_ml'][0]:g}-{ranges['lesion_volume_ml'][1]:g} mL)", ranges, seeds)
            for name, kind, ranges, seeds in groups]


def validation_studies(extra_ranges: dict[str, Any], large: int = 0, embolic: int = 0) -> list[tuple[str, Study, np.ndarray]]:
    """The search's synthetic validation studies as (name, study, truth): SYNTHETIC_VALIDATION_SEEDS
    (VALIDATION_RANGES, with ``extra_ranges``, ``--validation-synthesis``, on top), then ``large``
    whole-territory studies (``--validation-large``: SYNTHETIC_LARGE_RANGES), then ``embolic``
    embolic showers (``--validation-embolic``: SYNTHETIC_EMBOLIC_RANGES), skull-stripped as the
    rest, ``extra_ranges``' other options too. All weigh alike in the validation's mean."""
    studies = [(f"synth-{seed}", *synthetic(seed, **extra_ranges, **VALIDATION_RANGES)) for seed in SYNTHETIC_VALIDATION_SEEDS]
    for name, _what, ranges, seeds in extra_validation_groups(large, embolic):
        kind_ranges = {**extra_ranges, **ranges, **VALIDATION_RANGES}
        studies += [(f"synth-{name}-{seed}", *synthetic(seed, **kind_ranges)) for seed in seeds]
    return studies


def validation_description(extra_ranges: dict[str, Any], large: int = 0, embolic: int = 0) -> str:
    """What the search's synthetic validation studies are, for a result's or manifest's "data"."""
    seeds = f"synthetic seeds {SYNTHETIC_VALIDATION_SEEDS.start}-{SYNTHETIC_VALIDATION_SEEDS.stop - 1}"
    described = seeds + (f" with {json.dumps(extra_ranges, sort_keys=True)}" if extra_ranges else "")
    for _name, what, _ranges, seeds in extra_validation_groups(large, embolic):
        if seeds:
            described += f" + {len(seeds)} {what} seeds {seeds.start}-{seeds.stop - 1}"
    return described


def synthetic(seed: int, **ranges: Any) -> tuple[Study, np.ndarray]:
    from LambdaSegmentLib.synthesis import generate

    made = generate(seed, **ranges)
    study = load_study(dwi=made.dwi, adc=made.adc, adc_unit=made.adc_unit, b_value=made.b_value)
    return study, np.asarray(made.mask.array) != 0


def score(prepared: Prepared, mask: np.ndarray) -> dict[str, float]:
    truth, voxel = prepared.truth, prepared.study.dwi.voxel_volume_mm3
    detection = lesion_detection(mask, truth)
    row = {
        "volume_dice": volume_dice(mask, truth),
        "lesion_f1": detection.f1,
        "false_positive_components": detection.false_positives,  # lesion F1's: predicted lesions touching no true one
        "abs_dv_ml": absolute_volume_difference_ml(mask, truth, voxel),
        "predicted_ml": float(np.count_nonzero(mask) * voxel / 1000),
        "true_ml": float(np.count_nonzero(truth) * voxel / 1000),
    }
    if prepared.posterior_fossa is not None:
        row.update(false_positive_ml_by_region(mask, truth, depth_mm=prepared.depth_mm,
                                               posterior_fossa=prepared.posterior_fossa, voxel_volume_mm3=voxel))
    else:
        row["fp_ml"] = float(np.count_nonzero((mask != 0) & ~truth) * voxel / 1000)
    row.update(false_positive_ml_by_contact(mask, truth, voxel_volume_mm3=voxel))  # rule 79: border / detached
    return row


def candidate_settings(steps: tuple[str, ...], thresholds: tuple[float, ...] = GRID["threshold"],
                       bilateral_mm: float | None = None, bilateral_fractions: tuple[float, ...] = (0.0,),
                       bilateral_total: bool = False, satellite_mm: float | None = None,
                       satellite_edge_only: bool = False, margin_capped: bool = False,
                       edge_max_height: float | None = None) -> list[PostProcessing]:
    """Every combination of the searched steps' grid values (``thresholds`` for the threshold;
    a step not searched keeps its first value, the threshold 0.5); ``bilateral_mm`` fixes the
    bilateral step on at that radius in every setting, searched or not; wherever the step is on,
    each of ``bilateral_fractions`` in turn is the smallest partner that counts
    (``PostProcessing.bilateral_partner_fraction``: the search chooses among them, the first
    winning a tie), and ``bilateral_total`` counts the partners together
    (``PostProcessing.bilateral_partner_total``, fixed, not searched); ``satellite_mm`` fixes the
    satellite exemption on at that distance in every setting with the edge or contralateral check
    (``PostProcessing.satellite_mm``; issue 13's rule 133), where the step ``satellite`` searches it;
    with ``satellite_edge_only`` it lifts the edge check alone and rides only where that check is on
    (``PostProcessing.satellite_edge_only``; rule 134); ``margin_capped`` caps the margin at each
    lesion's own median DWI in every setting where the margin step is on (``PostProcessing.margin_capped``,
    fixed, not searched; rule 137); ``edge_max_height`` confines the edge check to the brain's lower
    part in every setting where it is on (``PostProcessing.edge_max_height``, fixed, not searched;
    rule 145)."""
    if satellite_edge_only and satellite_mm is None:
        raise ValueError("satellite_edge_only needs a fixed satellite_mm")
    if satellite_mm is not None and "satellite" in steps:
        raise ValueError("the satellite exemption is either fixed (satellite_mm) or searched (the step satellite), not both")
    if margin_capped and not {"margin", "margin_fraction"} & set(steps):
        raise ValueError("margin_capped needs the margin step searched (margin or margin_fraction)")
    if edge_max_height is not None and "edge" not in steps:
        raise ValueError("edge_max_height needs the edge step searched")
    grid = {**GRID, "threshold": tuple(thresholds)}
    if satellite_mm is not None:
        grid["satellite"] = (satellite_mm,)
        steps = (*steps, "satellite")
    if bilateral_mm is not None:
        grid["bilateral"] = (bilateral_mm,)
        steps = (*steps, "bilateral")
    axes = [grid[step] if step in steps else (GRID[step][2] if step == "threshold" else GRID[step][0]) for step in STEPS]
    axes = [axis if isinstance(axis, tuple) else (axis,) for axis in axes]
    search_axis = axes[STEPS.index("contralateral_search")]  # without a ratio only its first value: one setting, not several alike
    return [PostProcessing(threshold=t, min_lesion_ml=s, min_edge_depth_mm=e,
                           edge_max_height=edge_max_height if e is not None else None, contralateral_ratio=c,
                           contralateral_search_mm=r if c is not None else 0.0, test_time_flips=f, grow_threshold=g,
                           max_relative_adc=a, bilateral_partner_mm=b, bilateral_partner_fraction=share,
                           bilateral_partner_total=bilateral_total and b is not None,
                           edge_keep_ratio=k, margin_dwi_ratio=MARGIN_FLOOR if m is None and q is not None else m,
                           margin_lesion_fraction=q, margin_mirror_ratio=w,
                           margin_capped=margin_capped and (m is not None or q is not None),
                           satellite_mm=v if e is not None or (c is not None and not satellite_edge_only) else None,
                           satellite_edge_only=satellite_edge_only and e is not None)
            for t, s, e, c, r, f, g, a, b, k, m, q, w, v in itertools.product(*axes)
            if (c is not None or r == search_axis[0]) and (g is None or g < t) and (k is None or e is not None)
            and (q is None or m is not None or "margin" not in steps)
            and ("margin_mirror" not in steps or (w is None) == (m is None and q is None))
            and (v is None or e is not None or c is not None or satellite_mm is not None)
            for share in (bilateral_fractions if b is not None else (0.0,))]


def targets_score(mask: np.ndarray, truth: np.ndarray, voxel_volume_mm3: float) -> float:
    """Issue 13's targets as one number for one study: (volume Dice + lesion-wise F1) / 2 minus
    0.1 per mL of false-positive volume beyond 1 mL (the target; a clinician deletes what lies
    beyond it by hand). ``mask``, ``truth``: (k, j, i) boolean; at most 1, unbounded below."""
    fp_ml = np.count_nonzero(mask & ~truth) * voxel_volume_mm3 / 1000
    return 0.5 * (volume_dice(mask, truth) + lesion_detection(mask, truth).f1) - 0.1 * max(0.0, fp_ml - 1.0)


def dice_score(mask: np.ndarray, truth: np.ndarray, voxel_volume_mm3: float) -> float:
    """Volume Dice alone (the objective of every package so far); ``voxel_volume_mm3`` unused."""
    return volume_dice(mask, truth)


OBJECTIVES = {"dice": dice_score, "targets": targets_score}


def choose(fold_cases: list[Prepared], validation: list[Prepared], steps: tuple[str, ...],
           objective: str = "dice", thresholds: tuple[float, ...] = GRID["threshold"],
           bilateral_mm: float | None = None, bilateral_fractions: tuple[float, ...] = (0.0,),
           bilateral_total: bool = False, satellite_mm: float | None = None,
           satellite_edge_only: bool = False, margin_capped: bool = False,
           edge_max_height: float | None = None) -> tuple[PostProcessing, float]:
    """The settings maximising 0.5 · mean score(fold case, native + 6 mm) + 0.5 · mean
    score(synthetic validation), the score being ``OBJECTIVES[objective]``; with no fold
    case (``--search-data synthetic``) the synthetic validation's alone."""
    study_score = OBJECTIVES[objective]
    mean_score = lambda cases, settings: np.mean(  # noqa: E731
        [study_score(p.mask(settings), p.truth, p.study.dwi.voxel_volume_mm3) for p in cases])
    best, best_value = PostProcessing(), -np.inf
    for settings in candidate_settings(steps, thresholds, bilateral_mm, bilateral_fractions, bilateral_total, satellite_mm,
                                       satellite_edge_only, margin_capped, edge_max_height):
        # each group given weighs half; one group alone decides alone
        value = np.mean([mean_score(cases, settings) for cases in (fold_cases, validation) if cases])
        if value > best_value + 1e-9:
            best, best_value = settings, float(value)
    return best, best_value


def slice_spacing_mm(study: Study) -> float:
    """The DWI's spacing along its slice axis (from its geometry, whatever its orientation), mm."""
    return float(study.dwi.spacing_mm[find_slice_axis(study.dwi)])


def settings_for(study: Study, settings: PostProcessing, thick: PostProcessing | None) -> PostProcessing:
    """``thick`` for a study of slices at least THICK_SLICE_MM apart when given (``--by-thickness``),
    else ``settings``: the product would pick its post-processing from the study's geometry alike."""
    return thick if thick is not None and slice_spacing_mm(study) >= THICK_SLICE_MM else settings


def montage(prepared: Prepared, mask: np.ndarray, path: Path, title: str) -> None:
    """Top row: the (up to) 4 slices with most false positives; bottom row: the 4 with most missed
    lesion; a slice with none is not shown. DWI / brain median in [0, 4], cropped to the brain;
    FP red, missed blue, found green."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dwi = np.asarray(prepared.study.dwi.array, dtype=np.float32)
    median = float(np.median(dwi[prepared.brain])) if prepared.brain.any() else 1.0
    fp, fn, tp = (mask != 0) & ~prepared.truth, (mask == 0) & prepared.truth, (mask != 0) & prepared.truth
    per_slice = lambda a: a.reshape(len(dwi), -1).sum(axis=1)  # noqa: E731

    def worst(voxels: np.ndarray) -> np.ndarray:  # the 4 slices with most such voxels, none without any
        counts = per_slice(voxels)
        order = np.argsort(counts, kind="stable")[::-1][:4]
        return np.sort(order[counts[order] > 0])

    rows = [worst(fp), worst(fn)]
    _k, jj, ii = np.nonzero(prepared.brain) if prepared.brain.any() else np.nonzero(np.ones_like(dwi))
    crop = (slice(max(jj.min() - 2, 0), jj.max() + 3), slice(max(ii.min() - 2, 0), ii.max() + 3))
    figure, axes = plt.subplots(2, 4, figsize=(12, 6.4))
    for axis in axes.flat:
        axis.axis("off")
    for row, picks in enumerate(rows):
        for column, k in enumerate(picks):
            overlay = np.zeros((*dwi[k].shape, 4), dtype=np.float32)
            overlay[fp[k]] = (1, 0, 0, 0.7)
            overlay[fn[k]] = (0, 0.4, 1, 0.6)
            overlay[tp[k]] = (0, 1, 0, 0.45)
            axis = axes[row, column]
            axis.imshow(dwi[k][crop] / median, cmap="gray", vmin=0, vmax=4)
            axis.imshow(overlay[crop])
            axis.set_title(f"slice {k}: FP {fp[k].sum()} / missed {fn[k].sum()} vox", fontsize=8)
            axis.axis("off")
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)


def real_cases_used(package: ModelPackage) -> list[str]:
    """The ISLES'22 cases (``"0001"``, ``"0003"``) the package's manifest says it trained on,
    chose a checkpoint on, or used as injection backgrounds."""
    data = package.manifest.get("training_data", {}) or {}
    named = [*data.get("real_training_cases", []), *data.get("validation_cases", []),
             *(data.get("real_backgrounds", {}) or {}).get("cases", [])]
    return sorted(case for case, folder in CASES.items() if any(str(name).startswith(folder) for name in named))


def fold_package(spec: str) -> ModelPackage:
    return load_model_package(None if spec == "bundled" else spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", help="name of this row (results file stem)")
    parser.add_argument("--ship", type=Path, default=None, metavar="PKG",
                        help="choose PKG's post-processing on both cases + synthetic validation and write it into its manifest")
    parser.add_argument("--fold-packages", nargs="*", default=["A=bundled", "B=bundled"], metavar="FOLD=PKG")
    parser.add_argument("--postprocessing", choices=("choose", "package", "none"), default="choose")
    parser.add_argument("--steps", nargs="*", default=list(STEPS), choices=STEPS, help="post-processing steps the search may use")
    parser.add_argument("--thresholds", nargs="+", type=float, default=list(GRID["threshold"]), metavar="T",
                        help=f"the threshold step's values (default {' '.join(map(str, GRID['threshold']))})")
    parser.add_argument("--bilateral-partner-mm", type=float, default=None, metavar="R",
                        help="fix the bilateral step on at this in-plane radius (mm) in every searched setting "
                             "(postprocess.PostProcessing.bilateral_partner_mm; default: off unless --steps names bilateral)")
    parser.add_argument("--bilateral-partner-fraction", type=partner_fraction, nargs="+", default=[0.0], metavar="F",
                        help="wherever the bilateral step is on, only a partner holding at least this share of a "
                             "lesion's voxels counts (postprocess.PostProcessing.bilateral_partner_fraction; default 0: "
                             "any); several values: the search chooses, the first winning a tie")
    parser.add_argument("--bilateral-partner-total", action="store_true",
                        help="wherever the bilateral step is on, count a lesion's mirror partners together (their "
                             "summed voxels) instead of the largest alone (postprocess.PostProcessing."
                             "bilateral_partner_total; issue 13's rule 128)")
    parser.add_argument("--satellite-mm", type=float, default=None, metavar="R",
                        help="fix the satellite exemption on at this distance (mm) in every searched setting with the "
                             "edge or contralateral check (postprocess.PostProcessing.satellite_mm; issue 13's rule 133; "
                             "default: off unless --steps names satellite)")
    parser.add_argument("--satellite-edge-only", action="store_true",
                        help="with --satellite-mm, the exemption lifts the edge check alone (postprocess.PostProcessing."
                             "satellite_edge_only; issue 13's rule 134)")
    parser.add_argument("--margin-capped", action="store_true",
                        help="wherever the searched margin step is on, a voxel joins only where its DWI is at most its "
                             "lesion's median (postprocess.PostProcessing.margin_capped; issue 13's rule 137)")
    parser.add_argument("--edge-max-height", type=float, default=None, metavar="H",
                        help="wherever the searched edge check is on, it drops only lesions whose median height in the "
                             "brain (0 = its lowest point, 1 = its highest) is at most H (postprocess.PostProcessing."
                             "edge_max_height; issue 13's rule 145)")
    parser.add_argument("--by-thickness", action="store_true",
                        help="choose two post-processings per fold: one on the fold's own case natively (2 mm) and one "
                             f"on its 6 mm slabs, each with the synthetic validation half; a study of slices >= {THICK_SLICE_MM:g} mm "
                             "(the held-out 6 mm slabs, thick synthetic studies) is scored with the second (issue 13's rule 147)")
    parser.add_argument("--objective", choices=tuple(OBJECTIVES), default="dice",
                        help="what the post-processing search maximises per study (dice: volume Dice; targets: targets_score)")
    parser.add_argument("--search-data", choices=("case+synthetic", "synthetic"), default="case+synthetic",
                        help="what the search scores: the fold's own case and the synthetic validation studies "
                             "(the protocol's rule), or the synthetic validation studies alone (no real case "
                             "of either lesion type chooses the post-processing)")
    parser.add_argument("--seed-packages", nargs="*", default=[], metavar="FOLD=PKG",
                        help="per fold, a second package (e.g. the stage-1 package the fold's model was fine-tuned from): "
                             "a component of the fold model's mask is kept only if it holds a voxel where this package's "
                             f"probability is >= {SEED_THRESHOLD}, before the other steps")
    parser.add_argument("--partner-packages", nargs="*", default=[], metavar="FOLD=PKG",
                        help="per fold, a second network whose probability is averaged with the fold package's "
                             "(both plain or both with the flips) before the seed step and the post-processing")
    parser.add_argument("--validation-synthesis", type=validation_synthesis, default={}, metavar="JSON",
                        help="generator options (a JSON object) for the search's synthetic validation studies only, "
                             "e.g. '{\"susceptibility_mirror_offset_mm\": [1, 4]}'; the --synthetic scoring studies "
                             "stay at the defaults (default: {})")
    parser.add_argument("--validation-large", type=int, default=0, metavar="N",
                        help=f"add N skull-stripped whole-territory infarcts (100-300 mL, seeds {SYNTHETIC_VALIDATION_LARGE_START}+) "
                             "to the search's validation studies (default 0)")
    parser.add_argument("--validation-embolic", type=int, default=0, metavar="N",
                        help=f"add N skull-stripped embolic showers (2-10 mL, seeds {SYNTHETIC_VALIDATION_EMBOLIC_START}+) "
                             "to the search's validation studies (default 0)")
    parser.add_argument("--folds", nargs="+", default=list(FOLDS), choices=list(FOLDS), help="folds to run (both)")
    parser.add_argument("--synthetic", action="store_true", help="also score the synthetic held-out studies")
    parser.add_argument("--montage-dir", type=Path, default=OUT / "montages")
    parser.add_argument("--no-montages", action="store_true")
    args = parser.parse_args()
    for option, count in (("--validation-large", args.validation_large), ("--validation-embolic", args.validation_embolic)):
        if count < 0:
            parser.error(f"{option} must be a count >= 0, not {count}")
    if args.satellite_edge_only and args.satellite_mm is None:
        parser.error("--satellite-edge-only needs --satellite-mm")
    if args.satellite_mm is not None and "satellite" in args.steps:
        parser.error("--satellite-mm fixes the satellite exemption; --steps may not also search it (satellite)")
    if args.margin_capped and not {"margin", "margin_fraction"} & set(args.steps):
        parser.error("--margin-capped needs the margin step in --steps (margin or margin_fraction)")
    if args.edge_max_height is not None:
        if "edge" not in args.steps:
            parser.error("--edge-max-height needs the edge step in --steps")
        if not 0.0 < args.edge_max_height <= 1.0:
            parser.error(f"--edge-max-height must be a height in (0, 1], not {args.edge_max_height}")
    if args.by_thickness and (args.ship is not None or args.postprocessing != "choose" or args.search_data != "case+synthetic"):
        parser.error("--by-thickness chooses each fold's two post-processings on its own case natively and at 6 mm: "
                     "it needs --postprocessing choose and --search-data case+synthetic, and not --ship")
    if not ISLES.is_dir():
        raise SystemExit(f"real_scan_cv: {ISLES} is absent; the protocol needs the two ISLES'22 cases")
    if args.ship is not None:
        ship(args.ship, tuple(args.steps), args.objective, args.validation_synthesis, tuple(args.thresholds),
             args.bilateral_partner_mm, tuple(args.bilateral_partner_fraction), args.validation_large,
             args.bilateral_partner_total, args.satellite_mm, args.satellite_edge_only, args.margin_capped,
             args.validation_embolic, args.edge_max_height)
        return
    if not args.label:
        parser.error("--label is required (or --ship PKG)")
    specs = dict(item.split("=", 1) for item in args.fold_packages)
    seed_specs = dict(item.split("=", 1) for item in args.seed_packages)
    partner_specs = dict(item.split("=", 1) for item in args.partner_packages)
    missing = [fold for fold in args.folds if fold not in specs]
    if missing:
        raise SystemExit(f"real_scan_cv: no package for fold(s) {missing}; give --fold-packages FOLD=DIR")
    start = time.perf_counter()
    from LambdaSegmentLib.training.export import source_revision

    results: dict[str, Any] = {"label": args.label, "revision": source_revision(), "postprocessing": args.postprocessing,
                               "steps": args.steps, "thresholds": args.thresholds, "objective_per_study": args.objective,
                               "bilateral_partner_mm": args.bilateral_partner_mm,
                               "bilateral_partner_fraction": args.bilateral_partner_fraction,
                               "bilateral_partner_total": args.bilateral_partner_total,
                               "satellite_mm": args.satellite_mm, "satellite_edge_only": args.satellite_edge_only,
                               "margin_capped": args.margin_capped, "edge_max_height": args.edge_max_height,
                               "by_thickness": args.by_thickness, "thick_slice_mm": THICK_SLICE_MM if args.by_thickness else None,
                               "validation_large": args.validation_large,
                               "validation_embolic": args.validation_embolic,
                               "search_data": args.search_data, "seed_packages": seed_specs or None,
                               "partner_packages": partner_specs or None,
                               "validation_synthesis": args.validation_synthesis, "folds": {}}
    search_studies = validation_studies(args.validation_synthesis, args.validation_large,
                                        args.validation_embolic) if args.postprocessing == "choose" else []
    synthetic_done: dict[tuple[str, str | None, str | None, str], dict[str, Any]] = {}
    pairs = tempfile.TemporaryDirectory(prefix="real_scan_cv-pairs-")  # the fold packages with a partner attached
    for fold in args.folds:
        own, held_out = FOLDS[fold]
        thick_settings: PostProcessing | None = None
        thick_objective: float | None = None
        package = fold_package(specs[fold])
        seed_package = fold_package(seed_specs[fold]) if fold in seed_specs else None
        partner_package = fold_package(partner_specs[fold]) if fold in partner_specs else None
        if partner_package is not None:
            package = paired_package(package, partner_package, Path(pairs.name) / fold)
        search_flips = args.postprocessing == "choose" and "flips" in args.steps
        if args.postprocessing == "choose":
            own_cases = [prepare(f"{own}-{'6mm' if thick else 'native'}", *load_real(own, thick), package, regions=False, flips=search_flips,
                                 seed_package=seed_package)
                         for thick in (False, True)] if args.search_data == "case+synthetic" else []
            validation = [prepare(name, study, truth, package, regions=False, flips=search_flips, seed_package=seed_package)
                          for name, study, truth in search_studies]
            def search(cases: list[Prepared]) -> tuple[PostProcessing, float]:
                return choose(cases, validation, tuple(args.steps), args.objective, tuple(args.thresholds),
                              args.bilateral_partner_mm, tuple(args.bilateral_partner_fraction),
                              args.bilateral_partner_total, args.satellite_mm, args.satellite_edge_only,
                              args.margin_capped, args.edge_max_height)

            if args.by_thickness and own_cases:  # own_cases: [native, 6 mm]
                (settings, objective), (thick_settings, thick_objective) = search(own_cases[:1]), search(own_cases[1:])
            else:
                settings, objective = search(own_cases)
        elif args.postprocessing == "package":
            settings, objective = PostProcessing.from_manifest(package.manifest), None
        else:
            settings, objective = PostProcessing(threshold=0.5), None
        fold_result: dict[str, Any] = {"uses_case": own, "held_out_case": held_out, "package": f"{package.name} {package.version}",
                                       "package_dir": specs[fold], "weights_sha256": package.sha256,
                                       "seed_package_dir": seed_specs.get(fold),
                                       "partner_package_dir": partner_specs.get(fold),
                                       "partner_weights_sha256": partner_package.sha256 if partner_package else None,
                                       "trained_on": real_cases_used(package),
                                       "postprocessing": settings.as_dict(), "objective": objective,
                                       "postprocessing_thick": thick_settings.as_dict() if thick_settings else None,
                                       "objective_thick": thick_objective, "scores": {}}
        for thick in (False, True):
            setting = "6mm" if thick else "native"
            study, truth = load_real(held_out, thick)
            chosen = settings_for(study, settings, thick_settings)
            prepared = prepare(f"{held_out}-{setting}", study, truth, package, regions=True, flips=chosen.test_time_flips,
                               seed_package=seed_package)
            model_mask = prepared.mask(chosen)
            raw_mask = prepared.mask(PostProcessing(threshold=0.5))
            rule_mask = np.asarray(adc_threshold_rule(prepared.study).array) != 0
            fold_result["scores"][setting] = {"model": score(prepared, model_mask), "model_threshold_only": score(prepared, raw_mask),
                                              "adc_rule": score(prepared, rule_mask)}
            if not args.no_montages:
                montage(prepared, model_mask, args.montage_dir / f"{args.label}_fold{fold}_{held_out}_{setting}.png",
                        f"{args.label} fold {fold}: held-out {held_out} {setting}; red FP, blue missed, green found")
            for method, row in fold_result["scores"][setting].items():
                print(f"fold {fold} {held_out} {setting:6s} {method:22s} Dice {row['volume_dice']:.3f} lesF1 {row['lesion_f1']:.3f} "
                      f"|dV| {row['abs_dv_ml']:6.2f} FP {row['fp_ml']:5.2f} (edge {row['fp_edge_ml']:.2f}, PF {row['fp_posterior_fossa_ml']:.2f}, "
                      f"else {row['fp_elsewhere_ml']:.2f}; border {row['fp_border_ml']:.2f}, detached {row['fp_detached_ml']:.2f}) mL", flush=True)
        if args.synthetic:
            # both folds of one package with one post-processing (e.g. --postprocessing package)
            # score the same synthetic studies identically: computed once
            key = (package.sha256, seed_package.sha256 if seed_package else None, partner_package.sha256 if partner_package else None,
                   json.dumps(settings.as_dict(), sort_keys=True), json.dumps(thick_settings.as_dict() if thick_settings else None, sort_keys=True))
            if key not in synthetic_done:
                synthetic_done[key] = synthetic_scores(package, settings, seed_package, thick_settings)
            fold_result["synthetic"] = synthetic_done[key]
            print(f"fold {fold} synthetic: {json.dumps(fold_result['synthetic']['summary'])}", flush=True)
        results["folds"][fold] = fold_result
    pairs.cleanup()
    results["seconds"] = round(time.perf_counter() - start, 1)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.label}.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"written {OUT / (args.label + '.json')} in {results['seconds']} s")


def ship(package_dir: Path, steps: tuple[str, ...], objective_name: str = "dice",
         extra_ranges: dict[str, Any] | None = None, thresholds: tuple[float, ...] = GRID["threshold"],
         bilateral_mm: float | None = None, bilateral_fractions: tuple[float, ...] = (0.0,), large: int = 0,
         bilateral_total: bool = False, satellite_mm: float | None = None, satellite_edge_only: bool = False,
         margin_capped: bool = False, embolic: int = 0, edge_max_height: float | None = None) -> None:
    """Choose ``package_dir``'s post-processing on both real cases and the synthetic validation
    studies (the folds' rule, with every case it may use; ``extra_ranges``: ``--validation-synthesis``;
    ``large``: ``--validation-large``; ``embolic``: ``--validation-embolic``) and write it into its
    manifest."""
    extra_ranges = extra_ranges or {}
    package = load_model_package(package_dir)
    flips = "flips" in steps
    own = [prepare(f"{case}-{'6mm' if thick else 'native'}", *load_real(case, thick), package, regions=False, flips=flips)
           for case in CASES for thick in (False, True)]
    validation = [prepare(name, study, truth, package, regions=False, flips=flips)
                  for name, study, truth in validation_studies(extra_ranges, large, embolic)]
    settings, objective = choose(own, validation, steps, objective_name, thresholds, bilateral_mm, bilateral_fractions,
                                 bilateral_total, satellite_mm, satellite_edge_only, margin_capped, edge_max_height)
    manifest_path = Path(package_dir) / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest.update(settings.manifest_entries())
    manifest["postprocessing_choice"] = {
        "command": f"benchmarks/real_scan_cv.py --ship PKG --objective {objective_name} --steps " + " ".join(steps)
                   + (f" --thresholds {' '.join(map(str, thresholds))}" if tuple(thresholds) != GRID["threshold"] else "")
                   + (f" --bilateral-partner-mm {bilateral_mm:g}" if bilateral_mm is not None else "")
                   + (f" --bilateral-partner-fraction {' '.join(f'{f:g}' for f in bilateral_fractions)}"
                      if tuple(bilateral_fractions) != (0.0,) else "")
                   + (" --bilateral-partner-total" if bilateral_total else "")
                   + (f" --satellite-mm {satellite_mm:g}" if satellite_mm is not None else "")
                   + (" --satellite-edge-only" if satellite_edge_only else "")
                   + (" --margin-capped" if margin_capped else "")
                   + (f" --edge-max-height {edge_max_height:g}" if edge_max_height is not None else "")
                   + (f" --validation-synthesis '{json.dumps(extra_ranges, sort_keys=True)}'" if extra_ranges else "")
                   + (f" --validation-large {large}" if large else "")
                   + (f" --validation-embolic {embolic}" if embolic else ""),
        "data": [f"{CASES[case]} native and 6 mm" for case in CASES] + [validation_description(extra_ranges, large, embolic)],
        "objective": round(objective, 4),
        "objective_per_study": objective_name,
    }
    temporary = manifest_path.with_name(manifest_path.name + ".partial")
    temporary.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    temporary.replace(manifest_path)
    print(f"{manifest_path}: {json.dumps(settings.manifest_entries())} (objective {objective:.4f})")


def synthetic_scores(package: ModelPackage, settings: PostProcessing, seed_package: ModelPackage | None = None,
                     thick: PostProcessing | None = None) -> dict[str, Any]:
    """Volume Dice of the model (with ``settings``, or ``thick`` on thick-slice studies when given:
    ``settings_for``; seeded by ``seed_package`` if given) and the rule on the synthetic held-out studies."""
    rows = []
    groups = (("default", SYNTHETIC_TEST_SEEDS, {}), ("large", SYNTHETIC_LARGE_SEEDS, SYNTHETIC_LARGE_RANGES))
    for group, seeds, ranges in groups:
        for seed in seeds:
            study, truth = synthetic(seed, **ranges)
            chosen = settings_for(study, settings, thick)
            prepared = prepare(f"synth-{seed}", study, truth, package, regions=False, flips=chosen.test_time_flips,
                               seed_package=seed_package)
            rule = np.asarray(adc_threshold_rule(study).array) != 0
            rows.append({"group": group, "seed": seed, "true_ml": float(truth.sum() * study.dwi.voxel_volume_mm3 / 1000),
                         "slice_mm": slice_spacing_mm(study),
                         "model_dice": volume_dice(prepared.mask(chosen), truth), "rule_dice": volume_dice(rule, truth)})
    summary = {group: {"n": sum(r["group"] == group for r in rows),
                       "model_dice": float(np.mean([r["model_dice"] for r in rows if r["group"] == group])),
                       "rule_dice": float(np.mean([r["rule_dice"] for r in rows if r["group"] == group]))}
               for group, _s, _r in groups}
    # the target of issue 13 is on infarcts of 100 mL or more as acquired (a slab may cut one)
    at_least_100 = [r for r in rows if r["true_ml"] >= 100.0]
    summary["true_100ml_or_more"] = {"n": len(at_least_100),
                                     "model_dice": float(np.mean([r["model_dice"] for r in at_least_100])) if at_least_100 else None,
                                     "rule_dice": float(np.mean([r["rule_dice"] for r in at_least_100])) if at_least_100 else None}
    return {"summary": summary, "cases": rows}


if __name__ == "__main__":
    main()
