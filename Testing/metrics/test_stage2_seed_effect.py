"""``benchmarks/stage2_seed_effect.py``: which stage-2 seed scores lowest, on result files written by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/stage2_seed_effect.py")


def write(directory: Path, label: str, a: float, b: float) -> None:
    scores = lambda d: {"native": {"model": {"volume_dice": d}}, "6mm": {"model": {"volume_dice": d}}}  # noqa: E731
    (directory / f"{label}.json").write_text(json.dumps({"folds": {"A": {"scores": scores(a)}, "B": {"scores": scores(b)}}}))


def test_rows_are_labels_around_the_seed_and_only_complete_rows_count(script, tmp_path: Path) -> None:
    for seed, (a, b) in {"5": (0.8, 0.3), "6": (0.7, 0.3), "7": (0.6, 0.2)}.items():
        write(tmp_path, f"cv-x-seed5100000{seed}-unseeded-nlb", a, b)
    for seed, (a, b) in {"5": (0.5, 0.1), "6": (0.9, 0.3), "7": (0.9, 0.3)}.items():
        write(tmp_path, f"cv-y-seed5100000{seed}-seeded", a, b)
    write(tmp_path, "cv-z-seed51000005-seeded", 0.1, 0.1)  # one seed only: no complete row
    out = script.seed_effect(tmp_path)
    assert out["rows"] == 2
    assert out["lowest"] == {"51000005": 1, "51000006": 0, "51000007": 1}
    assert out["mean_dice"]["51000007"] == pytest.approx((0.4 + 0.6) / 2)
    assert out["native_by_fold"]["A 51000005"] == pytest.approx((0.8 + 0.5 + 0.1) / 3)  # every file of the seed
