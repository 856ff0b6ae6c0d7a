"""Which expert lesions a fold finds, by size, and the lesion-wise F1 each size class allows.

    .venv/bin/python benchmarks/lesion_census.py --settings-from benchmarks/results/real_scan_cv/ROW.json \
        --fold-packages A=runs/x/foldA-wise-0.7/pkg B=runs/x/foldB-wise-0.7/pkg --label NAME

Issue 13 asks a lesion-wise F1 of 0.5 on each held-out case, natively and as 6 mm slabs. The
ISLES'22 F1 counts every 26-connected component of the reference alike, however small. This
script counts, per held-out case and setting, the reference's components by size in voxels, how
many of each size the bare network reaches (its highest probability on the component at least
0.5, or 0.1; plain pass, before any post-processing), how many the fold's post-processed mask
touches, and the F1 a mask would reach that found
every component of at least n voxels and nothing else (``f1_ceiling``): what the target asks of
each size class.

The post-processing of each fold is the one a committed ``real_scan_cv.py`` result chose
(``--settings-from``); ``--fold-packages`` names the networks, since fold packages are not kept in
the repository: retrained by the row's recipe they are checked against the row's own scores
(volume Dice within ``REPRODUCED_DICE``), and the script refuses packages that do not reproduce
them or that trained on the case they are scored on. Only numbers are written, never images:
``benchmarks/results/lesion_census_<label>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from real_scan_cv import ISLES, fold_package, load_real, prepare, real_cases_used  # noqa: E402

from LambdaSegmentLib.inference.postprocess import PostProcessing  # noqa: E402
from LambdaSegmentLib.metrics import label_lesions  # noqa: E402
from LambdaSegmentLib.metrics.isles import lesion_detection, volume_dice  # noqa: E402

SIZE_EDGES = (1, 2, 3, 6, 26, 81)  # voxels: bins 1, 2, 3-5, 6-25, 26-80, 81 and more
REPRODUCED_DICE = 0.005  # how close a retrained fold's volume Dice must come to the row's own
NETWORK_THRESHOLDS = (0.5, 0.1)  # the bare network's highest probability on a lesion, counted at these


def size_bin_names() -> list[str]:
    """``["1", "2", "3-5", "6-25", "26-80", ">=81"]`` for :data:`SIZE_EDGES`."""
    names = []
    for low, high in zip(SIZE_EDGES, SIZE_EDGES[1:] + (None,)):
        names.append(f">={low}" if high is None else (str(low) if high == low + 1 else f"{low}-{high - 1}"))
    return names


def census(mask: np.ndarray, truth: np.ndarray, probability: np.ndarray) -> dict[str, Any]:
    """The reference's components (bool (nk, nj, ni) ``truth``) by size, those ``mask`` touches,
    those the bare network reaches (highest ``probability`` at least each of
    :data:`NETWORK_THRESHOLDS`, before any post-processing), the mask's components that touch
    none, and the F1 ceiling per smallest size found."""
    labels, count = label_lesions(truth)
    sizes = np.bincount(labels.ravel(), minlength=count + 1)[1:]
    touched = np.unique(labels[mask & truth])
    touched = touched[touched > 0]
    edges = list(SIZE_EDGES) + [np.iinfo(np.int64).max]
    highest = np.asarray(ndimage.maximum(probability, labels, np.arange(1, count + 1)), dtype=np.float64).reshape(-1)
    by_size = lambda chosen: dict(zip(size_bin_names(), np.histogram(sizes[chosen], edges)[0].tolist()))  # noqa: E731
    detection = lesion_detection(mask, truth)
    return {
        "reference": by_size(np.ones(count, dtype=bool)),
        **{f"network_at_{t:g}": by_size(highest >= t) for t in NETWORK_THRESHOLDS},
        "found": by_size(np.isin(np.arange(1, count + 1), touched)),
        "false_positive_components": detection.false_positives,
        "lesion_f1": round(detection.f1, 4),
        "f1_ceiling": {f">={n}": round(f1_ceiling(sizes, n), 4) for n in SIZE_EDGES},
    }


def f1_ceiling(sizes: np.ndarray, smallest: int) -> float:
    """The lesion-wise F1 of a mask that touches every reference component of at least
    ``smallest`` voxels (``sizes``: each component's voxels) and has no other component."""
    found = int((np.asarray(sizes) >= smallest).sum())
    missed = len(sizes) - found
    return 1.0 if found + missed == 0 else found / (found + missed / 2)


@dataclass(frozen=True)
class ReproducedFold:
    """One held-out score of a committed row, rebuilt: the fold's network on its held-out case
    (``setting`` "native" or "6mm") and the mask the row's post-processing cuts from it."""

    fold: str
    case: str
    directory: str
    package: Any  # ModelPackage
    postprocessing: dict[str, Any]
    setting: str
    prepared: Any  # real_scan_cv.Prepared
    mask: np.ndarray  # bool (nk, nj, ni)


def reproduced_folds(settings_from: Path, fold_specs: list[str], tool: str) -> Iterator[ReproducedFold]:
    """Each fold of ``fold_specs`` (``FOLD=DIR``) scored natively and as 6 mm slabs with the
    post-processing the committed result ``settings_from`` chose; exits with ``tool``'s message
    when the cases are absent, the result is unreadable, a package trained on its held-out case,
    or its Dice is not the row's within :data:`REPRODUCED_DICE` (fold packages are not kept, so a
    retrained one must show it is the row's)."""
    if not ISLES.is_dir():
        raise SystemExit(f"{tool}: {ISLES} is absent; it needs the two ISLES'22 cases")
    try:
        row = json.loads(settings_from.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(f"{tool}: {settings_from}: not a readable result file ({error})") from None
    for spec in fold_specs:
        fold, _, directory = spec.partition("=")
        if fold not in row.get("folds", {}):
            raise SystemExit(f"{tool}: {spec}: {settings_from} has no fold {fold!r}")
        entry = row["folds"][fold]
        case = entry["held_out_case"]
        package = fold_package(directory)
        if case in real_cases_used(package):
            raise SystemExit(f"{tool}: {directory} was trained on {case}; it is not held out there")
        settings = PostProcessing(**entry["postprocessing"])
        for setting, thick in (("native", False), ("6mm", True)):
            study, truth = load_real(case, thick)
            prepared = prepare(case, study, truth, package, regions=False)
            mask = np.asarray(prepared.mask(settings)) != 0
            reproduced = volume_dice(mask, prepared.truth)
            expected = entry["scores"][setting]["model"]["volume_dice"]
            if abs(reproduced - expected) > REPRODUCED_DICE:
                raise SystemExit(f"{tool}: {directory} scores Dice {reproduced:.4f} on {case} {setting}, the row "
                                 f"{expected:.4f}: it does not reproduce {settings_from}")
            yield ReproducedFold(fold, case, directory, package, entry["postprocessing"], setting, prepared, mask)


def row_arguments(description: str) -> argparse.Namespace:
    """The command line of a script that rebuilds a committed row's folds (:func:`reproduced_folds`):
    ``--settings-from RESULT.json --fold-packages A=DIR B=DIR --label NAME``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--settings-from", type=Path, required=True, metavar="RESULT.json")
    parser.add_argument("--fold-packages", nargs=2, required=True, metavar="FOLD=DIR")
    parser.add_argument("--label", required=True)
    return parser.parse_args()


def write_row_result(tool: str, args: argparse.Namespace, payload: dict[str, Any]) -> Path:
    """``benchmarks/results/<tool>_<label>.json``: the command that made it (:func:`row_arguments`'),
    the source revision, then ``payload``."""
    from LambdaSegmentLib.training.export import source_revision

    out = REPO / "benchmarks" / "results" / f"{tool}_{args.label}.json"
    command = (f"benchmarks/{tool}.py --settings-from {args.settings_from} --fold-packages "
               + " ".join(args.fold_packages) + f" --label {args.label}")
    out.write_text(json.dumps({"command": command, "revision": source_revision(), **payload}, indent=1) + "\n",
                   encoding="utf-8")
    print(f"written {out}")
    return out


def main() -> None:
    args = row_arguments(__doc__.splitlines()[0])
    results: dict[str, Any] = {}
    for scored in reproduced_folds(args.settings_from, args.fold_packages, "lesion_census"):
        fold, case, setting, prepared, mask = scored.fold, scored.case, scored.setting, scored.prepared, scored.mask
        results.setdefault(fold, {"held_out_case": case, "package_dir": scored.directory,
                                  "weights_sha256": scored.package.sha256, "postprocessing": scored.postprocessing})
        results[fold][setting] = {"volume_dice": round(volume_dice(mask, prepared.truth), 4),
                                  **census(mask, prepared.truth, prepared.probability)}
        print(f"fold {fold} {case} {setting}: {json.dumps(results[fold][setting])}", flush=True)
    write_row_result("lesion_census", args, {"size_bins_voxels": size_bin_names(), "folds": results})


if __name__ == "__main__":
    main()
