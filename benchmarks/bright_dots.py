"""Lesion-sized bright DWI dots outside lesions: real brains against synthetic ones.

Why: the real embolic dots of case 0001 (5-25 voxels, DWI 1.3-1.4x their ring, ADC 0.8x) are
missed by every model, while synthetic emboli of the same size and contrast are found, even
some with a normal ADC. A model learns what separates a lesion from everything else a brain
holds at that scale; this script counts what else a brain holds.

A dot: a 26-connected component of 5-25 voxels where DWI >= ``RATIO`` x its local background
(the in-plane median of the brain's DWI over 9 x 9 voxels), at least ``MIN_DEPTH_MM`` below the
brain's edge (the edge rims are another story: ``synthesis_edge_realism.py``). Each dot is
called a lesion dot when it touches the expert (or generator) mask dilated by 2 voxels, else
an "other" dot. Per dot: mean DWI / mean DWI of its ring (brain voxels within 2 voxels, not in
the dot), median ADC / median ADC of the ring, and median ADC / the brain's median ADC. Per study: other dots per 100 mL of brain,
and the DWI texture, the standard deviation of (DWI - its 3 x 3 in-plane median) / the brain's
median DWI over brain voxels at least 6 mm deep (noise and fine anatomy), and the CSF share: the
fraction of those deep voxels with an ADC above 1.5e-3 mm^2/s (ventricles, sulci, fissures).

Studies: the two ISLES'22 cases (``../shared``, skull-stripped, 2 mm), 8 synthetic embolic
showers (``small_lesion_detection.py``'s, seeds 33,000,000+) and 8 synthetic studies at the
generator's default ranges made skull-stripped at 2 mm like the real cases (seeds 33,100,000+).
Only numbers are written, never images. ``--synthesis JSON`` adds generator options to both
synthetic groups (e.g. ``'{"csf_expansion": [1.0, 3.0]}'``).

With ``--mirror`` every dot also gets the contralateral check's own ratio (the product's
``find_components``: mean smoothed DWI over the dot / mean of the registered mirror there,
``symmetry.contralateral_dwi``), and with ``--package CASE=DIR`` (a fold package held out on
CASE) each of that real case's dots gets the package's highest probability on it (plain pass,
as ``real_scan_cv.prepare``). Issue 13: the real brains hold three or four dots of no lesion
for every lesion dot, alike on DWI and ADC against their ring; whether anything else tells
them apart (the mirror, or the network already) is what these two answer. Per group with both
kinds of dot, ``separability`` gives for each measure the probability that a lesion dot is
more lesion-like than an other dot (the area under the ROC curve: brighter DWI / ring and
mirror, lower ADC, higher probability; 0.5 is no separation).

    nice -n 10 .venv/bin/python benchmarks/bright_dots.py    # -> benchmarks/results/bright_dots.{json,md}
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import CASES, ISLES, fold_package, load_real, prepare, real_cases_used, synthetic  # noqa: E402
from harness import invocation  # noqa: E402
from small_lesion_detection import EMBOLIC  # noqa: E402

from LambdaSegmentLib.cli import json_object  # noqa: E402
from LambdaSegmentLib.inference.postprocess import edge_depth_mm  # noqa: E402
from LambdaSegmentLib.io import Study  # noqa: E402
from LambdaSegmentLib.metrics.regions import posterior_fossa_mask  # noqa: E402
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask  # noqa: E402
from LambdaSegmentLib.preprocessing.symmetry import contralateral_dwi  # noqa: E402

RATIO = 1.25  # DWI / local background of a dot
SIZE = (5, 25)  # voxels, half-open
MIN_DEPTH_MM = 6.0
BACKGROUND_PX = 9  # in-plane median window of the local background
RING = 2  # voxels
CSF_ADC = 1.5  # 1e-3 mm^2/s: above it a voxel is mostly CSF
OPTIONAL_MEASURES = ("mirror", "max_probability")  # per dot, with --mirror and --package
REACH_THRESHOLDS = (0.5, 0.1, 0.01, 0.001)  # probabilities at which the dots a network reaches are counted
LOWER_IS_LESION = ("adc_ring", "adc_brain")  # measures on which a lesion dot is the lower one (restricted)
EMBOLIC_SEEDS = range(33_000_000, 33_000_008)
DEFAULT_SEEDS = range(33_100_000, 33_100_008)
DEFAULT = {"skull_stripped": True, "in_plane_spacing_mm": 2.0, "slice_thickness_mm": 2.0}


def find_dots(study: Study) -> tuple[np.ndarray, list[int], np.ndarray, np.ndarray]:
    """The study's dots (module docstring): int (nk, nj, ni) labels of its bright deep components,
    the labels of those that are dots (5-25 voxels), and the bool brain mask and deep-brain mask
    (at least ``MIN_DEPTH_MM`` below its edge) they were found in."""
    dwi = np.asarray(study.dwi.array, dtype=np.float32)
    brain = brain_mask(study.dwi, foreground=study.foreground)
    deep = edge_depth_mm(brain, study.dwi.spacing_mm) >= MIN_DEPTH_MM
    median = float(np.median(dwi[brain]))
    in_plane = (1, BACKGROUND_PX, BACKGROUND_PX)  # (k, j, i): never across slices
    background = ndimage.median_filter(np.where(brain, dwi, median), size=in_plane)
    bright = (dwi >= RATIO * np.maximum(background, 1e-6)) & deep
    labels, count = ndimage.label(bright, structure=np.ones((3, 3, 3)))
    sizes = np.asarray(ndimage.sum_labels(bright, labels, range(1, count + 1))).reshape(-1)
    return labels, (np.flatnonzero((sizes >= SIZE[0]) & (sizes < SIZE[1])) + 1).tolist(), brain, deep


def study_dots(study: Study, truth: np.ndarray, *, mirror: bool = False, probability: np.ndarray | None = None) -> dict[str, Any]:
    """Dots of one study (module docstring): per-dot ratios, dots per 100 mL, DWI texture; with
    ``mirror`` each dot's DWI over its registered mirror, with ``probability`` (float (nk, nj, ni),
    a network's on the study) each dot's highest probability."""
    dwi = np.asarray(study.dwi.array, dtype=np.float32)
    adc = np.asarray(study.adc.array, dtype=np.float32)
    labels, dot_labels, brain, deep = find_dots(study)
    pair = contralateral_dwi(study.dwi, brain) if mirror else None
    median, adc_median = float(np.median(dwi[brain])), float(np.median(adc[brain]))
    near_lesion = ndimage.binary_dilation(truth, iterations=RING)
    fossa = posterior_fossa_mask(study.dwi, brain)
    dots: dict[str, list[dict[str, float]]] = {"lesion": [], "other": []}
    for label in dot_labels:
        inside = labels == label
        ring = ndimage.binary_dilation(inside, iterations=RING) & ~inside & brain
        dot = {
            "dwi_ring": float(dwi[inside].mean() / dwi[ring].mean()),
            "adc_ring": float(np.median(adc[inside]) / np.median(adc[ring])),
            "adc_brain": float(np.median(adc[inside]) / adc_median),
            "posterior_fossa": bool((inside & fossa).sum() * 2 > inside.sum()),
        }
        if pair is not None:  # as find_components computes the contralateral check's ratio
            dot["mirror"] = float(pair[0][inside].mean() / max(float(pair[1][inside].mean()), 1e-6))
        if probability is not None:
            dot["max_probability"] = float(np.max(probability[inside]))
        dots["lesion" if (inside & near_lesion).any() else "other"].append(dot)
    fine = dwi - ndimage.median_filter(dwi, size=(1, 3, 3))
    brain_ml = float(brain.sum()) * study.dwi.voxel_volume_mm3 / 1000.0
    supratentorial_ml = float((brain & ~fossa).sum()) * study.dwi.voxel_volume_mm3 / 1000.0
    above = [dot for dot in dots["other"] if not dot["posterior_fossa"]]
    return {"brain_ml": brain_ml, "other_per_100ml": 100.0 * len(dots["other"]) / brain_ml,
            "csf_share": float(np.mean(adc[deep] > CSF_ADC)),
            "supratentorial_other_per_100ml": 100.0 * len(above) / supratentorial_ml,
            "texture": float(np.std(fine[deep & ~near_lesion]) / median), "dots": dots}


def summary(studies: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians and quartiles over the dots of a group of studies ("other" also split into the
    posterior fossa's and the supratentorial ones), and the per-study rates."""
    out: dict[str, Any] = {"studies": len(studies),
                           "other_per_100ml": [round(s["other_per_100ml"], 2) for s in studies],
                           "supratentorial_other_per_100ml": [round(s["supratentorial_other_per_100ml"], 2) for s in studies],
                           "texture": [round(s["texture"], 3) for s in studies],
                           "csf_share": [round(s["csf_share"], 3) for s in studies],
                           "brain_ml": [round(s["brain_ml"]) for s in studies]}
    # (summary key, kind of dot, supratentorial ones only)
    for kind, source, supratentorial in (("lesion", "lesion", False), ("other", "other", False),
                                         ("other_supratentorial", "other", True)):
        dots = [dot for s in studies for dot in s["dots"][source] if not (supratentorial and dot["posterior_fossa"])]
        out[kind] = {"n": len(dots)}
        for key in ("dwi_ring", "adc_ring", "adc_brain"):
            values = np.array([dot[key] for dot in dots])
            out[kind][key] = [round(float(q), 3) for q in np.quantile(values, (0.25, 0.5, 0.75))] if len(values) else None
        adc = np.array([dot["adc_ring"] for dot in dots])
        out[kind]["adc_ring_below_0.8"] = round(float((adc < 0.8).mean()), 3) if len(adc) else None
        for key in OPTIONAL_MEASURES:
            values = np.array([dot[key] for dot in dots if key in dot])
            if len(values):
                out[kind][key] = [round(float(q), 3) for q in np.quantile(values, (0.25, 0.5, 0.75))]
    lesion = [dot for s in studies for dot in s["dots"]["lesion"]]
    other = [dot for s in studies for dot in s["dots"]["other"]]
    if any("max_probability" in dot for dot in lesion + other):  # dots the network reaches, per threshold
        out["reached"] = {f"{t:g}": [sum(d["max_probability"] >= t for d in lesion), sum(d["max_probability"] >= t for d in other)]
                          for t in REACH_THRESHOLDS}
    if lesion and other:
        out["separability"] = {key: round(separability([d[key] for d in lesion if key in d], [d[key] for d in other if key in d],
                                                        higher_is_lesion=key not in LOWER_IS_LESION), 3)
                               for key in ("dwi_ring", "adc_ring", "adc_brain", *OPTIONAL_MEASURES) if key in lesion[0]}
    return out


