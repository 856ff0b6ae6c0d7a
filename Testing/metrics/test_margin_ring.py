"""``benchmarks/margin_ring.py``: the expert and other voxels of the two rings around kept lesions,
by DWI ratio (issue 13's rule 109), on a study built by hand."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/margin_ring.py")


def test_two_rings_split_into_expert_and_other_voxels_by_brightness(script) -> None:
    shape = (9, 9, 9)
    brain = np.ones(shape, dtype=bool)
    brain[:, :, 0] = False
    mask = np.zeros(shape, dtype=bool)
    mask[4, 4, 4] = True
    ring1 = np.zeros(shape, dtype=bool)
    ring1[3:6, 3:6, 3:6] = True
    ring1 &= ~mask
    truth = mask.copy()
    truth[4, 4, 3] = truth[4, 4, 5] = True  # two expert voxels in ring 1
    truth[4, 4, 2] = True  # one in ring 2
    ratio = np.ones(shape, np.float32)
    ratio[ring1] = 1.45
    ratio[4, 4, 5] = 1.8
    ratio[4, 4, 2] = 1.35
    rows = script.ring_counts(mask, truth, ratio, brain, (2.0, 2.0, 2.0))
    by = {(row["ring"], entry["dwi_ratio_at_least"]): (entry["expert_voxels"], entry["other_voxels"])
          for row in rows for entry in row["by_ratio"]}
    assert by[(1, 1.4)] == (2, 24) and by[(1, 1.5)] == (1, 0) and by[(1, 1.7)] == (1, 0)
    assert by[(2, 1.3)] == (1, 0) and by[(2, 1.4)] == (0, 0)
    # on 6 mm slices the rings stay in the slice plane
    flat = script.ring_counts(mask, truth, ratio, brain, (2.0, 2.0, 6.0))
    assert flat[0]["by_ratio"][0]["expert_voxels"] + flat[0]["by_ratio"][0]["other_voxels"] == 8


def test_growth_is_counted_per_kept_lesion_and_split_by_the_expert_mask(script) -> None:
    """Rule 137's look: a true lesion whose margin lies in the expert mask and a false mark whose
    margin does not; each lesion's added voxels, and the added voxels' signal inside and outside."""
    shape = (5, 16, 16)
    kept = np.zeros(shape, bool)
    kept[2, 3:5, 3:5] = True  # true lesion, 4 voxels
    kept[2, 11, 11] = True  # false mark, 1 voxel
    truth = np.zeros(shape, bool)
    truth[2, 2:6, 2:6] = True
    grown = kept.copy()
    grown[2, 2:6, 2:6] = True  # the true lesion's ring: 12 voxels, all expert
    grown[2, 10:13, 10:13] = True  # the false mark's ring: 8 voxels, none expert
    dwi = np.ones(shape)
    dwi[kept] = 2.0
    dwi[grown & ~kept & truth] = 1.5
    dwi[grown & ~kept & ~truth] = 1.8
    adc = np.full(shape, 0.8)
    seed = np.where(kept, 0.9, 0.0)
    rows, added = script.lesion_growth(kept, grown, truth, dwi, adc, seed)
    assert [(row["voxels"], row["in_expert"], row["added"], row["added_in_expert"]) for row in rows] == [(4, 4, 12, 12), (1, 0, 8, 0)]
    assert rows[1]["added_dwi_ratio"] == 1.8 and rows[0]["dwi_ratio"] == 2.0 and rows[0]["seed_max_probability"] == 0.9
    assert added["in_expert"]["voxels"] == 12 and added["outside"]["dwi_ratio"] == [1.8, 1.8, 1.8]
    none_added, _ = script.lesion_growth(kept, kept, truth, dwi, adc)
    assert all(row["added"] == 0 and row["added_dwi_ratio"] is None and "seed_max_probability" not in row for row in none_added)
