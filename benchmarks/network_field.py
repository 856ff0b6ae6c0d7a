"""The network's field around the brain (``inference.field``) against the whole stack, side
by side in one run: segmentation time, the field's size, and how much the mask moves.

Studies:
- the two ISLES'22 cases as delivered (112 x 112 at 2 mm, a 224 mm field of view: the field
  is the whole stack, so the two rows must agree to the bit);
- the same cases zero-padded in-plane to 256 x 256 (a 512 mm field of view, the geometry of
  the original voxels unchanged): the network run whole sees 4.6 times the background it was
  trained with, the field sees the delivered case plus a 16-pixel band of zeros;
- the same cases in a 128 x 128 stack with 0, 4, 8, 12 or 16 voxels of zeros ahead of them on
  both in-plane axes (run whole: no wider than 256 mm): how much the network's masks move with
  where a study lies in its input alone (its four poolings make it equivariant to shifts of 16
  voxels only), the yardstick for the padded cases' agreement;
- ``end_to_end.py``'s synthetic skull-on study (24 x 256 x 256 at 2 x 2 x 6 mm, the 5 s
  budget's study), scored against its own generated infarct.

``--synthetic N`` scores instead N generator studies drawn for issue 13's rule 122 (seeds
35000000 on, a 384-512 mm field of view at 2 mm in-plane, the generator's other ranges), each
against its own infarct, with the means over all, skull-on and skull-stripped studies.

"whole" is the package as it is (every bundled package runs its networks on the whole stack);
"field" is the same package with ``"network_field_mm": 256`` in its manifest (``inference.field``:
the brain's box plus 16 mm, at least 256 mm wide, the widest training window). Each variant is run
twice per study and the second, warm run is timed (``Segmentation.seconds``: brain mask,
preprocessing, every network's pass, post-processing). Dice and false positives against the
expert masks are not held out for the bundled package (its post-processing was chosen on
both cases, and both were its stage 2's real backgrounds): they say how the field moves a
mask, not how accurate it is.

    .venv/bin/python benchmarks/network_field.py
    .venv/bin/python benchmarks/network_field.py --synthetic 16
    .venv/bin/python benchmarks/network_field.py --model runs/candidate/pkg --output /tmp/network_field
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import invocation, machine_header, write_tables  # noqa: E402

from LambdaSegmentLib.inference import load_model_package, segment_study  # noqa: E402
from LambdaSegmentLib.inference.field import FIELD_KEY, brain_field  # noqa: E402
from LambdaSegmentLib.io import load_study, read_volume, write_volume  # noqa: E402
from LambdaSegmentLib.metrics import volume_dice  # noqa: E402

ISLES = REPO.parent / "shared" / "data" / "isles22"
CASES = {"0001": "sub-strokecase0001", "0003": "sub-strokecase0003"}
PADDED_SIZE = 256
FIELD_MM = 256.0  # the "field" rows' network_field_mm
# the delivered 112 x 112 cases put at several places in a 128 x 128 stack (a field run whole)
SHIFTED_SIZE = 128
SHIFTS = (0, 4, 8, 12, 16)
# --synthetic N (issue 13's rule 122): wide fields of view, never used by another benchmark or training
SYNTHETIC_SEEDS = range(35_000_000, 35_000_016)
SYNTHETIC_RANGES: dict[str, Any] = {"fov_mm": (384.0, 512.0), "in_plane_spacing_mm": 2.0}


def pad_in_plane(source: Path, destination: Path, size: int, before: int | None = None) -> tuple[Path, tuple[slice, slice]]:
    """``source`` zero-padded in-plane (ITK i, j) to ``size`` voxels, its voxels where they were
    (``before`` voxels of zeros ahead of it on each axis; None = centred); with the (j, i) array
    slices of the padded volume that hold the source."""
    image = sitk.ReadImage(str(source))
    width, height = image.GetSize()[:2]
    low = [(size - width) // 2, (size - height) // 2, 0] if before is None else [before, before, 0]
    high = [size - width - low[0], size - height - low[1], 0]
    sitk.WriteImage(sitk.ConstantPad(image, low, high, 0.0), str(destination))
    return destination, (slice(low[1], low[1] + height), slice(low[0], low[0] + width))


def studies(scratch: Path) -> list[tuple[str, Any, np.ndarray, str | None, tuple[slice, slice] | None]]:
    """(label, loaded study, reference mask on its DWI grid, the label of the study it pads, the
    (j, i) slices that hold that study) for every study this benchmark scores."""
    found: list[tuple[str, Any, np.ndarray, str | None, tuple[slice, slice] | None]] = []
    for case, name in CASES.items():
        prefix = ISLES / name / f"{name}_ses-0001_"
        if not Path(f"{prefix}dwi.nii.gz").exists():
            print(f"network_field: {prefix}dwi.nii.gz is absent; case {case} skipped", flush=True)
            continue
        truth = np.asarray(read_volume(f"{prefix}msk.nii.gz").array) != 0
        delivered = f"ISLES {case}, 112x112 @ 2 mm"
        found.append((delivered, load_study(dwi=f"{prefix}dwi.nii.gz", adc=f"{prefix}adc.nii.gz"), truth, None, None))
        padded = {role: pad_in_plane(Path(f"{prefix}{role}.nii.gz"), scratch / f"{case}_{role}.nii.gz", PADDED_SIZE)
                  for role in ("dwi", "adc", "msk")}
        found.append((f"ISLES {case} zero-padded to {PADDED_SIZE}x{PADDED_SIZE}",
                      load_study(dwi=padded["dwi"][0], adc=padded["adc"][0]),
                      np.asarray(read_volume(padded["msk"][0]).array) != 0, delivered, padded["dwi"][1]))
        for before in SHIFTS:  # the network's own sensitivity to where the study lies (its field is the whole 128 x 128)
            shifted = {role: pad_in_plane(Path(f"{prefix}{role}.nii.gz"), scratch / f"{case}_{role}_{before}.nii.gz",
                                          SHIFTED_SIZE, before) for role in ("dwi", "adc", "msk")}
            found.append((f"ISLES {case} in a {SHIFTED_SIZE}x{SHIFTED_SIZE} stack, {before} px of zeros ahead",
                          load_study(dwi=shifted["dwi"][0], adc=shifted["adc"][0]),
                          np.asarray(read_volume(shifted["msk"][0]).array) != 0, delivered, shifted["dwi"][1]))
    from end_to_end import end_to_end_study

    synthetic = end_to_end_study(24, 256)
    dwi = write_volume(synthetic.dwi, scratch / "synthetic_dwi.nii.gz")
    adc = write_volume(synthetic.adc, scratch / "synthetic_adc.nii.gz")
    found.append(("end_to_end.py study, 24x256x256 @ 2 mm", load_study(dwi=dwi, adc=adc), np.asarray(synthetic.mask.array) != 0,
                  None, None))
    return found


def synthetic_studies(count: int) -> list[tuple[str, Any, np.ndarray, str | None, tuple[slice, slice] | None]]:
    """``count`` generator studies of a wide field of view (``SYNTHETIC_RANGES``, seeds from
    ``SYNTHETIC_SEEDS``), each with its own infarct mask as the reference."""
    from LambdaSegmentLib.io import load_study
    from LambdaSegmentLib.synthesis import generate

    found: list[tuple[str, Any, np.ndarray, str | None, tuple[slice, slice] | None]] = []
    for seed in SYNTHETIC_SEEDS[:count]:
        made = generate(seed, **SYNTHETIC_RANGES)
        kind = "skull-stripped" if made.params.get("skull_stripped") else "skull-on"
        shape = "x".join(str(n) for n in made.dwi.array.shape)
        lesion = "lesion-free" if not np.any(made.mask.array) else f"{made.mask.array.astype(bool).sum() * made.mask.voxel_volume_mm3 / 1000:.1f} mL infarct"
        found.append((f"seed {seed}, {kind}, {shape}, {lesion}",
                      load_study(dwi=made.dwi, adc=made.adc, adc_unit=made.adc_unit, b_value=made.b_value),
                      np.asarray(made.mask.array) != 0, None, None))
    return found


def field_shape(study: Any, package: Any) -> str:
    """The (h, w) the package's own network runs on for ``study``, against its stack's."""
    from LambdaSegmentLib.preprocessing import prepare_input
    from LambdaSegmentLib.preprocessing.brain_mask import brain_mask

    prepared = prepare_input(study, package.manifest["preprocessing"])
    brain = brain_mask(study.dwi, method=package.brain_mask_method, foreground=study.foreground)
    field = brain_field(prepared.to_model_grid(study.dwi.with_array(brain.astype(np.uint8))), prepared.spacing_thw_mm[1:],
                        int(package.manifest["preprocessing"].get("pad_multiple", 16)), min_field_mm=FIELD_MM)
    return f"{field.shape_hw[0]}x{field.shape_hw[1]} of {field.stack_hw[0]}x{field.stack_hw[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, metavar="DIR", help="model package (default: the bundled one)")
    parser.add_argument("--synthetic", type=int, default=0, metavar="N",
                        help="instead: N generator studies of a 384-512 mm field of view (at most 16; issue 13's rule 122)")
    parser.add_argument("--output", default=None, help="table stem (default benchmarks/results/network_field[_synthetic]_cpu)")
    args = parser.parse_args()
    if not 0 <= args.synthetic <= len(SYNTHETIC_SEEDS):
        parser.error(f"--synthetic must be 0 to {len(SYNTHETIC_SEEDS)}")
    stem = "network_field_synthetic_cpu" if args.synthetic else "network_field_cpu"
    args.output = args.output or str(REPO / "benchmarks" / "results" / stem)
    package = load_model_package(args.model)
    variants = {"whole": package, "field": dataclasses.replace(package, manifest={**package.manifest, FIELD_KEY: FIELD_MM})}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        delivered_masks: dict[str, np.ndarray] = {}
        chosen = synthetic_studies(args.synthetic) if args.synthetic else studies(Path(scratch))
        for label, study, truth, pads, inside in chosen:
            voxel_ml = study.dwi.voxel_volume_mm3 / 1000.0
            masks: dict[str, np.ndarray] = {}
            probabilities: dict[str, np.ndarray] = {}
            for variant in ("whole", "field"):
                for _repeat in range(2):  # the second run is the warm one reported
                    result = segment_study(study, variants[variant], device="cpu")
                masks[variant] = np.asarray(result.mask.array) != 0
                probabilities[variant] = np.asarray(result.probability.array)
                rows.append({
                    "study": label, "variant": variant,
                    "field": field_shape(study, package) if variant == "field" else "whole stack",
                    "seconds": result.seconds,
                    "dice": volume_dice(masks[variant], truth),
                    "fp_ml": float(np.count_nonzero(masks[variant] & ~truth)) * voxel_ml,
                    "mask_ml": float(np.count_nonzero(masks[variant])) * voxel_ml,
                })
                if pads is not None:  # the padded case's mask on the delivered case's voxels, against its field mask
                    rows[-1]["agreement_delivered"] = volume_dice(masks[variant][:, inside[0], inside[1]], delivered_masks[pads])
                print(rows[-1], flush=True)
            delivered_masks[label] = masks["field"]
            rows[-1]["agreement"] = volume_dice(masks["field"], masks["whole"]) if masks["whole"].any() or masks["field"].any() else 1.0
            rows[-1]["max_probability_change"] = float(np.max(np.abs(probabilities["field"] - probabilities["whole"])))
            rows[-1]["identical"] = bool(np.array_equal(probabilities["field"], probabilities["whole"]))
    if args.synthetic:  # rule 122's means, over all studies and by skull
        for group in ("all", "skull-on", "skull-stripped"):
            for variant in ("whole", "field"):
                members = [row for row in rows if row["variant"] == variant and (group == "all" or f", {group}," in row["study"])]
                if members:
                    rows.append({"study": f"mean over {len(members)} studies ({group})", "variant": variant,
                                 **{key: float(np.mean([row[key] for row in members])) for key in ("seconds", "dice", "fp_ml", "mask_ml")}})
    columns = [("study", "study"), ("variant", "variant"), ("field", "network field (h x w of stack)"),
               ("seconds", "segmentation s (warm)"), ("dice", "Dice vs reference"), ("fp_ml", "FP mL"),
               ("mask_ml", "mask mL"), ("agreement_delivered", "Dice vs the delivered case's mask"),
               ("agreement", "Dice field vs whole"),
               ("max_probability_change", "max |Δ probability|"), ("identical", "probability identical")]
    header = machine_header("The network's field around the brain against the whole stack", invocation(),
                            {"model": f"{package.name} {package.version} (weights {package.sha256[:12]})"
                             + (f", partner {package.partner.sha256[:12]}" if package.partner else "")})
    write_tables(rows, columns, Path(args.output), header)
    print(f"wrote {args.output}.md and .csv")


if __name__ == "__main__":
    main()
