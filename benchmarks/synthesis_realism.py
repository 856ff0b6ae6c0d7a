"""Realism of the synthetic studies, measured against the real ISLES'22 case.

    nice -n 10 .venv/bin/python benchmarks/synthesis_realism.py --n 6

Writes to reports/synthesis/:
- ``realism_histograms.png``: DWI (/ brain median) and ADC (10^-3 mm^2/s) in GM, WM,
  CSF and lesion, real vs synthetic;
- ``realism_montage.png``: real and synthetic slices side by side (DWI, ADC, mask);
- ``realism.json``: medians per class and lesion-to-normal ratios.

Tissue classes of the real case come from the MNI152 GM/WM/CSF maps registered to its
ADC map (affine, Mattes mutual information): approximate at the cortex, good enough for
class histograms. Synthetic classes are the generator's own partial-volume argmax.
Synthetic studies are made skull-stripped at 2 mm isotropic, like the real case.
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
import SimpleITK as sitk  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.io import Volume, read_volume  # noqa: E402
from LambdaSegmentLib.io.foreground import brain_foreground  # noqa: E402
from LambdaSegmentLib.io.study import load_study  # noqa: E402
from LambdaSegmentLib.io.units import ADC_UNIT_TO_CANONICAL  # noqa: E402
from LambdaSegmentLib.synthesis import generate  # noqa: E402
from LambdaSegmentLib.synthesis.template import _template_image, load_tissue_template  # noqa: E402

CASE = REPO.parent / "shared" / "data" / "isles22" / "sub-strokecase0001"
OUT = REPO / "reports" / "synthesis"
CLASSES = ("GM", "WM", "CSF", "lesion")


def real_classes(adc: Volume, lesion: np.ndarray) -> dict[str, np.ndarray]:
    """GM/WM/CSF of the real case from the registered template; lesion from the expert mask."""
    template = load_tissue_template()
    pseudo_adc = _template_image(template.gm * 0.85 + template.wm * 0.75 + template.csf * 3.0, template.affine)
    fixed = sitk.Cast(adc.to_sitk(), sitk.sitkFloat32)
    registration = sitk.ImageRegistrationMethod()
    registration.SetMetricAsMattesMutualInformation(32)
    registration.SetMetricSamplingStrategy(registration.RANDOM)
    registration.SetMetricSamplingPercentage(0.1, seed=1)
    registration.SetInterpolator(sitk.sitkLinear)
    registration.SetOptimizerAsRegularStepGradientDescent(1.0, 1e-4, 200, relaxationFactor=0.7)
    registration.SetOptimizerScalesFromPhysicalShift()
    registration.SetShrinkFactorsPerLevel([4, 2])
    registration.SetSmoothingSigmasPerLevel([2, 1])
    initial = sitk.CenteredTransformInitializer(fixed, pseudo_adc, sitk.AffineTransform(3), sitk.CenteredTransformInitializerFilter.MOMENTS)
    registration.SetInitialTransform(initial, inPlace=False)
    transform = registration.Execute(fixed, pseudo_adc)
    maps = {}
    for name, values in (("GM", template.gm), ("WM", template.wm), ("CSF", template.csf)):
        moved = sitk.Resample(_template_image(values, template.affine), fixed, transform, sitk.sitkLinear, 0.0)
        maps[name] = sitk.GetArrayFromImage(moved)
    inside = adc.array > 0
    classes = {name: (maps[name] > 0.6) & inside & ~lesion for name in ("GM", "WM", "CSF")}
    classes["lesion"] = lesion & inside
    return classes


def synthetic_classes(study) -> dict[str, np.ndarray]:
    lesion = study.mask.array > 0
    tissue = study.tissue.array
    return {"GM": (tissue == 2) & ~lesion, "WM": (tissue == 3) & ~lesion, "CSF": (tissue == 1) & ~lesion, "lesion": lesion}


def normalised(dwi: Volume) -> np.ndarray:
    brain = brain_foreground(dwi)
    return dwi.array / float(np.median(dwi.array[brain]))


def summary(dwi: np.ndarray, adc: np.ndarray, classes: dict[str, np.ndarray]) -> dict:
    medians = {name: {"dwi": float(np.median(dwi[m])) if m.any() else None, "adc": float(np.median(adc[m])) if m.any() else None}
               for name, m in classes.items()}
    normal = classes["GM"] | classes["WM"]
    out = {"median": medians}
    if classes["lesion"].any():
        out["lesion_to_normal"] = {
            "dwi": float(np.median(dwi[classes["lesion"]]) / np.median(dwi[normal])),
            "adc": float(np.median(adc[classes["lesion"]]) / np.median(adc[normal])),
        }
    out["gm_to_wm_dwi"] = medians["GM"]["dwi"] / medians["WM"]["dwi"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=6, help="synthetic studies")
    parser.add_argument("--first-seed", type=int, default=100)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)

    prefix = "sub-strokecase0001_ses-0001_"
    real = load_study(dwi=CASE / f"{prefix}dwi.nii.gz", adc=CASE / f"{prefix}adc.nii.gz")
    truth = read_volume(CASE / f"{prefix}msk.nii.gz").array > 0
    real_dwi, real_adc = normalised(real.dwi), real.adc.array
    real_cls = real_classes(real.adc, truth)
    report = {"real": summary(real_dwi, real_adc, real_cls), "synthetic": []}

    kinds = ["embolic", "territorial", "lacunar"]
    studies = []
    for index in range(args.n):
        study = generate(args.first_seed + index, in_plane_spacing_mm=2.0, slice_thickness_mm=2.0, skull_stripped=True,
                         lesion_kind=kinds[index % 3])
        adc = study.adc.array * ADC_UNIT_TO_CANONICAL[study.adc_unit]
        studies.append((study, normalised(study.dwi), adc, synthetic_classes(study)))
        report["synthetic"].append({"seed": study.params["seed"], "kind": study.params["lesion"]["kind"],
                                    "lesion_ml": study.params["lesion"]["volume_ml"],
                                    **summary(studies[-1][1], adc, studies[-1][3])})
    ratios = [s["lesion_to_normal"] for s in report["synthetic"] if "lesion_to_normal" in s]
    report["synthetic_mean_lesion_to_normal"] = {k: float(np.mean([r[k] for r in ratios])) for k in ("dwi", "adc")}
    report["synthetic_mean_gm_to_wm_dwi"] = float(np.mean([s["gm_to_wm_dwi"] for s in report["synthetic"]]))
    (OUT / "realism.json").write_text(json.dumps(report, indent=1) + "\n")

    # histograms
    figure, axes = plt.subplots(2, 4, figsize=(16, 7))
    for column, name in enumerate(CLASSES):
        for row, (channel, bins) in enumerate((("DWI / brain median", np.linspace(0, 3, 61)), ("ADC (1e-3 mm²/s)", np.linspace(0, 4, 81)))):
            real_values = (real_dwi if row == 0 else real_adc)[real_cls[name]]
            synthetic_values = np.concatenate([(s[1] if row == 0 else s[2])[s[3][name]] for s in studies])
            axis = axes[row, column]
            axis.hist(real_values, bins, density=True, histtype="step", color="k", lw=1.5, label=f"real (n={real_values.size})")
            axis.hist(synthetic_values, bins, density=True, histtype="step", color="tab:red", lw=1.5, label=f"synthetic (n={synthetic_values.size})")
            axis.set_title(f"{name}: {channel}", fontsize=9)
            axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(OUT / "realism_histograms.png", dpi=70)

    # montage: real slices with lesion, then one lesion slice per synthetic study
    panels = []
    for k in np.nonzero(truth.reshape(truth.shape[0], -1).any(axis=1))[0][[0, -12, -4]]:
        panels.append(("real", real_dwi[k], real_adc[k], truth[k]))
    for study, dwi, adc, classes in studies:
        mask = classes["lesion"]
        k = int(np.argmax(mask.reshape(mask.shape[0], -1).sum(axis=1))) if mask.any() else mask.shape[0] // 2
        panels.append((f"synthetic {study.params['lesion']['kind']} {study.params['lesion']['volume_ml']:.1f} mL", dwi[k], adc[k], mask[k]))
    figure, axes = plt.subplots(3, len(panels), figsize=(2.6 * len(panels), 8))
    for column, (title, dwi, adc, mask) in enumerate(panels):
        axes[0, column].imshow(dwi, cmap="gray", vmin=0, vmax=2.2, origin="lower")
        axes[0, column].set_title(title, fontsize=7)
        axes[1, column].imshow(adc, cmap="gray", vmin=0, vmax=2.0, origin="lower")
        axes[2, column].imshow(dwi, cmap="gray", vmin=0, vmax=2.2, origin="lower")
        if mask.any():
            axes[2, column].contour(mask, levels=[0.5], colors="r", linewidths=0.6, origin="lower")
    for axis in axes.flat:
        axis.axis("off")
    figure.tight_layout()
    figure.savefig(OUT / "realism_montage.png", dpi=70)
    print(json.dumps({k: report[k] for k in ("synthetic_mean_lesion_to_normal", "synthetic_mean_gm_to_wm_dwi")} | {"real": report["real"]}, indent=1))


if __name__ == "__main__":
    main()
