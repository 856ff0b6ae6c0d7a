"""Choose a model package's low-confidence threshold on synthetic validation studies.

    nice -n 10 .venv/bin/python scripts/choose_confidence_threshold.py [--model DIR] [--studies 20]

The report flags a predicted lesion ``low_confidence`` when its mean probability (the model's
output averaged over the lesion's voxels; not a calibrated risk) is below the package
manifest's ``low_confidence_mean_probability``. This script chooses that number:

1. Validation data: ``--studies`` synthetic studies from ``LambdaSegmentLib.synthesis.generate``
   with seeds ``--first-seed``, ``--first-seed`` + 1, … (default 9,000,000: disjoint from the
   bundled model's training seeds 20,261,123–20,261,642 and from the 30,000,000 evaluation
   studies), drawn with the synthesis ranges the package was trained with (manifest
   ``training_data.synthetic.ranges``; the generator's defaults otherwise). The real ISLES'22
   cases are never used: they are held out for cross-validation.
2. Each study is segmented with the package (default inference, no flips); every connected
   lesion of the predicted mask (``lesions.lesion_table``) is a true positive when it overlaps
   the true infarct, a false positive otherwise.
3. Rule: the threshold t is the mean probability that flags the most false positives in
   excess of true positives: it maximises (false-positive lesions below t) − (true-positive
   lesions below t) over the validation lesions (candidates: midway between consecutive
   observed values; ties go to the lowest t, flagging less). Below t, false positives
   outnumber true ones, and no band of lesions just below t holds more true than false
   positives (else a lower t would score higher). When no t flags more false than true
   positives, the threshold is the package's voxel threshold: no lesion's mean can fall
   below it, so nothing is flagged. (A cumulative-majority rule, "the largest t below which
   most lesions are false positives", is degenerate when false positives are the majority
   overall, as they are for the bundled model on synthetic validation: it flags everything.)

Writes the value, the rule and the counts into the package's ``manifest.json`` (the weights
and their SHA-256 are untouched; ``--dry-run`` leaves the manifest alone) and the per-lesion
data and summary into ``--results`` (default ``benchmarks/results/confidence_threshold.json``).
Works for any package directory (re-run it after retraining).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.inference import BUNDLED_PACKAGE, load_model_package, segment_study  # noqa: E402
from LambdaSegmentLib.inference.package import MANIFEST_FILE  # noqa: E402
from LambdaSegmentLib.io import load_study  # noqa: E402
from LambdaSegmentLib.lesions import lesion_labels, lesion_table  # noqa: E402

FIRST_SEED = 9_000_000
RESULTS = REPO / "benchmarks" / "results" / "confidence_threshold.json"
RULE = (
    "mean lesion probability t maximising (false-positive lesions below t) - (true-positive lesions below t) on "
    "validation lesions (false positive: no overlap with the true infarct); ties to the lowest t; the voxel "
    "threshold (nothing flagged) when no t flags more false than true positives"
)


def synthesis_ranges(manifest: dict[str, Any]) -> dict[str, Any]:
    """The synthesis ranges the package was trained with (JSON lists become (lo, hi) tuples)."""
    synthetic = (manifest.get("training_data") or {}).get("synthetic") if isinstance(manifest.get("training_data"), dict) else None
    ranges = dict((synthetic or {}).get("ranges") or {})
    return {key: tuple(value) if isinstance(value, list) else value for key, value in ranges.items()}


def validation_lesions(package: Any, seeds: range, ranges: dict[str, Any], device: str) -> list[dict[str, Any]]:
    """One record per predicted lesion: seed, label, volume_ml, mean_probability, true_positive."""
    from LambdaSegmentLib.synthesis import generate

    records = []
    for seed in seeds:
        start = time.perf_counter()
        synthetic = generate(seed, **ranges)
        study = load_study(dwi=synthetic.dwi, adc=synthetic.adc, adc_unit=synthetic.adc_unit, b_value=synthetic.b_value)
        segmentation = segment_study(study, package, device=device)
        truth = np.asarray(synthetic.mask.array) > 0
        table = lesion_table(segmentation.mask, probability=segmentation.probability)
        labels = lesion_labels(segmentation.mask)
        for row in table:
            overlaps = bool(np.any(truth[labels == row.label]))
            records.append({"seed": seed, "label": row.label, "volume_ml": round(row.volume_ml, 4),
                            "mean_probability": round(float(row.mean_probability), 5), "true_positive": overlaps})
        found = sum(1 for r in records if r["seed"] == seed and r["true_positive"])
        print(f"seed {seed}: {len(table)} predicted lesion(s), {found} overlapping the truth, "
              f"{time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return records


def choose_threshold(records: list[dict[str, Any]], voxel_threshold: float) -> float:
    """The rule above, on the records' ``mean_probability`` and ``true_positive``."""
    values = np.array([r["mean_probability"] for r in records], dtype=np.float64)
    false_positive = np.array([not r["true_positive"] for r in records], dtype=bool)
    if not values.size:
        return float(voxel_threshold)
    distinct = np.unique(values)
    candidates = np.append((distinct[:-1] + distinct[1:]) / 2, min(1.0, distinct[-1] + 1e-3))
    below = values[None, :] < candidates[:, None]  # (candidates, lesions)
    score = (below & false_positive).sum(axis=1) - (below & ~false_positive).sum(axis=1)
    best = int(np.argmax(score))  # the first maximum: the lowest t
    return round(float(candidates[best]), 4) if score[best] > 0 else float(voxel_threshold)


