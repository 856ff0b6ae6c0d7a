"""The contralateral check's registration before and after it was cropped: what it costs, and what it decides.

``preprocessing.symmetry.contralateral_dwi`` registers the study's left-right mirror onto the
study. Up to commit 6db989d (package 2.1.0 as shipped) it registered the whole grid: a
two-level pyramid (shrink 2, then 1), a regular sample of 25 % of the voxels (seed 1), mean
squares inside the brain, 60 iterations per level: ``symmetry.register_mirror`` given the
whole grid, which is how "before" is reproduced here. Now it registers the same way on the box holding the brain and its mirror image plus
20 mm (``symmetry.registration_region``): same resolution, metric, sampling rate, optimiser
and pyramid; ITK's regular sampler now runs over the box, so it picks (and jitters) other
sample points than over the whole grid.

For each study (the end-to-end benchmark's study; the two ISLES'22 cases natively, as 6 mm
axial slabs and as 6 mm sagittal slabs when ``../shared`` is present; synthetic studies of
other orientations and thicknesses) this records:

- the fitted rigid transform before and now: Euler angles (deg), translation (mm), and the
  largest distance (mm) between where the two put a brain voxel;
- every component of the bundled model's mask at its threshold, before the checks: volume,
  depth below the brain edge, whether it passes the size and edge checks, its contralateral
  ratio (mean smoothed DWI / mean registered mirror) before and now, and whether it is kept
  at the manifest's ``contralateral_ratio``;
- the final mask (every check applied) before and now: its mL and, against the expert or
  generator's mask, volume Dice and false-positive mL;
- as a yardstick, the same ratios from the *old* registration with sampling seeds 2-5 instead
  of 1: how much the old check itself moves when only its random sample changes;
- the registration's own cost, old and new back to back in this process (median of
  ``--repeats``, interleaved), and the whole ``contralateral_dwi`` likewise on the end-to-end
  study.

The images of the ISLES'22 cases are read from ``../shared`` and never written.

    nice -n 10 .venv/bin/python benchmarks/contralateral_registration.py
        # -> benchmarks/results/contralateral_registration.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import SimpleITK as sitk

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from LambdaSegmentLib.inference import ModelPackage, load_model_package, segment_study  # noqa: E402
from LambdaSegmentLib.inference.postprocess import PostProcessing, edge_depth_mm, find_components  # noqa: E402
from LambdaSegmentLib.io import Study, Volume, load_study, read_volume, write_volume  # noqa: E402
from LambdaSegmentLib.metrics.thick_slices import thick_slice_study  # noqa: E402
from LambdaSegmentLib.preprocessing import symmetry  # noqa: E402
from LambdaSegmentLib.training.export import source_revision  # noqa: E402

ISLES = REPO.parent / "shared" / "data" / "isles22"
CASES = ("sub-strokecase0001", "sub-strokecase0003")
YARDSTICK_SEEDS = (2, 3, 4, 5)
#: A ratio above this means the mirror fell (almost) outside the brain: both keep the component.
RATIO_CEILING = 10.0


# --- studies ------------------------------------------------------------------------------


def lr_axis(volume: Volume) -> int:
    """The ITK axis (0 i, 1 j, 2 k) most nearly along the patient's left-right (LPS x)."""
    return int(np.argmax(np.abs(volume.direction[0])))


def _flip_ij(volume: Volume, like: Volume) -> Volume:
    """``volume`` (on ``like``'s grid) stored the other way along i and j: RAS-style storage of the same LPS positions."""
    far = like.index_to_lps(np.array([like.size_ijk[0] - 1, like.size_ijk[1] - 1, 0]))
    return Volume(volume.array[:, ::-1, ::-1].copy(), volume.spacing_mm, far, volume.direction @ np.diag([-1.0, -1.0, 1.0]))


def as_ras_stored(study: Study) -> Study:
    """The same study stored the other way along i and j (same anatomy, same LPS positions)."""
    return load_study(dwi=_flip_ij(study.dwi, study.dwi), adc=_flip_ij(study.adc, study.dwi), adc_unit="1e-3 mm2/s",
                      b_value=study.b_value)


def synthetic(seed: int, **ranges: Any) -> tuple[Study, Volume]:
    from LambdaSegmentLib.synthesis import generate

    made = generate(seed, **ranges)
    return load_study(dwi=made.dwi, adc=made.adc, adc_unit=made.adc_unit, b_value=made.b_value), made.mask


