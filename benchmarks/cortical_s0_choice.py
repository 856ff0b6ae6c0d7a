"""Issue 13's rule 52: which cortical S0 range the generator's realism statistics choose, before any training.

The objective was fixed in the rule: the sum of the relative errors, against the mean of the two
real ISLES'22 cases' lesion-free values, of four statistics of the synthetic studies:

- supratentorial lesion-sized bright dots per 100 mL (median over the studies) and their
  ADC / ring (median over the dots): ``bright_dots.py``'s default-range skull-stripped group;
- the cortical ribbon's DWI over deep tissue's, and the DWI 90th percentile deeper than 4 mm:
  ``synthesis_edge_realism.py``'s synthetic means.

Reads the result files those two scripts wrote (the default range's: ``bright_dots.json`` and
``synthesis_edge_realism_temporal.json``) and prints one line per range, the lowest objective first.

    .venv/bin/python benchmarks/cortical_s0_choice.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
# range -> (bright_dots result, synthesis_edge_realism result)
CANDIDATES = {
    "1.2-1.8 (default)": ("bright_dots.json", "synthesis_edge_realism_temporal.json"),
    "1.0-1.1": ("bright_dots_cortical_s0.json", "synthesis_edge_realism_cortical-s0-1011.json"),
    "1.0-1.3": ("bright_dots_cortical_s0_1013.json", "synthesis_edge_realism_cortical-s0-1013.json"),
    "1.1-1.4": ("bright_dots_cortical_s0_1114.json", "synthesis_edge_realism_cortical-s0-1114.json"),
}
SYNTHETIC_GROUP = "synthetic default ranges, skull-stripped 2 mm"
# bright_dots.py's group of each real case -> synthesis_edge_realism.py's key for it
REAL_CASES = {"real 0001": "sub-strokecase0001", "real 0003": "sub-strokecase0003"}


def dot_statistics(group: dict) -> tuple[float, float]:
    """(supratentorial other dots per 100 mL, median over studies; their ADC / ring, median over dots)."""
    return float(np.median(group["supratentorial_other_per_100ml"])), group["other_supratentorial"]["adc_ring"][1]


def cortex_statistics(cortex: dict) -> tuple[float, float]:
    return cortex["ribbon_to_deep_dwi"], cortex["dwi_p90_depth_gt_4mm"]


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def main() -> None:
    dots_file, edge_file = CANDIDATES["1.2-1.8 (default)"]
    dots, edges = load(dots_file)["groups"], load(edge_file)["real"]
    real = np.mean([dot_statistics(dots[group]) + cortex_statistics(edges[case]["cortex"])
                    for group, case in REAL_CASES.items()], axis=0)
    print("statistics: dots / 100 mL, dots' ADC / ring, ribbon / deep DWI, DWI p90 > 4 mm")
    print(f"real (mean of the two cases): {np.round(real, 3).tolist()}")
    scored = []
    for candidate, (dots_file, edge_file) in CANDIDATES.items():
        synthetic = np.array(dot_statistics(load(dots_file)["groups"][SYNTHETIC_GROUP])
                             + cortex_statistics(load(edge_file)["synthetic_mean"]["cortex"]))
        scored.append((float(np.sum(np.abs(synthetic - real) / real)), candidate, synthetic))
    for objective, candidate, synthetic in sorted(scored):
        print(f"cortical_s0 {candidate}: objective {objective:.2f}, statistics {np.round(synthetic, 3).tolist()}")


if __name__ == "__main__":
    main()
