"""How a brain's fine DWI texture is coupled to its ADC: real studies against the generator's.

    .venv/bin/python benchmarks/dwi_adc_coupling.py [--synthesis JSON] [--output benchmarks/results/dwi_adc_coupling]

Why (issue 13): the real brains' lesion-sized bright dots that no expert labelled are as
restricted as the real emboli (``bright_dots.py``: ADC over their ring 0.69-0.70 against the
generator's 0.85-0.90), so in a real brain a bright, restricted speck is common and in the
generator's it is nearly always a lesion. A bright voxel's ADC follows the signal equation,
ADC = ln(S0 / S_b) / b: where the DWI (S_b) is bright because S0 is (T2 texture), the ADC is
unchanged; where it is bright because diffusion is slower, or because the b = 1000 image's own
noise is up, the ADC is lower by ln(brightness) / b. This script measures which of the two
makes a brain's fine texture.

Per study, over brain voxels at least 6 mm below the brain's edge (``postprocess.edge_depth_mm``),
not CSF-like (ADC at most 1.5e-3 mm^2/s) and at least 2 voxels from any lesion: the in-plane
residuals of ln DWI and of the ADC against their own 3 x 3 median (``d ln DWI``; ``d ADC`` in
1e-3 mm^2/s), and

- ``coupling``: minus the least-squares slope of ``d ADC x b / 1000`` on ``d ln DWI``. 1: every
  fine DWI fluctuation is mirrored in the ADC (diffusion texture or b = 1000 noise); 0: none is
  (S0 texture, or b0 noise, which moves the ADC alone);
- ``correlation``: Pearson's r of the two residuals;
- ``dwi_texture`` and ``adc_texture``: the residuals' standard deviations (``d ln DWI``, and
  ``d ADC`` over the brain's median ADC);
- the same four over the part of that tissue at least ``CSF_MARGIN`` voxels in-plane from any
  CSF-like voxel (``far_*``, with its ``far_voxels``): the coupling of tissue texture itself, not
  of the partial volume with the CSF of sulci and ventricles next to it;
- ``csf_s0_ratio``: the median S0 of the brain's clear CSF (ADC above ``CLEAR_CSF_ADC``) over
  that of its deep tissue, S0 = DWI x exp(b x ADC) from the two maps: with CSF in part of a voxel,
  a higher ratio moves the voxel's ADC more for the same change of its DWI.

Studies: the two ISLES'22 cases natively (``../shared``; numbers only, never images) and 8
synthetic studies at the generator's default ranges made skull-stripped at 2 mm like them
(``bright_dots.py``'s seeds 33,100,000+), with ``--synthesis`` added to the generator's options.
Writes ``OUTPUT.json`` and ``OUTPUT.md``.
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

from bright_dots import CSF_ADC, DEFAULT, DEFAULT_SEEDS, MIN_DEPTH_MM, RING  # noqa: E402
from harness import invocation  # noqa: E402
from real_scan_cv import CASES, ISLES, load_real, synthetic  # noqa: E402

from LambdaSegmentLib.cli import json_object  # noqa: E402
from LambdaSegmentLib.inference.postprocess import edge_depth_mm  # noqa: E402
from LambdaSegmentLib.io import Study  # noqa: E402
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask  # noqa: E402

IN_PLANE = (1, 3, 3)  # (k, j, i): the residual's median window, never across slices
CSF_MARGIN = 2  # in-plane voxels between a far_* voxel and the nearest CSF-like one
CLEAR_CSF_ADC = 2.5  # 1e-3 mm^2/s: above it a voxel is nearly all CSF


def coupling(study: Study, truth: np.ndarray) -> dict[str, float]:
    """The module docstring's measures for one study (``truth``: bool (nk, nj, ni) lesion mask)."""
    dwi = np.asarray(study.dwi.array, dtype=np.float32)
    adc = np.asarray(study.adc.array, dtype=np.float32)  # 1e-3 mm^2/s
    brain = brain_mask(study.dwi, foreground=study.foreground)
    near_lesion = ndimage.binary_dilation(truth, iterations=RING)
    tissue = brain & (edge_depth_mm(brain, study.dwi.spacing_mm) >= MIN_DEPTH_MM) & (adc > 0) & (adc <= CSF_ADC) \
        & (dwi > 0) & ~near_lesion
    near_csf = ndimage.binary_dilation(adc > CSF_ADC, structure=np.ones((1, 3, 3), bool), iterations=CSF_MARGIN)
    log_dwi = np.log(np.maximum(dwi, 1e-6))
    d_log_dwi = log_dwi - ndimage.median_filter(log_dwi, size=IN_PLANE)
    d_adc = (adc - ndimage.median_filter(adc, size=IN_PLANE)) * (study.b_value / 1000.0)
    adc_median = float(np.median(adc[brain & (adc > 0)]))
    s0 = dwi * np.exp(study.b_value / 1000.0 * adc)
    clear_csf = brain & (adc > CLEAR_CSF_ADC)
    row: dict[str, float] = {"b_value": float(study.b_value),
                             "csf_s0_ratio": round(float(np.median(s0[clear_csf]) / np.median(s0[tissue])), 2) if clear_csf.any() else float("nan")}
    for prefix, where in (("", tissue), ("far_", tissue & ~near_csf)):
        x, y = d_log_dwi[where], d_adc[where]
        row.update({f"{prefix}voxels": int(where.sum()), f"{prefix}coupling": round(-float(np.dot(x, y) / np.dot(x, x)), 3),
                    f"{prefix}correlation": round(float(np.corrcoef(x, y)[0, 1]), 3),
                    f"{prefix}dwi_texture": round(float(np.std(x)), 4),
                    f"{prefix}adc_texture": round(float(np.std(y) / (study.b_value / 1000.0) / adc_median), 4)})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "dwi_adc_coupling")
    parser.add_argument("--synthesis", type=json_object, default={}, metavar="JSON", help="generator options added to the synthetic studies")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    if ISLES.is_dir():
        for case in CASES:
            rows.append({"study": f"real {case}", **coupling(*load_real(case, False))})
    for seed in DEFAULT_SEEDS:
        rows.append({"study": f"synthetic {seed}", **coupling(*synthetic(seed, **{**DEFAULT, **args.synthesis}))})
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.with_suffix(".json").write_text(json.dumps({"synthesis": args.synthesis, "studies": rows}, indent=1) + "\n", encoding="utf-8")
    keys = ("b_value", "csf_s0_ratio", *(f"{prefix}{key}" for prefix in ("", "far_")
                         for key in ("voxels", "coupling", "correlation", "dwi_texture", "adc_texture")))
    lines = ["# Fine DWI texture against fine ADC texture", "", f"Command: `{invocation()}` (definitions in its docstring).", "",
             f"Synthesis options added: {json.dumps(args.synthesis)}.", "",
             "| study | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    lines += ["| " + row["study"] + " | " + " | ".join(str(row[key]) for key in keys) + " |" for row in rows]
    args.output.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
