"""A training run's per-step loss, kept and summarised: epoch means, and beside a paired run's.

Lightning's ``CSVLogger`` writes ``<work>/logs/version_N/metrics.csv`` (one row per logged step;
other metrics on rows of their own). This keeps its ``epoch, step, train_loss`` rows in a small
CSV of the repository (``--output``; work folders are removed after a run) and prints each
epoch's mean. With ``--paired REF`` (a kept curve or another metrics.csv) it prints REF's epoch
means beside them and the mean difference over the steps both logged: two runs on the same
batches (the same studies and seed, as issue 13's rule 126 and its control) differ step by
step only by their networks, so that difference is what the change did to the fit.

    .venv/bin/python benchmarks/loss_curve.py runs/X/pretrain/work/logs/version_0/metrics.csv \\
        --output benchmarks/results/cv_training/X/pretrain_loss.csv \\
        --paired benchmarks/results/cv_training/dprime-more-stage1/pretrain_loss.csv
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

Curve = list[tuple[int, int, float]]
"""(epoch, step, train_loss) rows in logged order."""


def read_curve(path: Path) -> Curve:
    """The rows of ``path`` that carry a ``train_loss`` (metrics.csv or a kept curve)."""
    with path.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("train_loss")]
    if not rows:
        raise SystemExit(f"loss_curve.py: {path}: no train_loss rows")
    return [(int(row["epoch"]), int(row["step"]), float(row["train_loss"])) for row in rows]


def epoch_means(curve: Curve) -> dict[int, tuple[int, float]]:
    """epoch -> (logged steps, mean loss)."""
    epochs = sorted({epoch for epoch, _, _ in curve})
    return {
        epoch: (len(losses), statistics.fmean(losses))
        for epoch in epochs
        for losses in [[loss for e, _, loss in curve if e == epoch]]
    }


def paired_difference(curve: Curve, reference: Curve) -> tuple[int, float, float]:
    """(steps both logged, mean of curve - reference over them, its standard error)."""
    by_step = {step: loss for _, step, loss in reference}
    differences = [loss - by_step[step] for _, step, loss in curve if step in by_step]
    if len(differences) < 2:
        raise SystemExit("loss_curve.py: fewer than two steps logged by both runs")
    return len(differences), statistics.fmean(differences), statistics.stdev(differences) / len(differences) ** 0.5


def write_curve(curve: Curve, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["epoch", "step", "train_loss"])
        writer.writerows(curve)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("metrics", type=Path, help="metrics.csv of a run, or a kept curve")
    parser.add_argument("--output", type=Path, help="keep the curve here (epoch, step, train_loss)")
    parser.add_argument("--paired", type=Path, help="a run on the same batches, to compare step by step")
    args = parser.parse_args()
    curve = read_curve(args.metrics)
    if args.output is not None:
        if args.output.resolve() == args.metrics.resolve():
            raise SystemExit(f"loss_curve.py: --output {args.output} is the input; not overwriting it")
        write_curve(curve, args.output)
        print(f"wrote {args.output} ({len(curve)} steps)")
    means = epoch_means(curve)
    reference = read_curve(args.paired) if args.paired is not None else None
    reference_means = epoch_means(reference) if reference is not None else {}
    for epoch, (steps, mean) in means.items():
        line = f"epoch {epoch}: {steps} steps, mean loss {mean:.4f}"
        if epoch in reference_means:
            line += f"; paired run {reference_means[epoch][0]} steps, {reference_means[epoch][1]:.4f}"
        print(line)
    if reference is not None:
        steps, difference, error = paired_difference(curve, reference)
        print(f"paired over {steps} steps: mean difference {difference:+.4f} (standard error {error:.4f})")


if __name__ == "__main__":
    main()