def summary(records: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    flagged = [r for r in records if r["mean_probability"] < threshold]
    true, false = [r for r in records if r["true_positive"]], [r for r in records if not r["true_positive"]]
    return {
        "lesions": len(records), "true_positive": len(true), "false_positive": len(false),
        "flagged": len(flagged),
        "flagged_false_positive": sum(1 for r in flagged if not r["true_positive"]),
        "flagged_true_positive": sum(1 for r in flagged if r["true_positive"]),
        "false_positive_ml": round(sum(r["volume_ml"] for r in false), 3),
        "flagged_false_positive_ml": round(sum(r["volume_ml"] for r in flagged if not r["true_positive"]), 3),
        "flagged_true_positive_ml": round(sum(r["volume_ml"] for r in flagged if r["true_positive"]), 3),
        "median_mean_probability_true_positive": float(np.median([r["mean_probability"] for r in true])) if true else None,
        "median_mean_probability_false_positive": float(np.median([r["mean_probability"] for r in false])) if false else None,
    }


def record_threshold(directory: Path, threshold: float, rule: dict[str, Any]) -> None:
    """Write ``low_confidence_mean_probability`` and ``low_confidence_rule`` into the package's
    manifest (atomically), then check that the package still loads and verifies."""
    manifest_path = Path(directory) / MANIFEST_FILE
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["low_confidence_mean_probability"] = threshold
    manifest["low_confidence_rule"] = rule
    write_json_atomically(manifest, manifest_path)
    load_model_package(directory)  # the same weights, the same SHA-256: still valid


def write_json_atomically(data: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(json.dumps(data, indent=2) + "\n")
    os.replace(temporary, path)


def _shown(path: Path) -> str:
    """A path relative to the repository when inside it (results stay readable on any machine)."""
    resolved = path.resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else str(resolved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=BUNDLED_PACKAGE, help="model package directory (default: the bundled one)")
    parser.add_argument("--studies", type=int, default=20, help="synthetic validation studies (default 20)")
    parser.add_argument("--first-seed", type=int, default=FIRST_SEED, help=f"first seed (default {FIRST_SEED:,})")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results JSON")
    parser.add_argument("--dry-run", action="store_true", help="leave the manifest unchanged")
    args = parser.parse_args()

    package = load_model_package(args.model)
    training = package.manifest.get("training_data")
    seeds = range(args.first_seed, args.first_seed + args.studies)
    trained = (training.get("synthetic") or {}).get("seeds") if isinstance(training, dict) else None
    if trained and len(trained) == 2 and not (seeds.stop <= trained[0] or seeds.start > trained[1]):
        raise SystemExit(f"seeds {seeds.start}-{seeds.stop - 1} overlap the package's training seeds {trained}; choose --first-seed")
    ranges = synthesis_ranges(package.manifest)
    start = time.perf_counter()
    records = validation_lesions(package, seeds, ranges, args.device)
    threshold = choose_threshold(records, package.threshold)
    counts = summary(records, threshold)
    command = " ".join(["nice -n 10"] * bool(os.nice(0)) + [".venv/bin/python", *sys.argv])
    rule = {
        "rule": RULE,
        "validation": f"{args.studies} synthetic studies, seeds {seeds.start}-{seeds.stop - 1}, synthesis ranges {ranges or 'defaults'}",
        "counts": counts,
        "command": command,
        "chosen": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_json_atomically({"model": {"name": package.name, "version": package.version, "weights_sha256": package.sha256,
                                     "directory": _shown(Path(args.model))},
                           "low_confidence_mean_probability": threshold, **rule,
                           "seconds": round(time.perf_counter() - start, 1), "lesions": records}, args.results)
    if not args.dry_run:
        record_threshold(args.model, threshold, {key: rule[key] for key in ("rule", "validation", "command", "chosen")}
                         | {"results": _shown(args.results)})
    print(f"low_confidence_mean_probability = {threshold} ({counts['flagged']} of {counts['lesions']} validation lesions "
          f"below it: {counts['flagged_false_positive']} false, {counts['flagged_true_positive']} true positives); "
          f"results: {args.results}" + ("" if args.dry_run else f"; written into {Path(args.model) / MANIFEST_FILE}"))


if __name__ == "__main__":
    main()
