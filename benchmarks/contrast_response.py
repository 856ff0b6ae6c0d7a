"""How a fold network answers lesion voxels of the same contrast on real and on synthetic studies.

    .venv/bin/python benchmarks/contrast_response.py --label NAME --package 0001=runs/x/foldB-wise-0.7/pkg

Issue 13: the networks miss the faint margin of the real lesions (DWI about 1.4 x the brain's,
ADC nearly normal, probability about 0) while on the generator's lesions the voxels they miss
have much the same DWI and ADC. If, at the same DWI and ADC, the network answers real lesion
voxels lower than synthetic ones, what it lacks is the context (texture, shape, surroundings),
not the contrast; if it answers them alike, the contrast decides and the generator's faint
lesions are too rare or too faint.

Each ``--package CASE=DIR`` (a fold package, held out from CASE) segments its held-out ISLES'22
case natively and the protocol's 16 synthetic scoring studies (``real_scan_cv.SYNTHETIC_TEST_SEEDS``)
as the fold rows do (``real_scan_cv.prepare``, no seed network). Every expert (or generator-
labelled) voxel inside the brain is binned by the volume of its lesion (26-connected, mL), its
DWI over the brain's median (``postprocess.relative_dwi``) and its ADC over the brain's median
(``postprocess.relative_adc``), so that a speck of an embolic shower is set against synthetic
specks, not against the margin of a large synthetic infarct; and per bin and source (``real`` / ``synthetic``) the file gives the voxels, the mean probability
and the share at probability >= 0.5. Writes ``benchmarks/results/contrast_response_<label>.json``; no image.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from LambdaSegmentLib.metrics import label_lesions  # noqa: E402
from real_scan_cv import (CASES, ISLES, SYNTHETIC_TEST_SEEDS, Prepared, fold_package, load_real, prepare,  # noqa: E402
                          real_cases_used, synthetic)

# bin edges: the lesion's volume (mL), DWI / the brain's median DWI, ADC / the brain's median ADC
# (the last bin of each open)
SIZE_EDGES = (0.0, 0.1, 1.0, 10.0)
DWI_EDGES = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.5)
ADC_EDGES = (0.0, 0.6, 0.7, 0.8, 0.9, 1.0)


def bin_name(edges: tuple[float, ...], index: int) -> str:
    """``"1.2-1.4"`` for the bin starting at ``edges[index]``; the last one ``">=2.5"``."""
    return f">={edges[index]:g}" if index == len(edges) - 1 else f"{edges[index]:g}-{edges[index + 1]:g}"


def response_bins(dwi_ratio: np.ndarray, adc_ratio: np.ndarray, probability: np.ndarray,
                  lesion_ml: np.ndarray) -> dict[str, list[float]]:
    """Per (size, DWI, ADC) bin, key ``"<mL> | <dwi> | <adc>"``: [voxels, probability sum,
    voxels >= 0.5] over the lesion voxels. ``lesion_ml`` (any shape, like the others): each
    voxel's lesion volume in mL, 0 outside the lesions. Voxels below the first DWI edge are left
    out (a lesion voxel no brighter than the brain is not a contrast question)."""
    lesion = np.asarray(lesion_ml) > 0
    size, dwi, adc, p = (np.asarray(a, dtype=np.float64)[lesion] for a in (lesion_ml, dwi_ratio, adc_ratio, probability))
    keep = dwi >= DWI_EDGES[0]
    size_bin = np.digitize(size[keep], SIZE_EDGES) - 1
    dwi_bin = np.digitize(dwi[keep], DWI_EDGES) - 1
    adc_bin = np.clip(np.digitize(adc[keep], ADC_EDGES) - 1, 0, len(ADC_EDGES) - 1)
    out: dict[str, list[float]] = {}
    for v, d, a, q in zip(size_bin, dwi_bin, adc_bin, p[keep]):
        key = f"{bin_name(SIZE_EDGES, int(v))} | {bin_name(DWI_EDGES, int(d))} | {bin_name(ADC_EDGES, int(a))}"
        entry = out.setdefault(key, [0, 0.0, 0])
        entry[0] += 1
        entry[1] += float(q)
        entry[2] += int(q >= 0.5)
    return out


def lesion_ml(prepared: Prepared) -> np.ndarray:
    """float64 (nk, nj, ni): each expert voxel inside the brain given its 26-connected lesion's
    volume (mL, the whole lesion's, brain or not); 0 elsewhere."""
    lesions, count = label_lesions(prepared.truth)
    volumes = np.bincount(lesions.ravel(), minlength=count + 1) * prepared.study.dwi.voxel_volume_mm3 / 1000.0
    volumes[0] = 0.0
    return np.where(prepared.brain, volumes[lesions], 0.0)


def merged(into: dict[str, list[float]], more: dict[str, list[float]]) -> dict[str, list[float]]:
    """``into`` with ``more``'s counts added bin by bin (in place; returned)."""
    for key, (n, total, found) in more.items():
        entry = into.setdefault(key, [0, 0.0, 0])
        entry[0] += n
        entry[1] += total
        entry[2] += found
    return into


def table(bins: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Per bin: voxels, mean probability, share >= 0.5 (rounded), bins in edge order."""
    order = {f"{bin_name(SIZE_EDGES, v)} | {bin_name(DWI_EDGES, d)} | {bin_name(ADC_EDGES, a)}": (v, d, a)
             for v in range(len(SIZE_EDGES)) for d in range(len(DWI_EDGES)) for a in range(len(ADC_EDGES))}
    return {key: {"voxels": int(n), "mean_probability": round(total / n, 3), "found_share": round(found / n, 3)}
            for key, (n, total, found) in sorted(bins.items(), key=lambda item: order[item[0]])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--package", action="append", required=True, metavar="CASE=DIR")
    args = parser.parse_args()
    if not ISLES.is_dir():
        raise SystemExit(f"contrast_response: {ISLES} is absent; it needs the two ISLES'22 cases")
    results: dict[str, Any] = {}
    for spec in args.package:
        case, _, directory = spec.partition("=")
        if case not in CASES:
            raise SystemExit(f"contrast_response: {spec}: the case must be one of {', '.join(CASES)}")
        package = fold_package(directory)
        if case in real_cases_used(package):
            raise SystemExit(f"contrast_response: {directory} was trained on {case}; it is not held out")
        sources: dict[str, dict[str, list[float]]] = {"real": {}, "synthetic": {}}
        studies = [(case, *load_real(case, False))] + [(f"synth-{s}", *synthetic(s)) for s in SYNTHETIC_TEST_SEEDS]
        for name, study, truth in studies:
            if not truth.any():
                continue
            prepared = prepare(name, study, truth, package, regions=False)
            merged(sources["real" if name in CASES else "synthetic"],
                   response_bins(prepared.dwi_ratio, prepared.adc_ratio, prepared.probability, lesion_ml(prepared)))
            print(f"  {name}: {int((prepared.truth & prepared.brain).sum())} lesion voxels", flush=True)
        results[spec] = {source: table(bins) for source, bins in sources.items()}
        for key in results[spec]["real"]:
            real, synth = results[spec]["real"][key], results[spec]["synthetic"].get(key)
            print(f"{spec.partition('=')[0]} {key:>24}: real {real['voxels']:5d} p {real['mean_probability']:.3f}"
                  + (f"   synthetic {synth['voxels']:5d} p {synth['mean_probability']:.3f}" if synth else ""), flush=True)
    from LambdaSegmentLib.training.export import source_revision

    out = REPO / "benchmarks" / "results" / f"contrast_response_{args.label}.json"
    command = f"benchmarks/contrast_response.py --label {args.label}" + "".join(f" --package {p}" for p in args.package)
    out.write_text(json.dumps({"command": command, "revision": source_revision(), "size_edges_ml": SIZE_EDGES, "dwi_edges": DWI_EDGES,
                               "adc_edges": ADC_EDGES, "packages": results}, indent=1) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
