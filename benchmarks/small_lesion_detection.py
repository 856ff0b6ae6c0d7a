"""Which lesions a model finds, by size and brightness: the lesion-wise F1's missing part.

Issue 13's lesion-wise F1 is missed because small, faint lesions (embolic dots and
satellites of 1-25 voxels at 1.2-2 × the brain's median DWI) get no probability at all. This
script counts, per model package, the true lesions (26-connected, as the lesion-wise F1) whose
highest probability reaches the threshold, binned by size in voxels and by mean DWI / brain
median, on synthetic embolic showers (skull-stripped, 2 mm isotropic, 2-10 mL; seeds
33,000,000+, used by nothing else, so in distribution but never trained on). Only the
plain pass (no flips) and the bare threshold: this is about what the model ranks, before any
post-processing.

With ``--real``, the same table for the two ISLES'22 cases natively (``../shared``): only
numbers are written, never images. A package that trained on a case is not held out on it:
the table says which cases each package used.

With ``--injected``, the same table for stage 2's injected infarcts written into each real case
the package is held out on (``training.real_backgrounds.inject_infarcts``: 0-3 per study as
stage 2 draws them, seeds (34,000,000, s) for s < 20, the studies ``lesion_contrast.py``
measures), with the default and with the faint lesion signal (issue 13's rule 87): only the
injected lesions are counted, never the case's own. It asks whether a fold finds on held-out
real texture the dots it finds on synthetic texture, and whether its misses of the case's own
lesions are about contrast or about something the injection lacks.

    .venv/bin/python benchmarks/small_lesion_detection.py --packages runs/cv-rms/foldB/pkg runs/cv-rms/foldB-blob/pkg
        # -> benchmarks/results/small_lesion_detection.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import CASES, ISLES, fold_package, load_real, prepare, real_cases_used, synthetic  # noqa: E402

from LambdaSegmentLib.io import Study  # noqa: E402
from LambdaSegmentLib.metrics import label_lesions  # noqa: E402

SEEDS = range(33_000_000, 33_000_008)
SIZE_BINS = ((1, 5), (5, 25), (25, 80), (80, None))  # voxels
BRIGHTNESS_BINS = ((0.0, 1.5), (1.5, 2.0), (2.0, None))  # mean DWI / brain median
DEPTH_BINS = ((0.0, 6.0), (6.0, 12.0), (12.0, None))  # median distance below the brain's edge, mm
THRESHOLD = 0.3
INJECTION_SEED = 34_000_000  # stage 2's injected infarcts measured here and in lesion_contrast.py
INJECTED_STUDIES = 20
# the synthetic embolic showers both this script and lesion_contrast.py measure
EMBOLIC = {"lesion_kind": "embolic", "skull_stripped": True, "in_plane_spacing_mm": 2.0, "slice_thickness_mm": 2.0,
           "lesion_volume_ml": (2.0, 10.0)}


def injected_studies(case: str, faint: bool) -> Iterator[tuple[str, Study, np.ndarray]]:
    """(name, study, injected) for the studies stage 2 would make from real case ``case``:
    ``injected`` is the bool (nk, nj, ni) label of the injected infarcts alone (the case's own
    expert lesions left out), with the default or the faint lesion signal."""
    from LambdaSegmentLib.synthesis.generator import faint_signal_ranges
    from LambdaSegmentLib.training import find_labelled_cases
    from LambdaSegmentLib.training.real_backgrounds import INJECTED_COUNTS, inject_infarcts, load_background

    (labelled,) = find_labelled_cases(ISLES / CASES[case])
    background = load_background(labelled)
    signal = faint_signal_ranges({}) if faint else None
    for index in range(INJECTED_STUDIES):
        rng = np.random.default_rng([INJECTION_SEED, index])
        count = int(rng.choice(INJECTED_COUNTS))  # as RealBackgroundWindows.make_study
        study, label, _ = inject_infarcts(background, rng, count=count, signal=signal)
        yield f"{case}-injected-{index}", study, label & ~background.lesion


def lesion_rows(prepared: Any) -> list[dict[str, float]]:
    """One row per true lesion: voxels, mean DWI / brain median, relative ADC, median depth below
    the brain's edge (mm; the post-processing's edge step drops lesions under its minimum), highest probability."""
    dwi = np.asarray(prepared.study.dwi.array, dtype=np.float32)
    adc = np.asarray(prepared.study.adc.array, dtype=np.float32)
    dwi_median, adc_median = float(np.median(dwi[prepared.brain])), float(np.median(adc[prepared.brain]))
    labels, count = label_lesions(prepared.truth)
    rows = []
    for lesion in range(1, count + 1):
        inside = labels == lesion
        rows.append({"voxels": int(inside.sum()), "dwi_ratio": float(dwi[inside].mean() / dwi_median),
                     "relative_adc": float(np.median(adc[inside]) / adc_median),
                     "depth_mm": float(np.median(prepared.depth_mm[inside])),
                     "max_probability": float(prepared.probability[inside].max())})
    return rows


def within(value: float, low: float, high: float | None) -> bool:
    return value >= low and (high is None or value < high)


def found(rows: list[dict[str, float]]) -> dict[str, Any]:
    """{"n": lesions, "found": share whose highest probability reaches THRESHOLD (None: no lesion)}."""
    return {"n": len(rows), "found": float(np.mean([r["max_probability"] >= THRESHOLD for r in rows])) if rows else None}


def table(rows: list[dict[str, float]]) -> list[dict[str, Any]]:
    """Found fraction (highest probability ≥ THRESHOLD) per size bin, and per brightness bin and
    depth bin within it."""
    out = []
    for low, high in SIZE_BINS:
        sized = [r for r in rows if within(r["voxels"], low, high)]
        entry: dict[str, Any] = {"voxels": f"{low}-{high or ''}", **found(sized)}
        for b_low, b_high in BRIGHTNESS_BINS:
            entry[f"dwi_{b_low:g}-{b_high or ''}"] = found([r for r in sized if within(r["dwi_ratio"], b_low, b_high)])
        for d_low, d_high in DEPTH_BINS:
            entry[f"depth_{d_low:g}-{d_high or ''}mm"] = found([r for r in sized if within(r["depth_mm"], d_low, d_high)])
        out.append(entry)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="+", default=["bundled"], metavar="PKG", help="model package dirs, or bundled")
    parser.add_argument("--real", action="store_true", help="also the two ISLES'22 cases natively (../shared)")
    parser.add_argument("--injected", action="store_true",
                        help="also stage 2's injected infarcts in each real case the package is held out on (../shared)")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "small_lesion_detection.json")
    args = parser.parse_args()
    studies = [(f"synthetic-{seed}", *synthetic(seed, **EMBOLIC)) for seed in SEEDS]
    results: dict[str, Any] = {"threshold": THRESHOLD, "synthetic_seeds": [SEEDS.start, SEEDS.stop - 1], "packages": {}}
    if args.injected:
        results["injection"] = {"seed": INJECTION_SEED, "studies": INJECTED_STUDIES}
    # (case, faint) -> the injected studies, made once and scored by every package held out on the case
    # (about 12 s per 20 studies to make, about 15 MB each to keep)
    injected: dict[tuple[str, bool], list[tuple[str, Study, np.ndarray]]] = {}
    for spec in args.packages:
        package = fold_package(spec)
        entry: dict[str, Any] = {"package": f"{package.name} {package.version}", "weights_sha256": package.sha256,
                                 "trained_on_real": real_cases_used(package)}
        synthetic_rows = [row for name, study, truth in studies for row in lesion_rows(prepare(name, study, truth, package, regions=False))]
        entry["synthetic_embolic"] = {"lesions": len(synthetic_rows), "by_size": table(synthetic_rows)}
        if args.real and ISLES.is_dir():
            for case in CASES:
                rows = lesion_rows(prepare(case, *load_real(case, False), package, regions=False))
                entry[f"real_{case}_native"] = {"lesions": len(rows), "held_out": case not in entry["trained_on_real"],
                                                "by_size": table(rows)}
        if args.injected and ISLES.is_dir():
            for case in CASES:
                if case in entry["trained_on_real"]:
                    continue
                for faint in (False, True):
                    if (case, faint) not in injected:
                        injected[case, faint] = list(injected_studies(case, faint))
                    rows = [row for name, study, label in injected[case, faint]
                            for row in lesion_rows(prepare(name, study, label, package, regions=False))]
                    entry[f"injected_{case}_{'faint' if faint else 'default'}"] = {"lesions": len(rows), "by_size": table(rows)}
        results["packages"][spec] = entry
        print(json.dumps({spec: {k: v for k, v in entry.items() if k != "weights_sha256"}}), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
