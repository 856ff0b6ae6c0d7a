"""How bright the tissue just outside a lesion label is: real expert masks against the generator's.

    .venv/bin/python benchmarks/label_margin.py [--seeds 16] [--output benchmarks/results/label_margin.json]

Issue 13: on both real cases most of what the fold networks miss is a one-voxel margin around
the lesions they find, at DWI 1.4-1.5 x the brain's median and a nearly normal ADC
(``false_positive_components.py --experts``, ``expert_voxels``). The generator and the
injection label a synthetic lesion where its partial-volume fraction is >= 0.5. If the experts
draw wider than that rule, the tissue just outside a real label is darker than the tissue just
outside a synthetic one, and the label's own outermost voxels fainter.

For each labelled study (the two ISLES'22 cases when ``../shared`` has them, natively, and the
protocol's 16 synthetic scoring studies, ``real_scan_cv.SYNTHETIC_TEST_SEEDS``, with a lesion),
inside the product's brain mask (``preprocessing.brain_mask``):

- ``inner``: the label's voxels with a non-label in-plane neighbour (its outermost ring);
- ``outer``: the non-label voxels with a label in-plane neighbour (the ring just outside);
- ``core``: the rest of the label;

each with its voxel count, median DWI over the brain's median DWI, and median ADC over the
brain's median ADC (``postprocess.relative_adc``). In-plane = the 8-neighbourhood in the slice
plane of the study's own slice axis (``find_slice_axis``), so thick slices are never crossed.
Writes one JSON; no image.
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

from LambdaSegmentLib.inference.postprocess import relative_adc  # noqa: E402
from LambdaSegmentLib.io import Study  # noqa: E402
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask  # noqa: E402
from LambdaSegmentLib.preprocessing.slice_axis import find_slice_axis  # noqa: E402


def in_plane_ring_structure(slice_axis: int) -> np.ndarray:
    """bool (3, 3, 3): the 8-neighbourhood in the plane normal to ITK axis ``slice_axis``
    (array axis ``2 - slice_axis``), centre included."""
    structure = np.zeros((3, 3, 3), dtype=bool)
    index = [slice(None)] * 3
    index[2 - slice_axis] = 1
    structure[tuple(index)] = True
    return structure


def margin_rows(study: Study, label: np.ndarray, brain: np.ndarray) -> dict[str, dict[str, Any]]:
    """``inner`` / ``outer`` / ``core`` of ``label`` inside ``brain`` (bool (nk, nj, ni) each):
    voxels, median DWI / brain median, median ADC / brain median (see the module)."""
    brain = np.asarray(brain, dtype=bool)
    dwi = np.asarray(study.dwi.array, dtype=np.float64)
    dwi = dwi / np.median(dwi[brain])
    adc = relative_adc(np.asarray(study.adc.array), brain)
    label = np.asarray(label, dtype=bool) & brain
    structure = in_plane_ring_structure(find_slice_axis(study.dwi))
    grown = ndimage.binary_dilation(label, structure=structure)
    shrunk = ndimage.binary_erosion(label, structure=structure, border_value=1)
    groups = {"inner": label & ~shrunk, "outer": grown & ~label & brain, "core": shrunk}
    rows: dict[str, dict[str, Any]] = {}
    for name, voxels in groups.items():
        rows[name] = {"voxels": int(voxels.sum())}
        if voxels.any():
            rows[name].update({"dwi": round(float(np.median(dwi[voxels])), 3), "adc": round(float(np.median(adc[voxels])), 3)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=16, help="how many of the protocol's synthetic scoring studies (default all 16)")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "label_margin.json")
    args = parser.parse_args()
    from real_scan_cv import CASES, ISLES, SYNTHETIC_TEST_SEEDS, load_real, synthetic

    studies: list[tuple[str, Study, np.ndarray]] = []
    if ISLES.is_dir():
        studies += [(f"real {case}", *load_real(case, False)) for case in CASES]
    else:
        print(f"label_margin: {ISLES} is absent; synthetic studies only", file=sys.stderr)
    studies += [(f"synthetic {seed}", *synthetic(seed)) for seed in list(SYNTHETIC_TEST_SEEDS)[: args.seeds]]
    rows = []
    for name, study, label in studies:
        if not label.any():
            continue
        row = {"study": name, **margin_rows(study, label, brain_mask(study.dwi))}
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {}
    for kind in ("real", "synthetic"):
        chosen = [row for row in rows if row["study"].startswith(kind)]
        summary[kind] = {group: {measure: [round(float(q), 3) for q in np.percentile(values, [50, 25, 75])]
                                 for measure in ("dwi", "adc")
                                 if (values := [row[group][measure] for row in chosen if measure in row[group]])}
                         for group in ("core", "inner", "outer")} if chosen else {}
    print(json.dumps({"summary (median and quartiles over studies)": summary}, indent=1))
    from LambdaSegmentLib.training.export import source_revision

    args.output.write_text(json.dumps({"command": f"benchmarks/label_margin.py --seeds {args.seeds}", "revision": source_revision(),
                                       "rows": rows, "summary": summary}, indent=1) + "\n", encoding="utf-8")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
