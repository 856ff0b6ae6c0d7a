"""On which side of the brain's own midline each expert lesion lies, and which side the network reaches.

    .venv/bin/python benchmarks/lesion_sides.py [--package 0001=runs/x/foldB-wise-0.7/pkg ...]
        # -> benchmarks/results/lesion_sides.json

Issue 13: acute infarcts are mostly one-sided, and the generator draws every embolic shower
within one hemisphere (``synthesis/lesions.py``), while a cardio-embolic or posterior-circulation
shower may reach both. This script counts each ISLES'22 case's expert components (26-connected,
as the lesion-wise F1) and voxels per side. A component's side is read against the study's own
registered midline (``preprocessing.symmetry.register_contralateral``, the product's mirror):
its centroid ``c`` has the contralateral partner ``p = mirror(fitted(c))``, and the component
lies on the patient's left where ``c - p`` points to +x (LPS), on the right where it points to
-x, and on the midline where the two lie within ``MIDLINE_MM``. With ``--package CASE=DIR`` (a
package held out on CASE) it adds, per side, the components whose highest bare network
probability reaches ``THRESHOLD`` (plain pass, before any post-processing). Only numbers are
written, never images (ISLES'22 may not be redistributed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import CASES, ISLES, fold_package, load_real, prepare, real_cases_used  # noqa: E402

from LambdaSegmentLib.io import Volume  # noqa: E402
from LambdaSegmentLib.metrics import label_lesions  # noqa: E402
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask  # noqa: E402
from LambdaSegmentLib.preprocessing.symmetry import ContralateralRegistration, register_contralateral  # noqa: E402

#: A component whose centroid lies within this distance (mm, along LPS x) of its mirror partner
#: is on the midline: half of it is about 2 voxels of 2 mm from the plane.
MIDLINE_MM = 4.0
THRESHOLD = 0.5
SIDES = ("left", "right", "midline")


def side_of(centroid_lps: np.ndarray, registration: ContralateralRegistration) -> str:
    """``left``, ``right`` or ``midline`` (the patient's) for a point (LPS mm) against the study's
    registered midline (see the module docstring)."""
    if registration.mirror is None or registration.fitted is None:
        raise ValueError("an empty brain has no midline")
    point = tuple(float(v) for v in centroid_lps)
    partner = registration.mirror.TransformPoint(registration.fitted.TransformPoint(point))
    offset = point[0] - partner[0]  # LPS x: + towards the patient's left
    if abs(offset) < MIDLINE_MM:
        return "midline"
    return "left" if offset > 0 else "right"


def sides(truth: np.ndarray, grid: Volume, registration: ContralateralRegistration,
          probability: np.ndarray | None = None) -> dict[str, dict[str, int]]:
    """Per side: the components of bool (nk, nj, ni) ``truth``, their voxels and, with
    ``probability``, the components whose highest probability reaches :data:`THRESHOLD`."""
    labels, count = label_lesions(truth)
    out = {side: {"components": 0, "voxels": 0, **({"reached": 0} if probability is not None else {})} for side in SIDES}
    if count == 0:
        return out
    centroids = ndimage.center_of_mass(np.ones_like(labels), labels, range(1, count + 1))  # (k, j, i) each
    voxels = ndimage.sum(np.ones_like(labels), labels, range(1, count + 1))
    highest = ndimage.maximum(probability, labels, range(1, count + 1)) if probability is not None else None
    for index, (k, j, i) in enumerate(centroids):
        side = side_of(grid.index_to_lps(np.asarray([i, j, k])), registration)
        out[side]["components"] += 1
        out[side]["voxels"] += int(voxels[index])
        if highest is not None and highest[index] >= THRESHOLD:
            out[side]["reached"] += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", action="append", default=[], metavar="CASE=DIR",
                        help="a package held out on CASE (0001 or 0003); repeatable")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "lesion_sides.json")
    args = parser.parse_args()
    if not ISLES.is_dir():
        raise SystemExit(f"lesion_sides: {ISLES} is absent (the ISLES'22 cases live in ../shared)")
    packages: dict[str, list[str]] = {}
    for spec in args.package:
        case, _, directory = spec.partition("=")
        if case not in CASES or not directory:
            raise SystemExit(f"lesion_sides: --package {spec!r}: expected CASE=DIR with CASE one of {sorted(CASES)}")
        packages.setdefault(case, []).append(directory)
    results: dict[str, Any] = {"midline_mm": MIDLINE_MM, "threshold": THRESHOLD, "cases": {}}
    for case in CASES:
        study, truth = load_real(case, False)
        # the expert's sides against the product's default mask (a skull-stripped study's nonzero DWI);
        # each package's reach against the registration its own segmentation used
        brain = brain_mask(study.dwi, foreground=study.foreground)
        entry: dict[str, Any] = {"expert": sides(truth, study.dwi, register_contralateral(study.dwi, brain))}
        for directory in packages.get(case, []):
            package = fold_package(directory)
            if case in real_cases_used(package):
                raise SystemExit(f"lesion_sides: {directory} trained on {case}; it is not held out there")
            prepared = prepare(case, study, truth, package, regions=False)
            entry[directory] = sides(truth, study.dwi, prepared.registration, prepared.probability)
        results["cases"][case] = entry
        print(case, json.dumps(entry), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
