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
