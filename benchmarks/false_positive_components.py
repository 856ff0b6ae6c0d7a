"""The components a fold network leaves on its held-out case, one by one: the detached false
positives, and with ``--lesions`` the found lesions beside them, with the features a rule could
tell them apart by. ``--threshold T`` cuts the components at a package's own operating point
instead of 0.5 (recorded in the results file).

    .venv/bin/python benchmarks/false_positive_components.py --label NAME \\
        --package 0003=runs/x/foldA/pkg --seed-package runs/x/pretrain/pkg [--lesions] [--synthetic-large]

Each ``--package CASE=DIR`` is segmented on its held-out ISLES'22 case (native), seeded by
``--seed-package`` as the fold rows are (``real_scan_cv.prepare``). At the bare probability
threshold 0.5, without the other post-processing steps, every 26-connected component that holds no
expert voxel is listed ("false"), and with ``--lesions`` every one that holds some ("lesion"):

- voxels, slices, median depth below the brain's edge (mm), median DWI (× the brain's median)
  and median ADC (10⁻³ mm²/s);
- ``ring_dwi`` / ``ring_adc``: the component's median DWI / ADC over the median of its in-plane
  ring 2-6 mm out (brain voxels outside every candidate and the reference): how it stands out
  from the tissue around it, which a global threshold does not see;
- ``contralateral``: its mean DWI over the registered mirror's (σ = 1 voxel; the contralateral
  check's ratio);
- ``partner_share``: its largest bilateral partner within 4 mm in-plane, as a share of its own
  voxels (``postprocess.bilateral_partners``; 0 = none);
- ``partner_share_across``: the same within 4 mm in-plane and one slice either way: whether a
  partner the in-plane search misses lies on the neighbouring slice of the registered mirror;
- ``partner_share_total``: all its partners within 4 mm in-plane counted together
  (``bilateral_partners(total=True)``, ``PostProcessing.bilateral_partner_total``; rule 128);
- ``elongation``: on its largest slice, the ratio of its in-plane principal axes (mm; None under 3 voxels);
- ``csf_mm``: median distance (mm) to the nearest brain voxel whose ADC is at least 2.5 × the
  brain's median (ventricles, temporal horns, sulci).

``--experts`` lists every expert lesion (26-connected component of the reference) as well, with
what it would take to find it: its voxels, median DWI, ADC, depth and ``csf_mm`` (as above, the
CSF-like voxels of the expert's lesions left out), the network's largest
probability on it (before any seed step), whether the seed network marks any of it (with
``--seed-package``), at which of the thresholds 0.5, 0.3 and 0.1 a candidate component (after
the seed step, if any) reaches it (``found_at``), and how many of its voxels those candidates
cover there (``covered``). It says whether a more sensitive operating point could reach the
missed lesions at all, and whether the seed step would let it (issue 13's rule 85). It also
splits the expert voxels three ways at 0.5 (``expert_voxels``): covered by a candidate, missed
inside a lesion a candidate reaches, and in lesions no candidate reaches; per group the voxels,
median DWI (× the brain's median) with its interquartile range, median ADC, median probability,
and for the missed-inside ones their distance (mm) to the nearest covered voxel: whether what
is lost is a rim around found lesions or whole lesions. ``--synthetic-margins`` adds the same
split on the protocol's 16 synthetic scoring studies (``real_scan_cv.SYNTHETIC_TEST_SEEDS``):
whether the network misses the margins of synthetic lesions too, or only the real ones.

``--synthetic-large`` lists the same for each package on the protocol's six whole-territory
synthetic scoring studies (``real_scan_cv.SYNTHETIC_LARGE_SEEDS``): there the infarct's
``partner_share`` says whether rule 82's bilateral step pairs it with a speck (issue 13's rule 83).
Issue 13's rules 82-83 read the skull-base marks with it. Writes
``benchmarks/results/false_positive_components_<label>.json``; no image.

``--summary LABEL ...`` reads such results back and prints, per held-out case and kind, how many
components there are, their mL, and how many (and how many mL) have a bilateral partner at all,
of at least 0.1 and of at least 0.5 of their size (voxel volume: the case's own), and each
feature's interquartile range over the components, and with ``--synthetic-margins`` results
each package's expert-voxel split summed over the synthetic studies:

    .venv/bin/python benchmarks/false_positive_components.py --summary rim30-stream507-seed5-lesions ...
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

from LambdaSegmentLib.metrics import label_lesions  # noqa: E402
from real_scan_cv import (CASES, ISLES, SYNTHETIC_LARGE_RANGES, SYNTHETIC_LARGE_SEEDS, SYNTHETIC_TEST_SEEDS, Prepared,  # noqa: E402
                          fold_package, load_real, prepare, real_cases_used, synthetic)

THRESHOLD = 0.5
PARTNER_MM = 4.0
RING_MM = (2.0, 6.0)
CSF_RELATIVE_ADC = 2.5
EXPERT_THRESHOLDS = (0.5, 0.3, 0.1)  # --experts: the operating points each lesion is tried at
FEATURES = ("depth_mm", "dwi", "adc", "ring_dwi", "ring_adc", "contralateral", "elongation", "csf_mm")  # --summary's


def in_plane_ball(prepared: Prepared, radius_mm: float) -> np.ndarray:
    """bool (2rk+1, 2rj+1, 2ri+1): an in-plane ellipse of ``radius_mm`` on the study's grid."""
    from LambdaSegmentLib.inference.postprocess import ellipse_footprint, partner_radius_voxels

    return ellipse_footprint(partner_radius_voxels(prepared.study.dwi, radius_mm))


