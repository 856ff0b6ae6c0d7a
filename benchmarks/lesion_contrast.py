"""How bright and how restricted lesions are against their own surroundings, real against synthetic.

Issue 13's held-out lesion-wise F1 is lost on small, faint lesions (``small_lesion_detection.py``).
This script measures, per true lesion (26-connected, as the lesion-wise F1) and by size in
voxels, four contrasts:

- mean DWI / the brain's median DWI, and median ADC / the brain's median ADC;
- mean DWI / mean DWI of the lesion's ring, and median ADC / median ADC of its ring (the ring:
  brain voxels within 2 voxels of the lesion that belong to no lesion);

two of its shape (``lesion_shape``): its in-plane thickness (mm: twice the largest in-plane
distance from a lesion voxel to the nearest non-lesion voxel, less one voxel, so a one-voxel line
is one voxel thick), and its core share (the share of its voxels whose 8 in-plane neighbours are
all in the lesion). In-plane is the plane of the study's own slice axis (``find_slice_axis``), as
in ``label_margin.py``. ``contrast_response.py`` found real specks answered far lower than synthetic
ones of the same size and contrast; shape is what is left to compare. And two of its position:
the median distance of its voxels to the nearest CSF-like brain voxel (``csf_distance_mm``: a
periventricular or sulcal lesion abuts CSF, a white-matter one does not; beside it the same
median over the study's lesion-free brain, since real brains hold more CSF), and their median depth
below the brain's edge (``postprocess.edge_depth_mm``, as the edge check measures it).

Sources: the two ISLES'22 cases natively (``../shared``; numbers only, never images), and
synthetic embolic showers (the studies of ``small_lesion_detection.py``: skull-stripped, 2 mm,
2-10 mL, seeds 33,000,000+) with the generator's defaults and with
``faint_lesion_probability`` 1.0; and stage 2's injected infarcts on each real case
(``training.real_backgrounds.inject_infarcts``, 0-3 per study as stage 2 draws them, seeds
(34,000,000, s) for s < 20, used by nothing else), with the default lesion signal and with the
faint one (``synthesis.generator.faint_signal_ranges``, issue 13's rule 87): only the injected
components count, never the case's own lesions. Quartiles per size bin are written as JSON and
Markdown.

    .venv/bin/python benchmarks/lesion_contrast.py   # -> benchmarks/results/lesion_contrast.{json,md}
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

from real_scan_cv import CASES, ISLES, load_real, synthetic  # noqa: E402
from bright_dots import CSF_ADC  # noqa: E402
from label_margin import in_plane_ring_structure  # noqa: E402
from small_lesion_detection import EMBOLIC, INJECTED_STUDIES, INJECTION_SEED, SEEDS, SIZE_BINS, injected_studies, within  # noqa: E402

from LambdaSegmentLib.inference import load_model_package  # noqa: E402
from LambdaSegmentLib.inference.postprocess import edge_depth_mm  # noqa: E402
from LambdaSegmentLib.io import Study  # noqa: E402
from LambdaSegmentLib.metrics import label_lesions  # noqa: E402
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask  # noqa: E402
from LambdaSegmentLib.preprocessing.slice_axis import find_slice_axis  # noqa: E402

MEASURES = ("dwi_brain", "adc_brain", "dwi_ring", "adc_ring", "thickness_mm", "core_share", "csf_mm", "brain_csf_mm", "depth_mm")
RING_VOXELS = 2


def injected_contrasts(case: str, faint: bool, brain_method: str) -> list[dict[str, float]]:
    """Rows of :func:`lesion_contrasts` for the infarcts stage 2 injects into real case ``case``
    (its own expert lesions excluded), with the default or the faint lesion signal."""
    return [row for _, study, injected in injected_studies(case, faint) for row in lesion_contrasts(study, injected, brain_method)]


def lesion_contrasts(study: Study, truth: np.ndarray, brain_method: str) -> list[dict[str, float]]:
    """One row per true lesion of ``truth`` ((k, j, i) bool): its voxels and the four contrasts."""
    dwi = np.asarray(study.dwi.array, dtype=np.float32)
    adc = np.asarray(study.adc.array, dtype=np.float32)
    brain = np.asarray(brain_mask(study.dwi, method=brain_method, foreground=study.foreground)) != 0
    dwi_median, adc_median = float(np.median(dwi[brain])), float(np.median(adc[brain]))
    labels, count = label_lesions(truth)
    slice_axis = find_slice_axis(study.dwi)
    to_csf = csf_distance_mm(brain, adc, truth, study.dwi.spacing_mm)
    depth = edge_depth_mm(brain, study.dwi.spacing_mm)
    brain_csf_mm = float(np.median(to_csf[brain & ~truth]))  # the study's own baseline: real brains hold more CSF
    rows = []
    for lesion in range(1, count + 1):
        inside = labels == lesion
        ring = ndimage.binary_dilation(inside, iterations=RING_VOXELS) & brain & ~truth
        if not ring.any():
            continue
        rows.append({"voxels": int(inside.sum()), **lesion_shape(inside, study.dwi.spacing_mm, slice_axis),
                     "dwi_brain": float(dwi[inside].mean() / dwi_median),
                     "adc_brain": float(np.median(adc[inside]) / adc_median),
                     "dwi_ring": float(dwi[inside].mean() / dwi[ring].mean()),
                     "adc_ring": float(np.median(adc[inside]) / np.median(adc[ring])),
                     "csf_mm": float(np.median(to_csf[inside])), "brain_csf_mm": brain_csf_mm,
                     "depth_mm": float(np.median(depth[inside]))})
    return rows


def csf_distance_mm(brain: np.ndarray, adc: np.ndarray, truth: np.ndarray, spacing_mm: tuple[float, float, float]) -> np.ndarray:
    """float64 (nk, nj, ni): each voxel's distance (mm, in 3D) to the nearest CSF-like brain voxel
    (ADC above ``bright_dots.CSF_ADC`` 1e-3 mm^2/s: ventricles, sulci, fissures), never a lesion
    voxel; inf everywhere when the brain holds none. ``adc`` in 1e-3 mm^2/s, ``spacing_mm`` (i, j, k)."""
    csf = np.asarray(brain, dtype=bool) & (np.asarray(adc) > CSF_ADC) & ~np.asarray(truth, dtype=bool)
    if not csf.any():
        return np.full(csf.shape, np.inf)
    return ndimage.distance_transform_edt(~csf, sampling=[float(s) for s in reversed(spacing_mm)])


def lesion_shape(inside: np.ndarray, spacing_mm: tuple[float, float, float], slice_axis: int) -> dict[str, float]:
    """``thickness_mm`` and ``core_share`` of one lesion, ``inside`` bool (nk, nj, ni), with
    (i, j, k) ``spacing_mm`` and ITK ``slice_axis`` (array axis ``2 - slice_axis``); the
    thickness is counted in the finer in-plane spacing's voxels."""
    box = ndimage.find_objects(inside.astype(np.uint8))[0]
    padded = np.pad(inside[box], 1)
    # a huge slice spacing keeps the nearest non-lesion voxel in the lesion's own slice
    sampling = [float(s) for s in reversed(spacing_mm)]
    voxel_mm = min(s for axis, s in enumerate(sampling) if axis != 2 - slice_axis)
    sampling[2 - slice_axis] = 1e6
    depth = ndimage.distance_transform_edt(padded, sampling=sampling)
    core = ndimage.binary_erosion(padded, structure=in_plane_ring_structure(slice_axis), border_value=0)
    return {"thickness_mm": float(2.0 * depth.max() - voxel_mm), "core_share": float(core.sum() / padded.sum())}


