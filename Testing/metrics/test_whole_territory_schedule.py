"""``benchmarks/whole_territory_schedule.py``: the whole-territory studies of a stage 2, as training draws them."""

from __future__ import annotations

import pytest

from LambdaSegmentLib.training.real_backgrounds import whole_territory_studies


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/whole_territory_schedule.py")


def test_a_quota_gives_every_seed_the_same_count_and_a_share_does_not(script) -> None:
    seeds = range(51000000, 51000010)
    quota = [script.schedule(seed, epochs=4, studies=4, per_epoch=1) for seed in seeds]
    assert all(len(pairs) == 4 and sorted(e for e, _ in pairs) == [0, 1, 2, 3] for pairs in quota)
    shares = [len(script.schedule(seed, epochs=4, studies=4, share=0.25)) for seed in seeds]
    assert len(set(shares)) > 1  # a share's count varies with the seed
    assert script.schedule(51000005, epochs=4, studies=4) == []  # neither option: none


def test_the_schedule_is_what_the_training_studies_draw(script) -> None:
    for epoch in range(4):
        chosen = whole_territory_studies(51000007, epoch, 4, probability=0.25)
        assert {s for e, s in script.schedule(51000007, epochs=4, studies=4, share=0.25) if e == epoch} == chosen
    assert len(whole_territory_studies(3, 0, 6, per_epoch=6)) == 6
