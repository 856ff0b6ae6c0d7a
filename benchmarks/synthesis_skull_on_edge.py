"""How bright the brain's edge is on skull-on DWI: the two real clinical series against synthetic studies.

Issue 13: stage-1 networks mark skull-on synthetic studies at the brain mask's edge, most of it
on the generator's dura shell (``synthetic_false_positives.py``; the model card's rules 69-71).
How bright that edge is, real against synthetic, is measured here with one brain mask for both
(the product's ``preprocessing.brain_mask``, so that the band is where the product looks), DWI
over the mask's median DWI. The inner band moves with the mask's edge: without the shell it
lies on the cortex, so this statistic does not isolate the shell.

- ``inner``: the mask's own outer band, depth 0-4 mm (in-plane and across slices, by the
  voxel spacing), where the marks lie;
- ``outer``: 0-4 mm outside the mask (what the mask just left out);
- per band: DWI p50 / p90 / p99 and the fraction of voxels above 1.5x the median
  (``bright_fraction``: lesion-bright);
- ``profile``: at the skull base (the inferior 35 % of the mask's slices, as
  ``skull_base_marks.py``), the median DWI of the mask's in-plane depth layers
  (``PROFILE_LAYERS_MM``, in-plane only, so thick slices are never mixed; meant for axial or
  near-axial stacks, as the real series and the generator's are), and ``rise``, the
  3-4.5 mm layer over the 6-9 mm one: whether the signal has reached the brain's own a few
  voxels in. The generator's shell lies inside the mask there, over its extra-axial CSF, so the
  CSF sits in that layer and lowers ``rise`` (the same studies with and without the shell,
  ``skull_on_dura``); the shallower layers hold a voxel or none at 1.5-2 mm in-plane spacing,
  so they are reported, not used. A low rise can also come from anything else dark under the
  mask's edge (extra-axial CSF, atrophy), so it is a necessary sign of a shell, not a proof.

Real: ``../shared/data/clinical-dwi-dicom`` (no label, no ADC; their infarcts, if any, count in
the bands as they are). Synthetic: a folder written by ``lambdasegment synthesize`` (its
skull-on studies only, read from each ``_params.json``), the infarct dilated by 2 voxels left out.

    .venv/bin/python benchmarks/synthesis_skull_on_edge.py --data /tmp/heldout-skullon [--tag NAME]

Writes ``benchmarks/results/synthesis_skull_on_edge[_TAG].json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from LambdaSegmentLib.inference.postprocess import edge_depth_mm  # noqa: E402
from LambdaSegmentLib.io import Volume, read_volume  # noqa: E402
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask, in_plane_distance_mm  # noqa: E402
from LambdaSegmentLib.preprocessing.slice_axis import find_slice_axis  # noqa: E402
from LambdaSegmentLib.training import find_labelled_cases  # noqa: E402
from skull_base_marks import inferior_slices  # noqa: E402
from synthetic_release_gate import skull_on  # noqa: E402

CLINICAL = REPO.parent / "shared" / "data" / "clinical-dwi-dicom"
BAND_MM = 4.0
BRIGHT = 1.5
PROFILE_LAYERS_MM = ((0.0, 1.5), (1.5, 3.0), (3.0, 4.5), (4.5, 6.0), (6.0, 9.0))


def band_statistics(values: np.ndarray) -> dict[str, float]:
    """p50 / p90 / p99 and the fraction above ``BRIGHT`` of DWI / brain median values (1-D)."""
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"p50": round(float(p50), 3), "p90": round(float(p90), 3), "p99": round(float(p99), 3),
            "bright_fraction": round(float((values > BRIGHT).mean()), 4), "voxels": int(values.size)}


def edge_bands(dwi: Volume, leave_out: np.ndarray | None = None, brain: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """The two bands of the module docstring for one DWI; ``leave_out`` (bool, DWI grid) is not counted;
    ``brain``: the product's brain mask of ``dwi`` when the caller has it already (else computed)."""
    values = np.asarray(dwi.array, dtype=np.float64)
    brain = brain_mask(dwi) if brain is None else brain
    values = values / np.median(values[brain])
    keep = np.ones_like(brain) if leave_out is None else ~leave_out
    inside_depth = edge_depth_mm(brain, dwi.spacing_mm)
    outside_distance = ndimage.distance_transform_edt(~brain, sampling=tuple(dwi.spacing_mm[::-1]))
    inner = brain & (inside_depth <= BAND_MM) & keep
    outer = ~brain & (outside_distance <= BAND_MM) & keep
    return {"inner": band_statistics(values[inner]), "outer": band_statistics(values[outer])}


def skull_base_profile(dwi: Volume, leave_out: np.ndarray | None = None, brain: np.ndarray | None = None) -> dict[str, object]:
    """The ``profile`` of the module docstring for one DWI: median DWI / brain median per in-plane
    depth layer (mm) at the skull base, and ``rise`` (None where a layer is empty); ``leave_out``
    and ``brain`` as for :func:`edge_bands`."""
    values = np.asarray(dwi.array, dtype=np.float64)
    brain = brain_mask(dwi) if brain is None else brain
    values = values / np.median(values[brain])
    zone = brain & inferior_slices(dwi, brain)[:, None, None]
    if leave_out is not None:
        zone &= ~leave_out
    depth = in_plane_distance_mm(brain, dwi, find_slice_axis(dwi))  # within each slice, never across
    medians = []
    for lo, hi in PROFILE_LAYERS_MM:
        layer = zone & (depth > lo) & (depth <= hi)
        medians.append(round(float(np.median(values[layer])), 3) if layer.any() else None)
    rise = round(medians[2] / medians[-1], 3) if medians[2] is not None and medians[-1] else None
    return {"layers_mm": [list(layer) for layer in PROFILE_LAYERS_MM], "median": medians, "rise": rise}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="synthetic folder (lambdasegment synthesize)")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    results: dict[str, dict] = {"real": {}, "synthetic": {}}
    for series in ("siemens-0019983", "ge-0226308"):
        if (CLINICAL / series).is_dir():
            dwi = read_volume(CLINICAL / series)
            brain = brain_mask(dwi)  # once for both measures
            results["real"][series] = {**edge_bands(dwi, brain=brain), "profile": skull_base_profile(dwi, brain=brain)}
            print(series, json.dumps(results["real"][series]), flush=True)
    for case in find_labelled_cases(args.data):
        if not skull_on(args.data, case.name):
            continue
        truth = np.asarray(read_volume(case.mask).array) > 0
        dwi, leave_out = read_volume(case.dwi), ndimage.binary_dilation(truth, iterations=2)
        brain = brain_mask(dwi)
        results["synthetic"][case.name] = {**edge_bands(dwi, leave_out, brain),
                                           "profile": skull_base_profile(dwi, leave_out, brain)}
        print(case.name, json.dumps(results["synthetic"][case.name]), flush=True)
    for band in ("inner", "outer"):
        for key in ("p90", "bright_fraction"):
            found = [row[band][key] for row in results["synthetic"].values()]
            if found:
                results[f"synthetic_{band}_{key}_range"] = [min(found), max(found)]
    rises = [row["profile"]["rise"] for row in results["synthetic"].values() if row["profile"]["rise"] is not None]
    if rises:
        results["synthetic_profile_rise_range"] = [min(rises), max(rises)]
        results["synthetic_profile_rise_median"] = round(float(np.median(rises)), 3)
    out = REPO / "benchmarks" / "results" / f"synthesis_skull_on_edge{'_' + args.tag if args.tag else ''}.json"
    out.write_text(json.dumps({"data": str(args.data), **results}, indent=1) + "\n", encoding="utf-8")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