def studies(with_real: bool) -> Iterator[tuple[str, Study, Volume | None]]:
    """(name, study, true infarct mask or None) of every study compared (see the module docstring)."""
    from end_to_end import end_to_end_study

    made = end_to_end_study(24, 256)
    with tempfile.TemporaryDirectory() as scratch:  # read back from files, as the CLI reads it
        dwi, adc = (write_volume(volume, Path(scratch) / f"{name}.nii.gz") for name, volume in (("dwi", made.dwi), ("adc", made.adc)))
        study = load_study(dwi=str(dwi), adc=str(adc))
    yield "end-to-end study: synthetic seed 7, 24x256x256 at 2x2x6 mm, skull on", study, made.mask
    if with_real:
        for case in CASES:
            prefix = ISLES / case / f"{case}_ses-0001_"
            study = load_study(dwi=f"{prefix}dwi.nii.gz", adc=f"{prefix}adc.nii.gz")
            truth = read_volume(f"{prefix}msk.nii.gz")
            yield f"{case} native (2 mm)", study, truth
            yield f"{case} 6 mm axial slabs", *thick_slice_study(study, truth, 3)
            yield f"{case} 6 mm sagittal slabs", *thick_slice_study(study, truth, 3, slice_axis=lr_axis(study.dwi))
    axial_6mm = dict(slice_thickness_mm=6.0, slice_gap_mm=0.0, oblique_probability=0.0)
    yield "synthetic 31000001: axial 6 mm, skull on", *synthetic(31_000_001, **axial_6mm, skull_stripped=False)
    yield "synthetic 31000002: oblique (tilt 20-25 deg), skull on", *synthetic(
        31_000_002, oblique_probability=1.0, tilt_deg=(20.0, 25.0), skull_stripped=False)
    yield "synthetic 32000000: default ranges", *synthetic(32_000_000)
    yield "synthetic 31000003: 0.9 mm in plane, 5 mm slices, skull on", *synthetic(
        31_000_003, in_plane_spacing_mm=0.9, slice_thickness_mm=5.0, skull_stripped=False)
    stored_lps, truth = synthetic(31_000_004, **axial_6mm, skull_stripped=True)
    yield "synthetic 31000004: axial 6 mm, stored RAS", as_ras_stored(stored_lps), _flip_ij(truth, stored_lps.dwi)
    thin, truth = synthetic(31_000_005, in_plane_spacing_mm=2.0, slice_thickness_mm=2.0, slice_gap_mm=0.0,
                            oblique_probability=0.0, skull_stripped=False)
    yield "synthetic 31000005: 6 mm sagittal slabs, skull on", *thick_slice_study(thin, truth, 3, slice_axis=lr_axis(thin.dwi))
    yield "synthetic 31000006: three 6 mm slabs", *synthetic(31_000_006, **axial_6mm, coverage_mm=18.0, skull_stripped=True)


# --- comparison ---------------------------------------------------------------------------


def transform_summary(transform: sitk.Euler3DTransform) -> dict[str, list[float]]:
    parameters = np.asarray(transform.GetParameters())
    return {"rotation_deg": np.degrees(parameters[:3]).round(3).tolist(), "translation_mm": parameters[3:].round(3).tolist()}


def largest_displacement_mm(first: sitk.Transform, second: sitk.Transform, volume: Volume, brain: np.ndarray) -> float:
    """Largest distance (mm) between where two transforms put a brain voxel."""
    points = volume.index_to_lps(np.argwhere(brain)[:, ::-1])
    return float(max(np.linalg.norm(np.subtract(first.TransformPoint(tuple(p)), second.TransformPoint(tuple(p)))) for p in points))


