"""Diagnostic: how far apart are two packages' BatchNorm running statistics? (issue 13,
``--precise-batchnorm``: the same learned weights with the moving-average statistics training
left, and with statistics re-estimated on 96 fresh batches.)

Per BatchNorm, over its channels: the mean of |μ_a − μ_b| / σ_b and of |log(σ²_a / σ²_b)|;
the packages' learned tensors (everything but running statistics) must be identical, or the
comparison says nothing about statistics alone and the script stops.

    .venv/bin/python benchmarks/batchnorm_shift.py runs/cv-rms-r1/foldA/pkg runs/cv-rms-pbn-r1/foldA/pkg \\
        --output benchmarks/results/batchnorm_shift_cv-rms-r1_foldA.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from LambdaSegmentLib.inference import load_model_package

STATISTICS = ("running_mean", "running_var", "num_batches_tracked")


def require_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], tool: str) -> None:
    """Stop unless state dicts ``a`` and ``b`` differ in BatchNorm statistics alone."""
    learned = [key for key in a if not key.endswith(STATISTICS)]
    if set(a) != set(b) or not all(torch.equal(a[key], b[key]) for key in learned):
        raise SystemExit(f"{tool}: the packages' learned tensors differ; compare statistics of the same weights")


def shift(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, dict[str, float]]:
    """{BatchNorm name: {"mean_shift_sd", "abs_log_var_ratio"}} of state dicts ``a`` against ``b``."""
    require_same_weights(a, b, "batchnorm_shift")
    rows = {}
    for key in a:
        if key.endswith("running_var"):
            name = key[: -len(".running_var")]
            sd = b[key].sqrt()
            rows[name] = {
                "mean_shift_sd": float(((a[f"{name}.running_mean"] - b[f"{name}.running_mean"]).abs() / sd).mean()),
                "abs_log_var_ratio": float((a[key] / b[key]).log().abs().mean()),
            }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path, help="the reference (its σ scales the mean shift)")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    rows = shift(load_model_package(args.first).model.state_dict(), load_model_package(args.second).model.state_dict())
    for name, row in rows.items():
        print(f"{name:32s} mean shift {row['mean_shift_sd']:.3f} sd   |log variance ratio| {row['abs_log_var_ratio']:.3f}")
    summary = {key: float(np.mean([row[key] for row in rows.values()])) for key in ("mean_shift_sd", "abs_log_var_ratio")}
    print(f"mean over {len(rows)} BatchNorms: mean shift {summary['mean_shift_sd']:.3f} sd, "
          f"|log variance ratio| {summary['abs_log_var_ratio']:.3f}")
    if args.output:
        args.output.write_text(json.dumps({"first": str(args.first), "second": str(args.second), "summary": summary,
                                           "batch_norms": rows}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
