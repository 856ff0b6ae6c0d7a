"""``benchmarks/false_positive_components.py``: the features it lists per component (issue 13's
rules 82-83), on a study built by hand (no ISLES'22 data needed)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from LambdaSegmentLib.inference.postprocess import find_components, relative_adc, with_bilateral
from LambdaSegmentLib.io import Volume


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/false_positive_components.py")


def test_each_component_s_kind_ring_contrast_partner_share_and_shape(script) -> None:
    shape = (6, 30, 30)  # (k, j, i), 2 mm voxels, axial
    volume = lambda array: Volume(np.asarray(array, np.float32), (2.0, 2.0, 2.0))  # noqa: E731
    brain = np.ones(shape, dtype=bool)
    dwi, adc = np.ones(shape), np.full(shape, 0.8)
    probability = np.zeros(shape, dtype=np.float32)
    truth = np.zeros(shape, dtype=bool)
    truth[2:4, 5:7, 5:7] = True  # a lesion: twice as bright as the tissue around it
    dwi[truth] = 2.0
    probability[truth] = 0.9
    probability[3, 20:22, 5:15] = 0.9  # an elongated mark (2 x 10 voxels), not on the lesion
    probability[3, 25, 20:30] = 0.9  # its partner: half its voxels
    probability[1, 10, 20:24] = 0.9  # a mark whose mirror partner lies one slice off
    probability[2, 15, 20:26] = 0.9  # that partner: 1.5 times its voxels
    adc[:, :, 29] = 3.0  # CSF along one side (3.75 x the brain's median ADC)
    components = find_components(probability, 0.5, brain=brain, voxel_volume_mm3=8.0, depth_mm=np.full(shape, 20.0))
    labels = components.labels
    mark, partner = labels[3, 20, 5], labels[3, 25, 20]
    mirrored = np.zeros_like(labels)
    mirrored[3, 20, 5] = partner  # the mark's mirror region holds the partner, and the partner's the mark
    mirrored[3, 25, 20] = mark
    mirrored[2, 10, 20] = labels[2, 15, 20]  # the off-slice mark's mirror region, one slice up, holds its partner
    mirrored[3, 20, 14] = labels[2, 15, 20]  # the mark's mirror region also holds that 6-voxel piece
    study = SimpleNamespace(dwi=volume(dwi), adc=volume(adc))
    prepared = SimpleNamespace(
        study=study, brain=brain, truth=truth, depth_mm=np.full(shape, 20.0), adc_ratio=relative_adc(adc, brain),
        registration=SimpleNamespace(mirrored_labels=lambda found: mirrored if found is labels else None),
        components=lambda threshold, bilateral_mm: with_bilateral(components, mirrored, study.dwi, bilateral_mm))
    rows = {row["voxels"]: row for row in script.component_rows("case", prepared, "pkg")}
    lesion, elongated, small = rows[8], rows[20], rows[10]
    assert (lesion["kind"], elongated["kind"], small["kind"]) == ("lesion", "false", "false")
    assert lesion["ring_dwi"] == 2.0 and lesion["ring_adc"] == 1.0 and lesion["partner_share"] == 0.0
    assert elongated["partner_share"] == 0.5 and small["partner_share"] == 2.0
    # rule 128: the mark's two partners together hold (10 + 6) / 20 of its voxels
    assert elongated["partner_share_total"] == 0.8 and small["partner_share_total"] == 2.0
    # one slice either way finds what the in-plane search finds, and the partner one slice off
    assert elongated["partner_share_across"] == 0.5 and small["partner_share_across"] == 2.0
    off_slice = rows[4]
    assert off_slice["partner_share"] == 0.0 and off_slice["partner_share_across"] == 1.5
    assert elongated["elongation"] > 3.0 and lesion["elongation"] == 1.0
    assert small["csf_mm"] == 9.0 and lesion["csf_mm"] > 40.0  # median of 0, 2, ..., 18 mm: it reaches the CSF
    assert lesion["slices"] == [2, 3] and elongated["slices"] == [3, 3]


def test_each_expert_lesion_s_probability_seed_and_the_thresholds_that_find_it(script) -> None:
    shape = (4, 20, 20)  # (k, j, i), 2 mm voxels, axial
    brain = np.ones(shape, dtype=bool)
    truth = np.zeros(shape, dtype=bool)
    probability = np.zeros(shape, dtype=np.float32)
    truth[1:3, 2:4, 2:4] = True  # found at 0.5: 8 voxels
    probability[1:3, 2:4, 2:4] = 0.8
    truth[1, 10:12, 10:12] = True  # faint (0.35 at most): found at 0.3, not at 0.5; seeded
    probability[1, 10:12, 10:12] = 0.2
    probability[1, 10, 10] = 0.35
    truth[2, 15, 15] = True  # very faint (0.15) and not seeded: found nowhere, since the seed step drops it
    probability[2, 15, 15] = 0.15
    seed = np.zeros(shape, dtype=bool)
    seed[1:3, 2:4, 2:4] = True
    seed[1, 10, 10] = True
    depth = np.full(shape, 10.0)

    def components(threshold: float):
        from LambdaSegmentLib.inference.postprocess import keep_seeded_components
        return find_components(keep_seeded_components(probability, threshold, brain, seed), threshold, brain=brain,
                               voxel_volume_mm3=8.0, depth_mm=depth)

    study = SimpleNamespace(dwi=Volume(np.ones(shape, np.float32), (2.0, 2.0, 2.0)),
                            adc=Volume(np.full(shape, 0.7, np.float32), (2.0, 2.0, 2.0)))
    adc_ratio = np.full(shape, 0.7, np.float32)
    adc_ratio[0] = 3.0  # the first slice is CSF-like (ADC 3 x the brain's)
    prepared = SimpleNamespace(study=study, brain=brain, truth=truth, depth_mm=depth, probability=probability,
                               seed=seed, components=components, adc_ratio=adc_ratio)
    rows = {row["voxels"]: row for row in script.expert_rows("0001", prepared)}
    assert all(isinstance(row["csf_mm"], float) for row in rows.values())  # each lesion's distance to CSF is recorded
    strong, faint, tiny = rows[8], rows[4], rows[1]
    assert strong["found_at"] == [0.5, 0.3, 0.1] and strong["max_probability"] == 0.8 and strong["seeded"]
    assert strong["covered"] == [8, 8, 8] and faint["covered"] == [0, 1, 4] and tiny["covered"] == [0, 0, 0]
    assert faint["found_at"] == [0.3, 0.1] and faint["max_probability"] == 0.35 and faint["seeded"]
    assert tiny["found_at"] == [] and tiny["max_probability"] == 0.15 and tiny["seeded"] is False
    summary = script.expert_summary([{**row, "voxel_ml": 1.0} for row in rows.values()])["0001"]
    assert summary["lesions"] == 3 and summary["found_0.5"] == 1 and summary["found_0.3"] == 2
    assert summary["missed_p0.3-0.5"] == 1 and summary["missed_p0.3-0.5_seeded"] == 1
    assert summary["missed_p0.1-0.3"] == 1 and summary["missed_p0.1-0.3_seeded"] == 0
    assert summary["found_0.3_ml"] == 12.0
    assert summary["covered_0.5_ml"] == 8.0 and summary["covered_0.1_ml"] == 12.0


def test_expert_voxels_split_into_covered_a_rim_missed_around_them_and_lesions_never_reached(script) -> None:
    shape = (3, 20, 20)  # (k, j, i), 2 mm voxels
    brain = np.ones(shape, dtype=bool)
    truth = np.zeros(shape, dtype=bool)
    truth[1, 4:9, 4:9] = True  # a found lesion: its 3 x 3 core marked, its one-voxel rim not
    truth[1, 14:16, 14:16] = True  # a lesion never reached
    probability = np.zeros(shape, dtype=np.float32)
    probability[1, 5:8, 5:8] = 0.9
    dwi = np.ones(shape)
    dwi[1, 5:8, 5:8] = 2.0
    dwi[truth & (probability == 0)] = 1.4
    depth = np.full(shape, 10.0)
    study = SimpleNamespace(dwi=Volume(dwi.astype(np.float32), (2.0, 2.0, 2.0)),
                            adc=Volume(np.full(shape, 0.8, np.float32), (2.0, 2.0, 2.0)))
    prepared = SimpleNamespace(
        study=study, brain=brain, truth=truth, probability=probability,
        components=lambda threshold: find_components(probability, threshold, brain=brain, voxel_volume_mm3=8.0, depth_mm=depth))
    groups = script.expert_voxel_groups(prepared)
    assert groups["covered"]["voxels"] == 9 and groups["covered"]["dwi"][0] == 2.0
    assert groups["missed_in_found"]["voxels"] == 16 and groups["missed_in_found"]["dwi"][0] == 1.4
    assert groups["missed_in_found"]["probability"] == 0.0
    assert groups["missed_in_found"]["mm_to_covered"][0] == 2.0  # the rim's edge voxels 2 mm, its corners 2.8 mm away
    assert groups["in_unfound"]["voxels"] == 4 and "mm_to_covered" not in groups["in_unfound"]


def test_synthetic_expert_voxel_splits_are_summed_per_package_and_the_real_cases_left_out(script) -> None:
    split = lambda covered, missed, unfound: {  # noqa: E731
        "covered": {"voxels": covered}, "missed_in_found": {"voxels": missed}, "in_unfound": {"voxels": unfound}}
    results = [
        {"expert_voxels": {"0001=runs/a/pkg": split(100, 200, 300), "synth-31000000 runs/a/pkg": split(1, 2, 3),
                           "synth-31000002 runs/a/pkg": split(10, 20, 30)}},
        {"expert_voxels": {"synth-31000000 runs/b/pkg": split(5, 6, 7)}},
        {"rows": []},  # a results file without the split
    ]
    assert script.synthetic_voxel_totals(results) == {
        "synthetic runs/a/pkg": {"studies": 2, "covered": 11, "missed_in_found": 22, "in_unfound": 33},
        "synthetic runs/b/pkg": {"studies": 1, "covered": 5, "missed_in_found": 6, "in_unfound": 7},
    }