def median_seconds(functions: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median wall seconds of each function, the functions called in turn ``repeats`` times."""
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(values)) for name, values in times.items()}


def outcome(mask: np.ndarray, truth: np.ndarray | None, voxel_ml: float) -> dict[str, float]:
    """Final mask mL and, against a true infarct mask, volume Dice and false-positive mL."""
    found = {"mask_ml": round(float(mask.sum()) * voxel_ml, 3)}
    if truth is not None:
        overlap = float((mask & truth).sum())
        found["volume_dice"] = round(2.0 * overlap / max(float(mask.sum() + truth.sum()), 1.0), 4)
        found["false_positive_ml"] = round(float((mask & ~truth).sum()) * voxel_ml, 3)
    return found


def compare_study(name: str, study: Study, truth: Volume | None, package: ModelPackage, repeats: int) -> dict[str, Any]:
    settings = PostProcessing.from_manifest(package.manifest)
    segmentation = segment_study(study, package, device="cpu")
    dwi, brain = study.dwi, np.asarray(segmentation.brain.array) != 0
    smooth = symmetry.smoothed_dwi(dwi, brain)
    mirror = symmetry.mirror_transform(dwi, brain)
    mirrored = sitk.Resample(smooth, smooth, mirror, sitk.sitkLinear, 0.0)
    full_mask = dwi.with_array(brain.astype(np.uint8)).to_sitk()
    centre = mirror.GetCenter()
    box = symmetry.registration_images(dwi, brain, mirror, smooth, mirrored)[0]

    def before(seed: int = 1) -> sitk.Euler3DTransform:
        return symmetry.register_mirror(smooth, mirrored, full_mask, centre, seed=seed)

    def now() -> sitk.Euler3DTransform:
        return symmetry.register_mirror(*symmetry.registration_images(dwi, brain, mirror, smooth, mirrored), centre)

    transforms = {"before": before(), "now": now(), **{f"before_seed{seed}": before(seed) for seed in YARDSTICK_SEEDS}}
    own = sitk.GetArrayFromImage(smooth)
    shipped = symmetry.contralateral_dwi(dwi, brain)
    components = {}
    for label, transform in transforms.items():
        contralateral = sitk.GetArrayFromImage(sitk.Resample(mirrored, smooth, transform, sitk.sitkLinear, 0.0))
        if label == "now":  # this script measures what the library ships
            np.testing.assert_array_equal(shipped[0], own)
            np.testing.assert_array_equal(shipped[1], contralateral)
        components[label] = find_components(
            np.asarray(segmentation.probability.array), settings.threshold, brain=brain, voxel_volume_mm3=dwi.voxel_volume_mm3,
            depth_mm=edge_depth_mm(brain, dwi.spacing_mm), dwi_smoothed=own, contralateral=contralateral)
    base = components["before"]
    passes_others = (base.volume_ml >= settings.min_lesion_ml) & (
        base.edge_depth_mm >= (settings.min_edge_depth_mm if settings.min_edge_depth_mm is not None else -np.inf))
    rows = [{
        "volume_ml": round(float(base.volume_ml[i]), 4), "edge_depth_mm": round(float(base.edge_depth_mm[i]), 2),
        "passes_size_and_edge": bool(passes_others[i]),
        "ratio_before": round(float(base.contralateral_ratio[i]), 4),
        "ratio_now": round(float(components["now"].contralateral_ratio[i]), 4),
        "ratio_before_other_seeds": [round(float(components[f"before_seed{s}"].contralateral_ratio[i]), 4) for s in YARDSTICK_SEEDS],
        "kept_before": bool(base.contralateral_ratio[i] >= settings.contralateral_ratio),
        "kept_now": bool(components["now"].contralateral_ratio[i] >= settings.contralateral_ratio),
    } for i in range(len(base.volume_ml))]
    # the product's mask is the "now" components' mask: this script measures what segment_study ships
    np.testing.assert_array_equal(components["now"].mask(settings), np.asarray(segmentation.mask.array))
    true_mask = None if truth is None else np.asarray(truth.array) != 0
    voxel_ml = dwi.voxel_volume_mm3 / 1000.0
    outcomes = {label: outcome(components[label].mask(settings) != 0, true_mask, voxel_ml) for label in ("before", "now")}
    load_1min = os.getloadavg()[0]
    seconds = median_seconds({"before": before, "now": now}, repeats)
    result = {
        "study": name, "shape_kji": list(dwi.array.shape), "spacing_mm": [round(s, 3) for s in dwi.spacing_mm],
        "direction": np.round(dwi.direction, 3).tolist(), "brain_voxels": int(brain.sum()),
        "registration_box_size_ijk": list(box.GetSize()), "full_size_ijk": list(dwi.size_ijk),
        "transform_before": transform_summary(transforms["before"]), "transform_now": transform_summary(transforms["now"]),
        "largest_displacement_now_vs_before_mm": round(largest_displacement_mm(transforms["before"], transforms["now"], dwi, brain), 3),
        "largest_displacement_other_seeds_vs_before_mm": [
            round(largest_displacement_mm(transforms["before"], transforms[f"before_seed{s}"], dwi, brain), 3) for s in YARDSTICK_SEEDS],
        "registration_seconds_median": {key: round(value, 4) for key, value in seconds.items()},
        "load_1min_before_timing": round(load_1min, 2),
        "mask_before": outcomes["before"], "mask_now": outcomes["now"],
        "components": rows,
    }
    return result


def flips(rows: list[dict[str, Any]], ratio_key: Callable[[dict[str, Any]], float], threshold: float) -> dict[str, Any]:
    """Components whose keep/drop at ``threshold`` differs from the old registration's (seed 1)."""
    changed = [r for r in rows if (r["ratio_before"] >= threshold) != (ratio_key(r) >= threshold)]
    deciding = [r for r in changed if r["passes_size_and_edge"]]
    finite = [r for r in rows if r["ratio_before"] < RATIO_CEILING and ratio_key(r) < RATIO_CEILING]
    finite_deciding = [r for r in finite if r["passes_size_and_edge"]]
    return {
        "flipped": len(changed), "flipped_passing_size_and_edge": len(deciding),
        "flipped_passing_ml": round(sum(r["volume_ml"] for r in deciding), 4),
        "largest_ratio_difference": round(max((abs(ratio_key(r) - r["ratio_before"]) for r in finite), default=0.0), 4),
        "largest_ratio_difference_passing": round(max((abs(ratio_key(r) - r["ratio_before"]) for r in finite_deciding), default=0.0), 4),
    }


def summarise(results: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    rows = [row for result in results for row in result["components"]]
    rotation = [abs(a - b) for r in results for a, b in zip(r["transform_now"]["rotation_deg"], r["transform_before"]["rotation_deg"])]
    translation = [abs(a - b) for r in results for a, b in zip(r["transform_now"]["translation_mm"], r["transform_before"]["translation_mm"])]
    return {
        "studies": len(results), "components": len(rows),
        "components_passing_size_and_edge": sum(r["passes_size_and_edge"] for r in rows),
        "largest_rotation_difference_deg": round(max(rotation), 3),
        "largest_translation_difference_mm": round(max(translation), 3),
        "largest_displacement_now_vs_before_mm": max(r["largest_displacement_now_vs_before_mm"] for r in results),
        "now_vs_before": flips(rows, lambda r: r["ratio_now"], threshold),
        "final_masks_that_changed": [{"study": r["study"], "before": r["mask_before"], "now": r["mask_now"]}
                                     for r in results if r["mask_before"] != r["mask_now"]],
        "yardstick_old_registration_other_seeds_vs_seed1": {
            f"seed{seed}": {**flips(rows, lambda r, i=i: r["ratio_before_other_seeds"][i], threshold),
                            "largest_displacement_mm": max(r["largest_displacement_other_seeds_vs_before_mm"][i] for r in results)}
            for i, seed in enumerate(YARDSTICK_SEEDS)},
    }


def end_to_end_cost(study: Study, package: ModelPackage, repeats: int) -> dict[str, Any]:
    """``contralateral_dwi`` before and now, whole (smoothing, mirror, registration, resampling),
    on the end-to-end study with the brain ``segment_study`` uses."""
    from LambdaSegmentLib.preprocessing.brain_mask import brain_mask

    dwi = study.dwi
    brain = brain_mask(dwi, method=package.brain_mask_method)

    def before() -> None:
        smooth = symmetry.smoothed_dwi(dwi, brain)
        mirror = symmetry.mirror_transform(dwi, brain)
        mirrored = sitk.Resample(smooth, smooth, mirror, sitk.sitkLinear, 0.0)
        fitted = symmetry.register_mirror(smooth, mirrored, dwi.with_array(brain.astype(np.uint8)).to_sitk(), mirror.GetCenter())
        sitk.GetArrayFromImage(sitk.Resample(mirrored, smooth, fitted, sitk.sitkLinear, 0.0))

    load_1min = os.getloadavg()[0]
    seconds = median_seconds({"before": before, "now": lambda: symmetry.contralateral_dwi(dwi, brain)}, repeats)
    return {"what": "contralateral_dwi whole, median wall seconds", **{k: round(v, 4) for k, v in seconds.items()},
            "load_1min_before_timing": round(load_1min, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timing repeats per study (median)")
    parser.add_argument("--no-real", action="store_true", help="skip the ISLES'22 cases even when ../shared has them")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "contralateral_registration.json")
    args = parser.parse_args()
    from harness import invocation, machine_description

    sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(2)  # as in a 2-thread CLI run
    package = load_model_package()
    settings = PostProcessing.from_manifest(package.manifest)
    with_real = ISLES.is_dir() and not args.no_real
    results, whole = [], None
    for name, study, truth in studies(with_real):
        started = time.perf_counter()
        results.append(compare_study(name, study, truth, package, args.repeats))
        if whole is None:
            whole = end_to_end_cost(study, package, args.repeats)
        print(json.dumps({k: v for k, v in results[-1].items() if k != "components"}), f"({time.perf_counter() - started:.0f} s)", flush=True)
    output = {
        "command": invocation(), "revision": source_revision(), "machine": machine_description(),
        "load_average_1_5_15": [round(v, 2) for v in os.getloadavg()],
        "package": f"{package.name} {package.version}", "threshold": settings.threshold,
        "contralateral_ratio": settings.contralateral_ratio, "yardstick_seeds": list(YARDSTICK_SEEDS),
        "summary": summarise(results, settings.contralateral_ratio),
        "contralateral_dwi_on_end_to_end_study": whole,
        "studies": results,
    }
    args.output.write_text(json.dumps(output, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(output["summary"], indent=1))
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
