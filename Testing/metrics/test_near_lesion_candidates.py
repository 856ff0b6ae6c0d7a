"""``benchmarks/near_lesion_candidates.py`` (issue 13): what a step adding weaker candidates near
the found lesions would add, on a hand-made probability map (no ISLES'22 data needed)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from LambdaSegmentLib.io import Volume


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/near_lesion_candidates.py")


def case() -> tuple[SimpleNamespace, np.ndarray]:
    """A 2 mm study: a found lesion (the row's mask), a weaker true embolus 8 mm from it, a weaker
    false dot 30 mm from it, and a missed true embolus the network does not see at all."""
    shape = (10, 40, 40)
    probability = np.zeros(shape, dtype=np.float32)
    truth = np.zeros(shape, dtype=bool)
    probability[5, 10:12, 10:12] = 0.9
    truth[5, 10:12, 10:12] = True  # found
    probability[5, 10:12, 16:18] = 0.15
    truth[5, 10:12, 16:18] = True  # near, weak, true (8 mm from the found one's edge: columns 11 -> 16)
    probability[5, 25:27, 25:27] = 0.25  # far, weak, false
    truth[5, 30:32, 5:7] = True  # missed, probability 0
    dwi = Volume(np.ones(shape, dtype=np.float32), (2.0, 2.0, 2.0), (0.0, 0.0, 0.0), tuple(np.eye(3).ravel()))
    prepared = SimpleNamespace(study=SimpleNamespace(dwi=dwi), truth=truth, probability=probability,
                               brain=np.ones(shape, dtype=bool))
    return prepared, probability >= 0.5


def test_candidates_are_added_by_threshold_and_reach(script) -> None:
    prepared, mask = case()
    head, *rows = script.near_candidates(prepared, mask)
    assert head == {"expert_lesions": 3, "expert_lesions_reached_before": 1}
    by = {(r["threshold"], r["reach_mm"]): r for r in rows}
    assert set(by) == {(t, r) for t in script.THRESHOLDS for r in script.REACH_MM}
    assert by[(0.1, 3.0)]["candidates_added"] == 0 and by[(0.1, 3.0)]["expert_lesions_reached_after"] == 1
    near = by[(0.1, 10.0)]  # the true embolus, 10 mm reach: added; the false dot (about 27 mm) not
    assert (near["candidates_added"], near["of_them_touching_expert"], near["expert_lesions_reached_after"]) == (1, 1, 2)
    assert near["expert_ml_added"] == pytest.approx(4 * 8 / 1000) and near["false_ml_added"] == 0.0
    far = by[(0.1, 40.0)]  # both; the missed embolus never (probability 0)
    assert (far["candidates_added"], far["expert_lesions_reached_after"]) == (2, 2)
    assert far["false_ml_added"] == pytest.approx(4 * 8 / 1000)
    assert by[(0.2, 40.0)]["candidates_added"] == 1  # at 0.2 only the false dot (0.25) is a candidate
    assert by[(0.2, 40.0)]["expert_lesions_reached_after"] == 1


def test_only_small_kept_lesions_anchor_when_asked(script) -> None:
    prepared, mask = case()
    assert script.anchors(mask, 0.008, None) is mask
    assert not script.anchors(mask, 0.008, 0.01).any()  # the found lesion is 0.032 mL: not an anchor under 0.01
    assert script.anchors(mask, 0.008, 1.0).sum() == 4
    _head, *rows = script.near_candidates(prepared, mask, anchor_max_ml=0.01)
    assert all(r["candidates_added"] == 0 for r in rows)  # no anchor, nothing added
