"""Where the bundled model errs, measured as image statistics: synthetic studies vs the real ISLES'22 cases.

    nice -n 10 .venv/bin/python benchmarks/synthesis_edge_realism.py --n 6 [--tag after] [--ranges '{"k": v}']

For every study (real: the two cases in ``../shared/data/isles22``; synthetic: ``--n``
skull-stripped studies at 2 mm isotropic, seeds 200.., kinds cycling through ``--kinds``),
with DWI divided by the brain median
and ADC in 10^-3 mm^2/s, "depth" = distance (mm) from the brain-mask edge:

- ``rim``: DWI median and 95th percentile, ADC median and fraction < 0.62, of the voxels
  within 4 mm of the edge (the 1-2 voxel rim of a skull-stripped 2 mm study), and the
  rim / interior (depth > 10 mm) DWI ratio;
- ``skull_base``: 99th percentile and maximum of DWI in the inferior 35 % of the brain's
  slices within 8 mm of the edge, and the median ADC of its voxels brighter than 2x;
- ``sharpness``: mean in-plane gradient magnitude (per mm) of DWI and of ADC at depth
  > 6 mm (ADC < 1.5), and the high-frequency fraction of the DWI there (energy of
  DWI - Gaussian(sigma = 1 voxel) over the variance);
- ``cortex``: DWI median of the outer ribbon (depth 2-6 mm, ADC 0.5-1.5) over the deep
  tissue's (depth > 20 mm, ADC 0.5-1.2), the DWI 90th percentile at depth > 4 mm, and the
  ADC interquartile range of tissue (ADC < 1.5) at depth > 4 mm (gyral ADC contrast);
- ``noise``: the standard deviation of ADC and DWI minus their 3x3 in-plane median in deep
  tissue (depth > 20 mm, ADC 0.5-0.9), i.e. voxel-to-voxel noise rather than anatomy;
- ``lesion`` (synthetic only): ADC median and IQR, DWI median, within the mask.

Real cases are measured on lesion-free tissue only: the expert mask dilated by 2 voxels
is removed before every statistic, and no lesion statistic of a real case is computed
(they are the held-out folds of the cross-validation; the lesion numbers compared with
are the generic ones stated in issue 13). Writes
``benchmarks/results/synthesis_edge_realism[_TAG].json`` and a synthetic montage
``benchmarks/results/synthesis_montage[_TAG].png``; the real-case montage goes to
``/tmp`` only (ISLES'22 may not be redistributed). With ``--skull-on`` it also draws
``benchmarks/results/synthesis_skull_on_large_infarcts[_TAG].png``: a skull-on 5 mm study
with a whole-territory infarct (seed 25) and one with a LESYMAP shape (seed 31).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import ndimage  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.cli import json_object  # noqa: E402
from LambdaSegmentLib.io import Volume, read_volume  # noqa: E402
from LambdaSegmentLib.io.study import load_study  # noqa: E402
from LambdaSegmentLib.io.units import ADC_UNIT_TO_CANONICAL  # noqa: E402
from LambdaSegmentLib.synthesis import generate  # noqa: E402

ISLES = REPO.parent / "shared" / "data" / "isles22"
CASES = ("sub-strokecase0001", "sub-strokecase0003")
RESULTS = REPO / "benchmarks" / "results"


def _superior_order(volume: Volume) -> np.ndarray:
    """Slice indices sorted inferior -> superior (the k axis of an axial stack)."""
    z = volume.index_to_lps(np.stack([np.zeros(volume.array.shape[0]), np.zeros(volume.array.shape[0]),
                                      np.arange(volume.array.shape[0])], axis=1))[:, 2]
    return np.argsort(z)


def measure(dwi: Volume, adc: np.ndarray, exclude: np.ndarray, lesion: np.ndarray | None) -> dict:
    """Edge, skull-base, sharpness and cortex statistics of one study (see the module docstring).

    Args:
        dwi: the DWI volume (any scale); ``adc``: (k, j, i) in 1e-3 mm^2/s.
        exclude: voxels left out of every tissue statistic (a real case's dilated lesion).
        lesion: the synthetic mask, or None.
    """
    spacing = np.asarray(dwi.spacing_mm)[::-1]
    raw = np.asarray(dwi.array, np.float64)
    brain = (raw > 0) & (adc > 0)
    brain = ndimage.binary_fill_holes(brain)
    dwi_n = raw / float(np.median(raw[brain & ~exclude]))
    depth = ndimage.distance_transform_edt(brain, sampling=spacing)
    ok = brain & ~exclude
    rim, interior = ok & (depth <= 4.0), ok & (depth > 10.0)
    out: dict = {"brain_ml": float(brain.sum() * np.prod(spacing) / 1000)}
    out["rim"] = {
        "dwi_median": float(np.median(dwi_n[rim])), "dwi_p95": float(np.percentile(dwi_n[rim], 95)),
        "adc_median": float(np.median(adc[rim])), "adc_below_0.62_fraction": float(np.mean(adc[rim] < 0.62)),
        "rim_to_interior_dwi": float(np.median(dwi_n[rim]) / np.median(dwi_n[interior])),
    }
    order = _superior_order(dwi)
    filled = [k for k in order if brain[k].any()]
    inferior = np.zeros_like(brain)
    inferior[filled[: int(round(0.35 * len(filled)))]] = True
    base = ok & inferior & (depth <= 8.0)
    bright = base & (dwi_n > 2.0)
    out["skull_base"] = {
        "dwi_p99": float(np.percentile(dwi_n[base], 99)), "dwi_max": float(dwi_n[base].max()),
        "bright_ml": float(bright.sum() * np.prod(spacing) / 1000),
        "bright_adc_median": float(np.median(adc[bright])) if bright.any() else None,
    }
    deep = ok & (depth > 6.0) & (adc < 1.5)
    gradient = [np.gradient(dwi_n, axis=a) / spacing[a] for a in (1, 2)]
    gradient_adc = [np.gradient(adc, axis=a) / spacing[a] for a in (1, 2)]
    high = dwi_n - ndimage.gaussian_filter(dwi_n, (0, 1.0, 1.0))
    out["sharpness"] = {
        "dwi_gradient_per_mm": float(np.mean(np.hypot(*gradient)[deep])),
        "adc_gradient_per_mm": float(np.mean(np.hypot(*gradient_adc)[deep])),
        "dwi_high_frequency_fraction": float(np.mean(high[deep] ** 2) / np.var(dwi_n[deep])),
    }
    # voxel-to-voxel noise in deep tissue (no anatomy there to speak of): residual of a 3x3 in-plane median
    white = ok & (depth > 20.0) & (adc > 0.5) & (adc < 0.9)
    out["noise"] = {
        "deep_adc_residual_std": float(np.std((adc - ndimage.median_filter(adc, size=(1, 3, 3)))[white])),
        "deep_dwi_residual_std": float(np.std((dwi_n - ndimage.median_filter(dwi_n, size=(1, 3, 3)))[white])),
    }
    ribbon = ok & (depth > 2.0) & (depth <= 6.0) & (adc > 0.5) & (adc < 1.5)
    core = ok & (depth > 20.0) & (adc > 0.5) & (adc < 1.2)
    tissue = ok & (depth > 4.0) & (adc < 1.5)
    q1, q3 = np.percentile(adc[tissue], [25, 75])
    out["cortex"] = {
        "ribbon_to_deep_dwi": float(np.median(dwi_n[ribbon]) / np.median(dwi_n[core])),
        "dwi_p90_depth_gt_4mm": float(np.percentile(dwi_n[ok & (depth > 4.0)], 90)),
        "tissue_adc_iqr": float(q3 - q1),
    }
    if lesion is not None and lesion.any():
        q1, q2, q3 = np.percentile(adc[lesion], [25, 50, 75])
        out["lesion"] = {"ml": float(lesion.sum() * np.prod(spacing) / 1000), "adc_median": float(q2),
                         "adc_q1": float(q1), "adc_q3": float(q3), "dwi_median": float(np.median(dwi_n[lesion]))}
    out["_montage"] = (dwi_n, adc, brain, order, filled)
    return out


def montage(rows: list[tuple[str, np.ndarray, np.ndarray, list[int], np.ndarray | None]], path: Path) -> None:
    """Four axial slices (15, 30, 50, 70 % of the brain's height) of DWI / median [0, 4] and ADC [0, 2]e-3 per study."""
    fractions = (0.15, 0.3, 0.5, 0.7)
    figure, axes = plt.subplots(len(rows), 2 * len(fractions), figsize=(2.0 * 2 * len(fractions), 2.1 * len(rows)))
    axes = np.atleast_2d(axes)
    for r, (title, dwi_n, adc, filled, lesion) in enumerate(rows):
        for c, fraction in enumerate(fractions):
            k = filled[int(fraction * (len(filled) - 1))]
            for offset, (image, vmax) in enumerate(((dwi_n, 4.0), (adc, 2.0))):
                axis = axes[r, 2 * c + offset]
                axis.imshow(image[k], cmap="gray", vmin=0, vmax=vmax, origin="lower", interpolation="nearest")
                if lesion is not None and lesion[k].any():
                    axis.contour(lesion[k], levels=[0.5], colors="r", linewidths=0.4, origin="lower")
                axis.set_xticks([])
                axis.set_yticks([])
                if c == 0 and offset == 0:
                    axis.set_ylabel(title, fontsize=6)
                if r == 0:
                    axis.set_title(f"{'DWI' if offset == 0 else 'ADC'} {int(fraction * 100)}%", fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def skull_on_montage(path: Path) -> list[dict]:
    """Three lesion slices each of two skull-on 5 mm studies: a whole-territory infarct and a LESYMAP shape."""
    rows, facts = [], []
    cases = ((25, {"lesion_kind": "territorial", "lesion_volume_ml": (100.0, 300.0), "massive_infarct_probability": 1.0}),
             (31, {"lesion_kind": "lesymap", "lesion_volume_ml": (20.0, 80.0)}))
    for seed, ranges in cases:
        study = generate(seed, in_plane_spacing_mm=1.8, slice_thickness_mm=5.0, skull_stripped=False,
                         oblique_probability=0.0, coverage_mm=(150.0, 150.0), **ranges)
        dwi, mask = study.dwi.array, study.mask.array > 0
        adc = study.adc.array * ADC_UNIT_TO_CANONICAL[study.adc_unit]
        median = float(np.median(dwi[study.tissue.array >= 2]))  # brain tissue: the scalp would bias a head median
        lesion = study.params["lesion"]
        facts.append({"seed": seed, "kind": lesion["kind"], "ml": round(lesion["volume_ml"], 1),
                      "dwi_over_tissue_median": round(float(np.median(dwi[mask]) / median), 2),
                      "adc_median": round(float(np.median(adc[mask])), 3)})
        slices = np.nonzero(mask.reshape(mask.shape[0], -1).any(axis=1))[0]
        for k in slices[[len(slices) // 4, len(slices) // 2, 3 * len(slices) // 4]]:
            rows.append((f"seed {seed} {lesion['kind']} {lesion['volume_ml']:.0f} mL, slice {k}", dwi[k] / median, adc[k], mask[k]))
    figure, axes = plt.subplots(2, 6, figsize=(18, 6.5))
    for index, (title, dwi_n, adc, mask) in enumerate(rows):
        row, column = divmod(index, 3)
        axes[row, 2 * column].imshow(dwi_n, cmap="gray", vmin=0, vmax=4, origin="lower")
        axes[row, 2 * column].contour(mask, levels=[0.5], colors="r", linewidths=0.5, origin="lower")
        axes[row, 2 * column].set_title(title, fontsize=7)
        axes[row, 2 * column + 1].imshow(adc, cmap="gray", vmin=0, vmax=2, origin="lower")
    for axis in axes.flat:
        axis.set_xticks([])
        axis.set_yticks([])
    figure.tight_layout()
    figure.savefig(path, dpi=60)
    plt.close(figure)
    return facts


def _summary(rows: list[dict]) -> dict:
    """Mean over studies of every numeric leaf."""
    keys = {(g, k) for row in rows for g, v in row.items() if isinstance(v, dict) for k in v}
    out: dict = {}
    for group, key in sorted(keys):
        values = [row[group][key] for row in rows if group in row and row[group].get(key) is not None]
        if values:
            out.setdefault(group, {})[key] = round(float(np.mean(values)), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--first-seed", type=int, default=200)
    parser.add_argument("--tag", default="")
    parser.add_argument("--ranges", type=json_object, default={}, metavar="JSON", help="JSON overrides of DEFAULT_RANGES (e.g. to ablate a feature)")
    parser.add_argument("--kinds", default="embolic,territorial,lacunar")
    parser.add_argument("--skull-on", action="store_true", help="also the skull-on large-infarct montage")
    args = parser.parse_args()
    suffix = f"_{args.tag}" if args.tag else ""
    extra = args.ranges
    report: dict = {"command": "nice -n 10 .venv/bin/python benchmarks/synthesis_edge_realism.py " +
                    f"--n {args.n} --first-seed {args.first_seed}" + (f" --tag {args.tag}" if args.tag else "") +
                    (f" --ranges '{json.dumps(extra)}'" if extra else "") + f" --kinds {args.kinds}" +
                    (" --skull-on" if args.skull_on else ""),
                    "real": {}, "synthetic": []}
    real_rows = []
    for case in CASES:
        folder = ISLES / case
        if not folder.exists():
            continue
        prefix = folder / f"{case}_ses-0001_"
        study = load_study(dwi=prefix.with_name(prefix.name + "dwi.nii.gz"), adc=prefix.with_name(prefix.name + "adc.nii.gz"))
        truth = np.asarray(read_volume(prefix.with_name(prefix.name + "msk.nii.gz")).array) > 0
        exclude = ndimage.binary_dilation(truth, iterations=2)
        # load_study gives ADC in 1e-3 mm^2/s
        stats = measure(study.dwi, np.asarray(study.adc.array, np.float64), exclude, None)
        dwi_n, adc, _, _, filled = stats.pop("_montage")
        real_rows.append((case, dwi_n, adc, filled, None))
        report["real"][case] = stats
    kinds = args.kinds.split(",")
    synthetic_rows = []
    for index in range(args.n):
        ranges = {"in_plane_spacing_mm": 2.0, "slice_thickness_mm": 2.0, "oblique_probability": 0.0,
                  "skull_stripped": True, "lesion_kind": kinds[index % len(kinds)], "coverage_mm": (150.0, 150.0), **extra}
        study = generate(args.first_seed + index, **ranges)
        adc = np.asarray(study.adc.array, np.float64) * ADC_UNIT_TO_CANONICAL[study.adc_unit]
        lesion = study.mask.array > 0
        stats = measure(study.dwi, adc, np.zeros_like(lesion), lesion)
        dwi_n, adc, _, _, filled = stats.pop("_montage")
        label = f"seed {study.params['seed']} {study.params['lesion']['kind']} {study.params['lesion']['volume_ml']:.1f} mL"
        synthetic_rows.append((label, dwi_n, adc, filled, lesion))
        report["synthetic"].append({"seed": study.params["seed"], "kind": study.params["lesion"]["kind"], **stats})
        print(label, flush=True)
    report["synthetic_mean"] = _summary(report["synthetic"])
    report["issue_13_lesion_facts"] = {"expert_mask_adc_median": 0.82, "expert_mask_adc_iqr": [0.65, 1.11],
                                       "missed_outer_part_adc": 0.77, "missed_outer_part_dwi": 1.9,
                                       "massive_infarct_bulk_dwi": 3.0, "massive_infarct_bulk_adc": 0.8,
                                       "brain_median_adc": [1.05, 1.10]}
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.skull_on:
        report["skull_on_large_infarcts"] = skull_on_montage(RESULTS / f"synthesis_skull_on_large_infarcts{suffix}.png")
    (RESULTS / f"synthesis_edge_realism{suffix}.json").write_text(json.dumps(report, indent=1) + "\n")
    montage(synthetic_rows, RESULTS / f"synthesis_montage{suffix}.png")
    if real_rows:
        montage(real_rows, Path("/tmp") / f"real_isles_montage{suffix}.png")  # never committed
    print(json.dumps({"real": report["real"], "synthetic_mean": report["synthetic_mean"]}, indent=1))


if __name__ == "__main__":
    main()