def separability(lesion: list[float], other: list[float], *, higher_is_lesion: bool) -> float:
    """The area under the ROC curve of one measure, lesion dots against other dots: the share
    of (lesion, other) pairs in which the lesion dot is the more lesion-like (ties count half).
    0.5 is no separation, 1 a perfect one."""
    a = np.asarray(lesion, dtype=np.float64)[:, None]
    b = np.asarray(other, dtype=np.float64)[None, :]
    if not higher_is_lesion:
        a, b = -a, -b
    return float(np.mean((a > b) + 0.5 * (a == b)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "bright_dots")
    parser.add_argument("--synthesis", type=json_object, default={}, metavar="JSON",
                        help="generator options added to both synthetic groups")
    parser.add_argument("--mirror", action="store_true", help="each dot's DWI over its registered mirror (the contralateral check's ratio)")
    parser.add_argument("--package", action="append", default=[], metavar="CASE=DIR",
                        help="a fold package held out on real case CASE: its highest probability on each of that case's dots")
    args = parser.parse_args()
    packages = {}
    for spec in args.package:
        case, _, directory = spec.partition("=")
        if case not in CASES:
            parser.error(f"--package {spec}: the case must be one of {', '.join(CASES)}")
        packages[case] = fold_package(directory)
        if case in real_cases_used(packages[case]):
            parser.error(f"--package {spec}: {directory} was trained on {case}; it is not held out")
    groups: dict[str, list[dict[str, Any]]] = {}
    if ISLES.is_dir():
        for case in CASES:
            study, truth = load_real(case, False)
            probability = prepare(case, study, truth, packages[case], regions=False).probability if case in packages else None
            groups[f"real {case}"] = [study_dots(study, truth, mirror=args.mirror, probability=probability)]
    groups["synthetic embolic (small_lesion_detection.py)"] = [
        study_dots(*synthetic(seed, **{**EMBOLIC, **args.synthesis}), mirror=args.mirror) for seed in EMBOLIC_SEEDS]
    groups["synthetic default ranges, skull-stripped 2 mm"] = [
        study_dots(*synthetic(seed, **{**DEFAULT, **args.synthesis}), mirror=args.mirror) for seed in DEFAULT_SEEDS]
    results = {"synthesis": args.synthesis, "ratio": RATIO, "size_voxels": SIZE, "min_depth_mm": MIN_DEPTH_MM, "background_px": BACKGROUND_PX,
               "packages": {case: f"{package.directory} (SHA-256 {package.sha256[:12]})" for case, package in packages.items()},
               "groups": {name: summary(studies) for name, studies in groups.items()}}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    lines = ["# Lesion-sized bright DWI dots outside lesions", "",
             f"Command: `{invocation()}` (definitions in its docstring). "
             "Quartiles [25 %, median, 75 %] over the dots of each group.", "",
             f"Synthesis options added: {json.dumps(args.synthesis)}.", "",
             "| group | CSF share 6 mm deep (per study) | brain mL | other dots per 100 mL (per study) "
             "| supratentorial ones per 100 mL of supratentorial brain | DWI texture (per study) | other dots: n, DWI/ring, ADC/ring, share ADC/ring < 0.8, ADC/brain "
             "| supratentorial other dots: the same | lesion dots: the same |", "|---|---|---|---|---|---|---|---|---|"]
    for name, entry in results["groups"].items():
        cells = []
        for kind in ("other", "other_supratentorial", "lesion"):
            e = entry[kind]
            cells.append(f"{e['n']}, {e['dwi_ring']}, {e['adc_ring']}, {e['adc_ring_below_0.8']}, {e['adc_brain']}" if e["n"] else "0")
        lines.append(f"| {name} | {entry['csf_share']} | {entry['brain_ml']} | {entry['other_per_100ml']} | {entry['supratentorial_other_per_100ml']} | {entry['texture']} "
                     f"| {cells[0]} | {cells[1]} | {cells[2]} |")
    separable = {name: entry for name, entry in results["groups"].items() if "separability" in entry}
    if args.mirror or packages:
        lines += ["", "Lesion dots against other dots: quartiles of each further measure, and the area under the ROC "
                  "curve of every measure (the share of pairs in which the lesion dot is the more lesion-like; 0.5: none).", "",
                  "| group | kind | n | " + " | ".join(OPTIONAL_MEASURES) + " |", "|---|---|---|" + "---|" * len(OPTIONAL_MEASURES)]
        for name, entry in results["groups"].items():
            for kind in ("lesion", "other"):
                lines.append(f"| {name} | {kind} | {entry[kind]['n']} | " + " | ".join(str(entry[kind].get(key, "–")) for key in OPTIONAL_MEASURES) + " |")
        lines += ["", "| group | " + " | ".join(f"AUC {key}" for key in ("dwi_ring", "adc_ring", "adc_brain", *OPTIONAL_MEASURES)) + " |",
                  "|---|" + "---|" * (3 + len(OPTIONAL_MEASURES))]
        for name, entry in separable.items():
            lines.append(f"| {name} | " + " | ".join(str(entry["separability"].get(key, "–"))
                                                    for key in ("dwi_ring", "adc_ring", "adc_brain", *OPTIONAL_MEASURES)) + " |")
        reached = {name: entry["reached"] for name, entry in results["groups"].items() if "reached" in entry}
        if reached:
            lines += ["", "Dots the package reaches (highest probability at least t): lesion dots of all, other dots of all.", "",
                      "| group | " + " | ".join(f"t {t:g}" for t in REACH_THRESHOLDS) + " |", "|---|" + "---|" * len(REACH_THRESHOLDS)]
            for name, counts in reached.items():
                entry = results["groups"][name]
                lines.append(f"| {name} | " + " | ".join(f"{counts[f'{t:g}'][0]} of {entry['lesion']['n']}, {counts[f'{t:g}'][1]} of {entry['other']['n']}"
                                                        for t in REACH_THRESHOLDS) + " |")
    args.output.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
