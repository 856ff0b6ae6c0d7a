"""``benchmarks/lesion_attrition.py``: which post-processing step loses which expert lesion
(issue 13's rule 92), on a study built by hand (no ISLES'22 data needed)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.inference.postprocess import PostProcessing, find_components
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import Volume


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/lesion_attrition.py")


def test_the_stages_add_the_chosen_steps_in_the_product_s_order(script) -> None:
    chosen = PostProcessing(threshold=0.7, min_edge_depth_mm=6.0, contralateral_ratio=1.05,
                            bilateral_partner_mm=4.0, bilateral_partner_fraction=0.5)
    plan = script.stages(chosen)
    assert [name for name, _ in plan] == ["bare 0.5", "threshold", "edge", "contralateral", "bilateral"]
    assert plan[0][1] == PostProcessing() and plan[1][1] == PostProcessing(threshold=0.7)
    assert plan[2][1] == PostProcessing(threshold=0.7, min_edge_depth_mm=6.0) and plan[-1][1] == chosen
    satellites = PostProcessing(threshold=0.4, min_edge_depth_mm=6.0, satellite_mm=20.0, satellite_edge_only=True)
    assert [name for name, _ in script.stages(satellites)][-2:] == ["edge", "satellite"]  # rule 134's rows end at theirs
    margin = PostProcessing(threshold=0.7, min_edge_depth_mm=6.0, bilateral_partner_mm=4.0, bilateral_partner_total=True,
                            margin_dwi_ratio=1.2, margin_lesion_fraction=0.3, margin_mirror_ratio=1.2, margin_capped=True)
    plan = script.stages(margin)  # rules 109-111 and 137's rows end at the margin
    assert [name for name, _ in plan][-2:] == ["bilateral", "margin"] and plan[-1][1] == margin
    # a step the search left off is no stage
    assert [name for name, _ in script.stages(PostProcessing(threshold=0.4))] == ["bare 0.5", "threshold"]


def test_each_lesion_is_lost_by_the_step_that_drops_it(script) -> None:
    shape = (4, 30, 30)  # (k, j, i), 2 mm voxels
    brain = np.ones(shape, dtype=bool)
    truth = np.zeros(shape, dtype=bool)
    probability = np.zeros(shape, dtype=np.float32)
    depth = np.full(shape, 20.0)
    dwi, mirror = np.full(shape, 2.0), np.ones(shape)  # every lesion twice as bright as its mirror ...
    kept, shallow, faint, symmetric = (np.s_[1:3, 2:4, 2:4], np.s_[1:3, 10:12, 2:4], np.s_[1:3, 2:4, 10:12],
                                       np.s_[1:3, 10:12, 10:12])
    for lesion in (kept, shallow, faint, symmetric):
        truth[lesion] = True
        probability[lesion] = 0.9
    probability[faint] = 0.55  # ... but this one's probability is under the chosen threshold
    depth[shallow] = 2.0  # ... this one lies 2 mm below the brain's edge
    mirror[symmetric] = 2.0  # ... and this one is as bright as its mirror
    probability[1, 20:22, 20:22] = 0.9  # and a false positive of 4 voxels (32 mm³)

    def components(threshold):
        return find_components(probability, threshold, brain=brain, voxel_volume_mm3=8.0, depth_mm=depth,
                               dwi_smoothed=dwi, contralateral=mirror, spacing_mm=(2.0, 2.0, 2.0))

    prepared = SimpleNamespace(
        truth=truth, brain=brain, depth_mm=depth, posterior_fossa=None,
        study=SimpleNamespace(dwi=Volume(dwi.astype(np.float32), (2.0, 2.0, 2.0))),
        components_for=lambda s: components(s.threshold), mask=lambda s: components(s.threshold).mask(s))
    out = script.attrition(prepared, PostProcessing(threshold=0.6, min_edge_depth_mm=6.0, contralateral_ratio=1.2))
    assert [row["lesions_reached"] for row in out["stages"]] == [4, 3, 2, 1]
    assert [row["small_reached"] for row in out["stages"]] == [4, 3, 2, 1]  # 8 voxels each: 5-25
    last = out["stages"][-1]
    assert last["fp_ml"] == pytest.approx(0.032) and last["volume_dice"] == pytest.approx(16 / 44, abs=1e-4)  # 8 of 32 found, 4 false
    # lesion F1's false positives: the 4-voxel component touches no expert lesion, at every stage
    assert [row["false_positive_components"] for row in out["stages"]] == [1, 1, 1, 1]
    assert last["lesion_f1"] == pytest.approx(1 / (1 + (1 + 3) / 2), abs=1e-4)  # 1 found, 1 false, 3 missed
    assert {name: v["lesions"] for name, v in out["lost_by_step"].items()} == {"threshold": 1, "edge": 1, "contralateral": 1}
    lost = {lesion["lost_at"]: lesion for lesion in out["lesions"]}
    assert lost[None]["reached_at"] == ["bare 0.5", "threshold", "edge", "contralateral"]
    assert "checks" not in lost["threshold"]  # the threshold is no check: nothing to report
    assert lost["edge"]["checks"] == [{"voxels": 8, "edge_depth_mm": 2.0, "contralateral_ratio": 2.0, "partner_share": None}]
    assert lost["contralateral"]["checks"][0]["contralateral_ratio"] == 1.0
    # --then: the chosen settings with one step changed, after the row's own mask (rule 132's
    # satellites: the shallow lesion lies 14 mm from the kept one, the symmetric one 19.8 mm)
    chosen = PostProcessing(threshold=0.6, min_edge_depth_mm=6.0, contralateral_ratio=1.2)
    out = script.attrition(prepared, chosen, (("satellite_mm", 15.0), ("satellite_mm", 20.0)))
    assert [row["stage"] for row in out["stages"]][-3:] == ["contralateral", "then satellite_mm=15.0", "then satellite_mm=20.0"]
    assert [row["lesions_reached"] for row in out["stages"]] == [4, 3, 2, 1, 2, 3]
    assert out["stages"][-1]["settings"]["satellite_mm"] == 20.0
    assert script.then_item("satellite_mm=none") == ("satellite_mm", None)
    with pytest.raises(Exception, match="PostProcessing field"):
        script.then_item("satellites=10")


def test_a_paired_row_s_partner_must_be_the_network_it_scored(script, tmp_path) -> None:
    """Rule 94's rows average two networks: the re-run uses the partner the row named, and
    refuses one whose weights differ from the result's (as for the fold's own package)."""
    own = load_model_package(save_untrained_package(tmp_path / "own", seed=1))
    partner = load_model_package(save_untrained_package(tmp_path / "partner", seed=2))
    entry = {"package_dir": str(own.directory), "weights_sha256": own.sha256,
             "partner_package_dir": str(partner.directory), "partner_weights_sha256": partner.sha256}
    assert script.scored_package(tmp_path / "row.json", entry, "partner_package_dir").sha256 == partner.sha256
    with pytest.raises(SystemExit, match="partner.*is not the package .*row.json scored"):
        script.scored_package(tmp_path / "row.json", {**entry, "partner_weights_sha256": own.sha256},
                              "partner_package_dir")


@pytest.mark.parametrize("argv", [["--label", "x"], ["--label", "x", "--fold", "A"],
                                  ["r.json", "--fold", "A", "--synthetic-seeds", "1", "2", "--label", "x"]])
def test_it_takes_result_files_with_a_fold_or_synthetic_seeds_not_both(script, monkeypatch, capsys, argv) -> None:
    import sys

    monkeypatch.setattr(sys, "argv", ["lesion_attrition.py", *argv])
    with pytest.raises(SystemExit) as stopped:
        script.main()
    assert stopped.value.code == 2 and "give result files with --fold, or --synthetic-seeds" in capsys.readouterr().err


def test_thick_is_refused_with_synthetic_seeds(script, monkeypatch, capsys) -> None:
    """``--thick`` scores the real case's 6 mm slabs; the generator studies have no such way."""
    import sys

    monkeypatch.setattr(sys, "argv", ["lesion_attrition.py", "--synthetic-seeds", "1", "2", "--thick", "--label", "x"])
    with pytest.raises(SystemExit) as stopped:
        script.main()
    assert stopped.value.code == 2 and "--thick is for result files" in capsys.readouterr().err


@pytest.mark.needs_atlas  # the generator draws its study on the atlas in ../shared
def test_a_generator_study_is_scored_under_the_package_s_own_post_processing(script, tmp_path) -> None:
    package = load_model_package(save_untrained_package(tmp_path / "package", seed=0))
    row = script.run_synthetic(36_000_004, {"skull_stripped": False, "in_plane_spacing_mm": 2.0, "fov_mm": 200.0,
                                            "coverage_mm": 60.0}, package)
    assert row["seed"] == 36_000_004 and row["chosen"] == PostProcessing.from_manifest(package.manifest).as_dict()
    assert row["stages"][0]["stage"] == "bare 0.5" and len(row["lesions"]) == row["stages"][0]["lesions"]