def elongation(component: np.ndarray, spacing_kji: tuple[float, float, float]) -> float | None:
    """Ratio of the in-plane principal axes (mm) on the component's largest slice (axial stack)."""
    k = int(np.argmax(component.sum(axis=(1, 2))))
    jj, ii = np.nonzero(component[k])
    if jj.size < 3:
        return None
    points = np.stack([jj * spacing_kji[1], ii * spacing_kji[2]])
    low, high = np.linalg.eigvalsh(np.cov(points))
    return round(float(np.sqrt(high / max(low, 1e-6))), 2)


def relative_dwi_and_adc(prepared: Prepared) -> tuple[np.ndarray, np.ndarray]:
    """float64 (nk, nj, ni) each: the study's DWI over its brain median, and its ADC as given
    (10⁻³ mm²/s): what every row's ``dwi`` and ``adc`` are medians of."""
    dwi = np.asarray(prepared.study.dwi.array, dtype=np.float64)
    return dwi / np.median(dwi[prepared.brain]), np.asarray(prepared.study.adc.array, dtype=np.float64)


def component_rows(name: str, prepared: Prepared, package_dir: str, threshold: float = THRESHOLD) -> list[dict[str, Any]]:
    """One row per candidate component at ``threshold`` (after the seed step), features as the module says."""
    from LambdaSegmentLib.inference.postprocess import bilateral_partners, partner_radius_voxels

    study = prepared.study
    dwi, adc = relative_dwi_and_adc(prepared)
    components = prepared.components(threshold, bilateral_mm=PARTNER_MM)
    labels = components.labels
    in_plane = partner_radius_voxels(study.dwi, PARTNER_MM)
    mirrored = prepared.registration.mirrored_labels(labels)
    # the in-plane radius, and one slice either way along the slice axis (its radius is the 0)
    across = bilateral_partners(labels, mirrored, tuple(r if r else 1 for r in in_plane))
    together = bilateral_partners(labels, mirrored, in_plane, total=True)
    spacing_kji = tuple(reversed(study.dwi.spacing_mm))
    near, far = (in_plane_ball(prepared, mm) for mm in RING_MM)
    tissue = prepared.brain & (labels == 0) & ~prepared.truth
    to_csf = distance_to_csf(prepared)
    rows = []
    for index, box in enumerate(ndimage.find_objects(labels), start=1):
        if box is None:
            continue
        pad = tuple(slice(max(b.start - r, 0), min(b.stop + r, n)) for b, r, n in zip(box, np.array(far.shape) // 2, labels.shape))
        component = labels[pad] == index
        ring = ndimage.binary_dilation(component, far) & ~ndimage.binary_dilation(component, near) & tissue[pad]
        slices = np.nonzero(component.any(axis=(1, 2)))[0] + pad[0].start
        own_dwi, own_adc = float(np.median(dwi[pad][component])), float(np.median(adc[pad][component]))
        rows.append({
            "case": name, "package": package_dir, "kind": "lesion" if prepared.truth[pad][component].any() else "false",
            "voxels": int(component.sum()), "slices": [int(slices.min()), int(slices.max())],
            "depth_mm": round(float(np.median(prepared.depth_mm[pad][component])), 1),
            "dwi": round(own_dwi, 2), "adc": round(own_adc, 2),
            "ring_dwi": round(own_dwi / float(np.median(dwi[pad][ring])), 2) if ring.any() else None,
            "ring_adc": round(own_adc / float(np.median(adc[pad][ring])), 2) if ring.any() else None,
            "contralateral": round(float(components.contralateral_ratio[index - 1]), 2),
            "partner_share": round(float(components.bilateral[0][index - 1]), 3),
            "partner_share_across": round(float(across[index - 1]), 3),
            "partner_share_total": round(float(together[index - 1]), 3),
            "elongation": elongation(component, spacing_kji),
            "csf_mm": round(float(np.median(to_csf[pad][component])), 1),
        })
    return rows


def distance_to_csf(prepared: Prepared, outside: np.ndarray | None = None) -> np.ndarray:
    """float (nk, nj, ni): each voxel's distance (mm) to the nearest brain voxel whose ADC is at least
    ``CSF_RELATIVE_ADC`` x the brain's median (``csf_mm``), voxels of ``outside`` never counting as
    CSF; nan everywhere when the brain holds no such voxel."""
    csf = prepared.brain & (prepared.adc_ratio >= CSF_RELATIVE_ADC)
    if outside is not None:
        csf &= ~outside
    if not csf.any():
        return np.full(csf.shape, np.nan)
    return ndimage.distance_transform_edt(~csf, sampling=tuple(reversed(prepared.study.dwi.spacing_mm)))


def expert_rows(name: str, prepared: Prepared) -> list[dict[str, Any]]:
    """One row per expert lesion (26-connected component of the reference): what it would take to
    find it (see the module docstring, ``--experts``)."""
    dwi, adc = relative_dwi_and_adc(prepared)
    lesions, _ = label_lesions(prepared.truth)
    found = {t: prepared.components(t).labels != 0 for t in EXPERT_THRESHOLDS}
    seed = prepared.seed
    to_csf = distance_to_csf(prepared, outside=prepared.truth)  # an expert lesion is never its own CSF
    rows = []
    for index, box in enumerate(ndimage.find_objects(lesions), start=1):
        lesion = lesions[box] == index
        covered = [int(found[t][box][lesion].sum()) for t in EXPERT_THRESHOLDS]
        rows.append({
            "case": name, "voxels": int(lesion.sum()),
            "dwi": round(float(np.median(dwi[box][lesion])), 2), "adc": round(float(np.median(adc[box][lesion])), 2),
            "depth_mm": round(float(np.median(prepared.depth_mm[box][lesion])), 1),
            "csf_mm": round(float(np.median(to_csf[box][lesion])), 1),
            "max_probability": round(float(prepared.probability[box][lesion].max()), 3),
            "seeded": None if seed is None else bool(seed[box][lesion].any()),
            "found_at": [t for t, voxels in zip(EXPERT_THRESHOLDS, covered) if voxels],
            "covered": covered,
        })
    return rows


def expert_voxel_groups(prepared: Prepared, threshold: float = THRESHOLD) -> dict[str, dict[str, Any]]:
    """The expert voxels split at ``threshold`` (after any seed step): ``covered`` by a candidate,
    ``missed_in_found`` (in an expert lesion some candidate reaches, not covered) and
    ``in_unfound`` (in lesions no candidate reaches), with their median DWI (× the brain median,
    and its quartiles), ADC, probability, and for ``missed_in_found`` the distance (mm) to the
    nearest covered voxel (median and quartiles)."""
    dwi, adc = relative_dwi_and_adc(prepared)
    candidate = prepared.components(threshold).labels != 0
    lesions, _ = label_lesions(prepared.truth)
    reached = np.unique(lesions[candidate & prepared.truth])
    in_found = np.isin(lesions, reached[reached > 0])
    covered = prepared.truth & candidate
    groups = {"covered": covered, "missed_in_found": prepared.truth & in_found & ~candidate,
              "in_unfound": prepared.truth & ~in_found}
    spacing_kji = tuple(reversed(prepared.study.dwi.spacing_mm))
    to_covered = ndimage.distance_transform_edt(~covered, sampling=spacing_kji) if covered.any() else None
    out: dict[str, dict[str, Any]] = {}
    for name, voxels in groups.items():
        entry: dict[str, Any] = {"voxels": int(voxels.sum())}
        if voxels.any():
            entry.update({"dwi": [round(float(q), 2) for q in np.percentile(dwi[voxels], [50, 25, 75])],
                          "adc": round(float(np.median(adc[voxels])), 2),
                          "probability": round(float(np.median(prepared.probability[voxels])), 3)})
            if name == "missed_in_found" and to_covered is not None:
                entry["mm_to_covered"] = [round(float(q), 1) for q in np.percentile(to_covered[voxels], [50, 25, 75])]
        out[name] = entry
    return out


def expert_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per held-out case: expert lesions and mL found at each of ``EXPERT_THRESHOLDS`` (after any
    seed step), the expert mL those candidates cover (``covered_<t>_ml``), and of those not found
    at 0.5, how many the network gives 0.3-0.5 or 0.1-0.3 at most, and how many of those the
    seed network marks. Each row carries its case's ``voxel_ml``."""
    table: dict[str, Any] = {}
    for row in rows:
        entry = table.setdefault(row["case"], {"lesions": 0, "ml": 0.0})
        ml = row["voxels"] * row["voxel_ml"]
        entry["lesions"] += 1
        entry["ml"] += ml
        for t, covered in zip(EXPERT_THRESHOLDS, row["covered"]):
            entry[f"covered_{t}_ml"] = entry.get(f"covered_{t}_ml", 0.0) + covered * row["voxel_ml"]
            if t in row["found_at"]:
                entry[f"found_{t}"] = entry.get(f"found_{t}", 0) + 1
                entry[f"found_{t}_ml"] = entry.get(f"found_{t}_ml", 0.0) + ml
        if 0.5 not in row["found_at"]:
            for low, high in ((0.3, 0.5), (0.1, 0.3)):
                if low <= row["max_probability"] < high:
                    key = f"missed_p{low}-{high}"
                    entry[key] = entry.get(key, 0) + 1
                    entry[f"{key}_ml"] = entry.get(f"{key}_ml", 0.0) + ml
                    entry[f"{key}_seeded"] = entry.get(f"{key}_seeded", 0) + int(bool(row["seeded"]))
    return {case: {k: round(v, 2) if isinstance(v, float) else v for k, v in entry.items()} for case, entry in sorted(table.items())}


def summary(labels: list[str]) -> dict[str, dict[str, Any]]:
    """Per (held-out case, kind) over the results of ``labels``: components, mL, how many have
    a bilateral partner (share > 0, >= 0.1, >= 0.5), and each feature's interquartile range
    (``iqr``, over the components where it is defined); the synthetic studies' rows left out."""
    from LambdaSegmentLib.io import read_volume

    voxel_ml = {case: read_volume(ISLES / CASES[case] / f"{CASES[case]}_ses-0001_dwi.nii.gz").voxel_volume_mm3 / 1000
                for case in CASES}
    table: dict[str, dict[str, Any]] = {}
    values: dict[str, dict[str, list[float]]] = {}
    experts: list[dict[str, Any]] = []
    results = [json.loads((REPO / "benchmarks" / "results" / f"false_positive_components_{label}.json").read_text())
               for label in labels]
    for result in results:
        experts += [{**row, "voxel_ml": voxel_ml[row["case"]]} for row in result.get("experts", []) if row["case"] in CASES]
        rows = result["rows"]
        for row in rows:
            if row["case"] not in CASES:
                continue
            entry = table.setdefault(f"{row['case']} {row['kind']}", {"components": 0, "ml": 0.0})
            ml = row["voxels"] * voxel_ml[row["case"]]
            entry["components"] += 1
            entry["ml"] += ml
            for feature in FEATURES:
                if row[feature] is not None:
                    values.setdefault(f"{row['case']} {row['kind']}", {}).setdefault(feature, []).append(row[feature])
            for name, partnered in (("any", row["partner_share"] > 0), ("0.1", row["partner_share"] >= 0.1),
                                    ("0.5", row["partner_share"] >= 0.5)):
                entry[f"partner_{name}"] = entry.get(f"partner_{name}", 0) + int(partnered)
                entry[f"partner_{name}_ml"] = entry.get(f"partner_{name}_ml", 0.0) + (ml if partnered else 0.0)
    for key, entry in table.items():
        entry["iqr"] = {feature: [round(float(q), 2) for q in np.percentile(found, [25, 75])]
                        for feature, found in values.get(key, {}).items()}
    out = {key: {k: round(v, 2) if isinstance(v, float) else v for k, v in entry.items()} for key, entry in sorted(table.items())}
    out.update({f"{case} experts": entry for case, entry in expert_summary(experts).items()})
    out.update(synthetic_voxel_totals(results))
    return out


def synthetic_voxel_totals(results: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """``--synthetic-margins``' expert-voxel split of these results files summed over their
    synthetic studies, one entry per package (``"synthetic <package>"``): voxels covered, missed
    inside found lesions and in lesions never reached, and the number of studies with a lesion."""
    totals: dict[str, dict[str, int]] = {}
    for result in results:
        for key, groups in result.get("expert_voxels", {}).items():
            study, _, package = key.partition(" ")
            if not study.startswith("synth-"):
                continue
            entry = totals.setdefault(f"synthetic {package}", {"studies": 0, "covered": 0, "missed_in_found": 0, "in_unfound": 0})
            entry["studies"] += 1
            for group in ("covered", "missed_in_found", "in_unfound"):
                entry[group] += int(groups[group]["voxels"])
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary", nargs="+", default=None, metavar="LABEL",
                        help="summarise these labels' results (no segmentation)")
    parser.add_argument("--label")
    parser.add_argument("--package", action="append", metavar="CASE=DIR")
    parser.add_argument("--seed-package", default=None, metavar="DIR")
    parser.add_argument("--lesions", action="store_true", help="list the components that hold expert voxels too")
    parser.add_argument("--experts", action="store_true",
                        help="list every expert lesion too, with the probability and the threshold that would find it")
    parser.add_argument("--synthetic-margins", action="store_true",
                        help="with --experts: the expert-voxel split on the 16 synthetic scoring studies too")
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help=f"the probability the components are cut at (default {THRESHOLD})")
    parser.add_argument("--synthetic-large", action="store_true",
                        help="also each package on the six whole-territory synthetic scoring studies (every component)")
    args = parser.parse_args()
    if not ISLES.is_dir():
        raise SystemExit(f"false_positive_components: {ISLES} is absent; it needs the two ISLES'22 cases")
    if args.summary:
        for key, entry in summary(args.summary).items():
            print(key, json.dumps(entry))
        return
    if not args.label or not args.package:
        parser.error("--label and --package are required (or --summary LABEL ...)")
    if args.synthetic_margins and not args.experts:
        parser.error("--synthetic-margins splits the expert voxels: give --experts too")
    seed = fold_package(args.seed_package) if args.seed_package else None
    rows, experts = [], []
    expert_voxels: dict[str, Any] = {}
    for spec in args.package:
        case, directory = spec.split("=", 1)
        package = fold_package(directory)
        if case in real_cases_used(package):
            raise SystemExit(f"false_positive_components: {directory} was trained on {case}; it is not held out")
        studies = [(case, *load_real(case, False))]
        if args.synthetic_large:
            studies += [(f"synth-{s}", *synthetic(s, **SYNTHETIC_LARGE_RANGES)) for s in SYNTHETIC_LARGE_SEEDS]
        if args.synthetic_margins:
            studies += [(f"synth-{s}", *synthetic(s)) for s in SYNTHETIC_TEST_SEEDS]
        for name, study, truth in studies:
            prepared = prepare(name, study, truth, package, regions=False, seed_package=seed)
            if args.experts and (name in CASES or args.synthetic_margins) and truth.any():
                key = spec if name in CASES else f"{name} {directory}"
                expert_voxels[key] = expert_voxel_groups(prepared)
                print(json.dumps({"expert_voxels": {key: expert_voxels[key]}}), flush=True)
            if args.experts and name in CASES:
                for row in expert_rows(name, prepared):
                    experts.append({**row, "package": directory})
                    print(json.dumps(experts[-1]), flush=True)
            for row in component_rows(name, prepared, directory, args.threshold):
                if row["kind"] == "false" or args.lesions or name.startswith("synth-"):
                    rows.append(row)
                    print(json.dumps(rows[-1]), flush=True)
    from LambdaSegmentLib.training.export import source_revision

    out = REPO / "benchmarks" / "results" / f"false_positive_components_{args.label}.json"
    command = (f"benchmarks/false_positive_components.py --label {args.label}" + "".join(f" --package {p}" for p in args.package)
               + (f" --seed-package {args.seed_package}" if args.seed_package else "")
               + (f" --threshold {args.threshold:g}" if args.threshold != THRESHOLD else "")
               + (" --lesions" if args.lesions else "") + (" --synthetic-margins" if args.synthetic_margins else "") + (" --experts" if args.experts else "") + (" --synthetic-large" if args.synthetic_large else ""))
    out.write_text(json.dumps({"command": command, "revision": source_revision(), "rows": rows, "experts": experts,
                                "expert_voxels": expert_voxels}, indent=1) + "\n", encoding="utf-8")
    print(f"written {out}")


if __name__ == "__main__":
    main()