def summary(rows: list[dict[str, float]]) -> list[dict[str, Any]]:
    """Per size bin: the number of lesions and each measure's quartiles."""
    table = []
    for low, high in SIZE_BINS:
        chosen = [row for row in rows if within(row["voxels"], low, high)]
        entry: dict[str, Any] = {"voxels": f"{low}-{high or ''}", "n": len(chosen)}
        for measure in MEASURES:
            values = [row[measure] for row in chosen]
            entry[measure] = [round(float(q), 3) for q in np.percentile(values, (25, 50, 75))] if values else None
        table.append(entry)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "lesion_contrast")
    args = parser.parse_args()
    method = load_model_package().brain_mask_method
    sources: dict[str, list[dict[str, float]]] = {}
    if ISLES.is_dir():
        for case in CASES:
            sources[f"real {case} native"] = lesion_contrasts(*load_real(case, thick=False), method)
    for name, extra in (("synthetic embolic, defaults", {}), ("synthetic embolic, faint_lesion_probability 1.0", {"faint_lesion_probability": 1.0})):
        sources[name] = [row for seed in SEEDS for row in lesion_contrasts(*synthetic(seed, **EMBOLIC, **extra), method)]
    if ISLES.is_dir():
        for case in CASES:
            for faint in (False, True):
                sources[f"injected into {case}, {'faint' if faint else 'defaults'}"] = injected_contrasts(case, faint, method)
    results = {"ring_voxels": RING_VOXELS, "synthetic_seeds": [SEEDS[0], SEEDS[-1]], "synthetic_options": EMBOLIC,
               "injection": {"seed": INJECTION_SEED, "studies": INJECTED_STUDIES},
               "sources": {name: summary(rows) for name, rows in sources.items()}}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    lines = ["# Lesion contrast: real against synthetic", "",
             "Command: `.venv/bin/python benchmarks/lesion_contrast.py`. Median [quartiles] per lesion; "
             f"ring = brain voxels within {RING_VOXELS} voxels of the lesion, in no lesion.", "",
             "| source | voxels | n | DWI / brain median | ADC / brain median | DWI / ring | ADC / ring | thickness mm | core share "
             "| to CSF mm | its brain's to CSF mm | depth mm |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, table in results["sources"].items():
        for entry in table:
            cells = [f"{q[1]:.2f} [{q[0]:.2f}–{q[2]:.2f}]" if q else "–" for q in (entry[m] for m in MEASURES)]
            lines.append(f"| {name} | {entry['voxels']} | {entry['n']} | " + " | ".join(cells) + " |")
    args.output.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
