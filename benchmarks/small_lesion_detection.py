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

With ``--blur SIGMA ...`` every synthetic and real study is scored once per σ given, blurred
in-plane by a Gaussian of that σ (voxels of the study's grid; 0, the default, = as is), the
point-spread function of a blurrier acquisition: the b0 and b1000 signals are blurred within
the brain (a normalised convolution, so the zero background does not darken the edge) and the
ADC is recomputed from them, as the generator's own PSF acts. Entries of a σ other than 0 carry
``@blur<σ>`` in their key. It asks how much of a network's detection of small lesions hangs on their sharpness
(issue 13's rule 129: at the same size and contrast the networks answer real lesions far lower
than synthetic ones, and real images are no sharper than the generator's).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import CASES, ISLES, fold_package, load_real, prepare, real_cases_used, synthetic  # noqa: E402

from LambdaSegmentLib.io import Study, load_study  # noqa: E402
from LambdaSegmentLib.metrics import label_lesions  # noqa: E402
from LambdaSegmentLib.metrics.thick_slices import s0_signal  # noqa: E402
from LambdaSegmentLib.preprocessing import find_slice_axis  # noqa: E402

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


def blurred(study: Study, sigma_voxels: float) -> Study:
    """``study`` as acquired with an in-plane Gaussian PSF of ``sigma_voxels`` (its grid's voxels):
    S0 and the DWI blurred within the brain (nonzero DWI and eADC: the studies here are
    skull-stripped), the ADC recomputed by ``load_study``; the study itself at 0."""
    if sigma_voxels == 0:
        return study
    dwi = np.asarray(study.dwi.array, dtype=np.float64)
    brain = (dwi > 0) & (np.asarray(study.eadc.array) > 0)
    slice_axis = 2 - find_slice_axis(study.dwi)  # ITK axis (i, j, k) -> array axis (k, j, i)
    sigma = tuple(0.0 if axis == slice_axis else sigma_voxels for axis in range(3))
    support = np.maximum(ndimage.gaussian_filter(brain.astype(np.float64), sigma), 1e-6)

    def blur(signal: np.ndarray) -> np.ndarray:
        return np.where(brain, ndimage.gaussian_filter(np.where(brain, signal, 0.0), sigma) / support, 0.0)

    s0, b1000 = blur(s0_signal(study)), blur(dwi)
    return load_study(b0=study.dwi.with_array(s0.astype(np.float32)), b1000=study.dwi.with_array(b1000.astype(np.float32)),
                      b_value=study.b_value)


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
    parser.add_argument("--blur", nargs="+", type=float, default=[0.0], metavar="SIGMA",
                        help="score every study once per sigma, blurred in-plane by a Gaussian of it (voxels of its grid; 0 = as is; default 0)")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "small_lesion_detection.json")
    args = parser.parse_args()
    if any(sigma < 0 for sigma in args.blur):
        parser.error(f"--blur: a sigma must be >= 0, got {args.blur}")
    studies = [(f"synthetic-{seed}", *synthetic(seed, **EMBOLIC)) for seed in SEEDS]
    results: dict[str, Any] = {"threshold": THRESHOLD, "synthetic_seeds": [SEEDS.start, SEEDS.stop - 1], "packages": {}}
    if args.blur != [0.0]:
        results["blur_sigma_voxels"] = args.blur
    real = {case: load_real(case, False) for case in CASES} if args.real and ISLES.is_dir() else {}
    # each study blurred once per sigma, then scored by every package
    blurred_synthetic = {sigma: [(name, blurred(study, sigma), truth) for name, study, truth in studies]
                         for sigma in args.blur}
    blurred_real = {sigma: {case: (blurred(study, sigma), truth) for case, (study, truth) in real.items()}
                    for sigma in args.blur}
    if args.injected:
        results["injection"] = {"seed": INJECTION_SEED, "studies": INJECTED_STUDIES}
    # (case, faint) -> the injected studies, made once and scored by every package held out on the case
    # (about 12 s per 20 studies to make, about 15 MB each to keep)
    injected: dict[tuple[str, bool], list[tuple[str, Study, np.ndarray]]] = {}
    for spec in args.packages:
        package = fold_package(spec)
        entry: dict[str, Any] = {"package": f"{package.name} {package.version}", "weights_sha256": package.sha256,
                                 "trained_on_real": real_cases_used(package)}
        for sigma in args.blur:
            suffix = f"@blur{sigma:g}" if sigma else ""
            synthetic_rows = [row for name, study, truth in blurred_synthetic[sigma]
                              for row in lesion_rows(prepare(name, study, truth, package, regions=False))]
            entry[f"synthetic_embolic{suffix}"] = {"lesions": len(synthetic_rows), "by_size": table(synthetic_rows)}
            for case, (study, truth) in blurred_real[sigma].items():
                rows = lesion_rows(prepare(case, study, truth, package, regions=False))
                entry[f"real_{case}_native{suffix}"] = {"lesions": len(rows), "held_out": case not in entry["trained_on_real"],
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
