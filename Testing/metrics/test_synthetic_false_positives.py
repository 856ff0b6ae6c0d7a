"""``benchmarks/synthetic_false_positives.py`` and ``benchmarks/synthesis_skull_on_edge.py``: what a
package marks outside the lesion and how bright a brain's edge is, on studies built by hand."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import ndimage

from LambdaSegmentLib.io import Volume


@pytest.mark.parametrize("superior_is_plus_k", [True, False])
def test_false_positives_are_the_marks_away_from_the_lesion(load_script, superior_is_plus_k: bool) -> None:
    signal = load_script("benchmarks/synthetic_false_positives.py").false_positive_signal
    shape = (10, 20, 20)  # (k, j, i), 2 mm voxels
    brain = np.zeros(shape, dtype=bool)
    brain[:, 2:18, 2:18] = True
    dwi, adc = np.ones(shape), np.full(shape, 0.8)
    truth = np.zeros(shape, dtype=bool)
    truth[5, 9:11, 9:11] = True  # 4 voxels, DWI 2x, ADC 0.5x
    dwi[truth], adc[truth] = 2.0, 0.4
    mask = truth.copy()
    mask[5, 11, 9:11] = True  # beside the lesion: within 2 voxels, not a false positive
    lowest = 0 if superior_is_plus_k else 9  # the lowest slice, whichever way k runs
    mask[lowest, 2, 2:8] = True  # 6 voxels on the brain's edge in the lowest slice
    dwi[lowest, 2, 2:8], adc[lowest, 2, 2:8] = 3.0, 0.6
    mask[9 - lowest, 8, 8] = True  # 1 voxel in the top slice, away from the sides
    dwi[9 - lowest, 8, 8], adc[9 - lowest, 8, 8] = 3.0, 0.6
    mask[:, 0, 0] = True  # outside the brain: not counted
    direction = np.diag([1.0, 1.0, 1.0 if superior_is_plus_k else -1.0])  # LPS: +z is superior
    volume = lambda array: Volume(array.astype(np.float32), (2.0, 2.0, 2.0), direction=direction)  # noqa: E731
    study = SimpleNamespace(dwi=volume(dwi), adc=volume(adc))
    result = signal(study, truth, mask, brain)
    voxel_ml = 8.0 / 1000
    assert result["truth_ml"] == pytest.approx(4 * voxel_ml, abs=1e-3)
    assert result["volume_dice"] == pytest.approx(2 * 4 / (4 + 23), abs=1e-4)  # all 23 marked voxels, as evaluate scores
    assert result["fp_ml"] == pytest.approx(7 * voxel_ml, abs=1e-3)
    assert result["fp_components"] == 2
    assert result["fp_inferior_fraction"] == pytest.approx(6 / 7, abs=1e-3)
    assert result["fp_depth_mm"] == pytest.approx(2.0)  # the edge voxels: one voxel inside
    assert result["fp_dwi"] == pytest.approx(3.0)
    assert result["fp_adc"] == pytest.approx(0.75)  # 0.6 over the brain's median ADC of 0.8
    assert result["lesion_dwi"] == pytest.approx(2.0) and result["lesion_adc"] == pytest.approx(0.5)


def test_no_false_positive_leaves_their_signal_empty(load_script) -> None:
    signal = load_script("benchmarks/synthetic_false_positives.py").false_positive_signal
    shape = (4, 8, 8)
    brain = np.ones(shape, dtype=bool)
    volume = Volume(np.ones(shape, dtype=np.float32), (1.0, 1.0, 3.0))
    result = signal(SimpleNamespace(dwi=volume, adc=volume), np.zeros(shape, bool), np.zeros(shape, bool), brain)
    assert result["fp_ml"] == 0.0 and result["fp_components"] == 0
    assert result["fp_inferior_fraction"] is None and result["fp_adc"] is None and result["lesion_adc"] is None


def test_edge_bands_split_at_the_brain_masks_edge(load_script, monkeypatch) -> None:
    module = load_script("benchmarks/synthesis_skull_on_edge.py")
    shape = (6, 40, 40)  # 2 mm in plane, 2 mm slices
    brain = np.zeros(shape, dtype=bool)
    brain[:, 10:30, 10:30] = True
    dwi = np.where(brain, 1.0, 0.2)
    dwi[:, 10, 10:30] = 3.0  # a bright edge row inside the mask
    monkeypatch.setattr(module, "brain_mask", lambda volume: brain)  # the product's mask is tested on its own
    bands = module.edge_bands(Volume(dwi.astype(np.float32), (2.0, 2.0, 2.0)))
    assert bands["inner"]["bright_fraction"] > 0 and bands["inner"]["p99"] == pytest.approx(3.0)
    assert bands["outer"]["bright_fraction"] == 0.0 and bands["outer"]["p50"] == pytest.approx(0.2)


def test_skull_base_profile_rises_slower_under_a_dark_layer(load_script, monkeypatch) -> None:
    """The profile's layers are in-plane depths at the skull base (the inferior 35 % of the slices,
    by their superior coordinate); a grey-then-dark layer under the mask's edge (a shell over CSF)
    lowers ``rise``; the upper slices do not count."""
    module = load_script("benchmarks/synthesis_skull_on_edge.py")
    shape = (10, 40, 40)  # slice k = 0 is the most inferior (LPS z grows with k)
    brain = np.zeros(shape, dtype=bool)
    brain[:, 5:35, 5:35] = True
    plain = np.where(brain, 1.0, 0.0)
    plain[:, 5, 5:35] = plain[:, 34, 5:35] = plain[:, 5:35, 5] = plain[:, 5:35, 34] = 0.5  # partial-volume edge
    shelled = plain.copy()
    depth = np.stack([ndimage.distance_transform_edt(section) for section in brain])
    ring = depth == 4  # the fourth voxel in (3-4.5 mm at 1 mm), under the grey edge voxels
    shelled[:3][ring[:3]] = 0.2  # dark CSF under the shell, on the inferior slices only
    monkeypatch.setattr(module, "brain_mask", lambda volume: brain)
    spacing = (1.0, 1.0, 4.0)
    rise_plain = module.skull_base_profile(Volume(plain.astype(np.float32), spacing))["rise"]
    profile = module.skull_base_profile(Volume(shelled.astype(np.float32), spacing))
    assert rise_plain == pytest.approx(1.0)
    assert profile["rise"] == pytest.approx(0.2) and profile["median"][0] == pytest.approx(0.5)
    assert profile["median"][1] == pytest.approx(1.0)  # depths 2-3 untouched
    upper = plain.copy()
    upper[5:][ring[5:]] = 0.2  # the same layer on upper slices only: not the skull base
    assert module.skull_base_profile(Volume(upper.astype(np.float32), spacing))["rise"] == pytest.approx(1.0)


def test_skull_on_gate_pools_skull_on_rows_and_judges_against_the_default(load_script, tmp_path) -> None:
    gate = load_script("benchmarks/skull_on_gate.py")
    assert gate.package_name("runs/x/pretrain/pkg") == "x"
    assert gate.package_name("runs/x/shipped/pkg") == "x/shipped"
    assert gate.package_name("LambdaSegmentLib/resources/models/lambdaunet-dwi/") == "lambdaunet-dwi"

    def row(package: str, dice: float, truth_ml: float, fp_ml: float, skull_on: bool = True) -> dict:
        return {"package": package, "volume_dice": dice, "truth_ml": truth_ml, "fp_ml": fp_ml, "skull_on": skull_on}

    first = tmp_path / "a.json"
    first.write_text(json.dumps({"rows": [
        row("models/default", 0.6, 5.0, 0.2), row("runs/c/pretrain/pkg", 0.5, 5.0, 0.4),
        row("models/default", 0.0, 5.0, 9.0, skull_on=False),  # skull-stripped: not counted
    ]}))
    second = tmp_path / "b.json"
    second.write_text(json.dumps({"rows": [
        row("models/default", 1.0, 0.0, 0.0), row("runs/c/pretrain/pkg", 0.0, 0.0, 2.0),  # no infarct: Dice not pooled
        row("runs/only-here/pretrain/pkg", 0.9, 3.0, 0.0),  # not in every file: left out
    ]}))
    table = gate.pooled([first, second])
    assert set(table) == {"default", "c"}
    assert table["default"] == {"studies": 2, "with_infarct": 1, "dice_with_infarct": 0.6, "fp_ml_per_study": 0.1}
    assert table["c"]["dice_with_infarct"] == 0.5 and table["c"]["fp_ml_per_study"] == pytest.approx(1.2)


def test_skull_on_gate_margins_are_rule_71s_by_default_and_rule_75s_on_request(load_script) -> None:
    gate = load_script("benchmarks/skull_on_gate.py")
    base = {"dice_with_infarct": 0.50, "fp_ml_per_study": 0.60}
    lower_dice = {"dice_with_infarct": 0.40, "fp_ml_per_study": 1.5}
    assert not gate.passes(lower_dice, base)  # rule 71: 0.10 below the default's Dice, 0.9 mL above
    assert not gate.passes(lower_dice, base, dice_margin=0.03, fp_margin_ml=2.0)
    assert gate.passes(lower_dice, base, dice_margin=float("inf"), fp_margin_ml=2.0)  # rule 75 (i): Dice not judged
    assert not gate.passes({"dice_with_infarct": 0.9, "fp_ml_per_study": 2.61}, base, dice_margin=float("inf"), fp_margin_ml=2.0)
    assert gate.passes({"dice_with_infarct": 0.48, "fp_ml_per_study": 1.1}, base)


def test_release_gate_floor_is_050_or_the_defaults_mean_on_a_fresh_set(tmp_path) -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "synthetic_release_gate.py"
    data = tmp_path / "data"
    rows = ["case,method,volume_dice"]
    for case, skull_stripped, default, candidate in (("s1", False, 0.40, 0.42), ("s2", True, 0.30, 0.34)):
        (data / case).mkdir(parents=True)
        (data / case / f"{case}_params.json").write_text(json.dumps({"skull_stripped": skull_stripped}))
        rows += [f"{case},default 1,{default}", f"{case},candidate 0,{candidate}"]
    cases = tmp_path / "cases.csv"
    cases.write_text("\n".join(rows) + "\n")

    def verdicts(*extra: str) -> dict[str, str]:
        result = subprocess.run([sys.executable, str(script), str(cases), "--data", str(data), "--default", "default 1", *extra],
                                capture_output=True, text=True, check=True)
        return {line.split(" | ")[0].strip("| "): line.rstrip(" |").split("| ")[-1] for line in result.stdout.splitlines()[2:]}

    assert verdicts() == {"default 1": "fails", "candidate 0": "fails"}  # both under the 8 gate studies' 0.50
    assert verdicts("--floor-below-default", "0.05") == {"default 1": "passes", "candidate 0": "passes"}  # 0.35 - 0.05
    assert verdicts("--floor-below-default", "-0.05")["candidate 0"] == "fails"  # 0.38 < 0.35 + 0.05
