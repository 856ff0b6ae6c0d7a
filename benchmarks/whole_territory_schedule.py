"""Which of stage 2's real-background studies inject a whole-territory infarct, per training seed
(issue 13's rules 88, 95 and 96: a share leaves some seeds far fewer of them than others).

    .venv/bin/python benchmarks/whole_territory_schedule.py --seeds 51000005 51000006 51000007 \
        --share 0.25 --per-epoch 1

For each ``--seeds`` (stage 2's ``--seed``) and schedule, the (epoch, study) pairs of the
``--epochs`` × ``--studies`` real-background studies (stage 2 of ``scripts/train_cv.sh``: 4 × 4)
that ``lambdasegment train --injected-whole-territory P`` (``--share``) or
``--injected-whole-territory-per-epoch K`` (``--per-epoch``) turns into whole-territory studies,
and their count. Draws only (``training.real_backgrounds.whole_territory_studies``): no image is read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from LambdaSegmentLib.training.real_backgrounds import whole_territory_studies  # noqa: E402


def schedule(seed: int, *, epochs: int, studies: int, share: float = 0.0, per_epoch: int = 0) -> list[tuple[int, int]]:
    """The (epoch, study) pairs of a stage 2 that inject one whole-territory infarct."""
    return [(epoch, study) for epoch in range(epochs)
            for study in sorted(whole_territory_studies(seed, epoch, studies, probability=share, per_epoch=per_epoch))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", required=True, help="stage 2's --seed values")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--studies", type=int, default=4, help="real-background studies per epoch")
    parser.add_argument("--share", type=float, nargs="*", default=[], help="--injected-whole-territory values")
    parser.add_argument("--per-epoch", type=int, nargs="*", default=[], help="--injected-whole-territory-per-epoch values")
    args = parser.parse_args()
    schedules = [(f"share {p}", dict(share=p)) for p in args.share] + [(f"per epoch {k}", dict(per_epoch=k)) for k in args.per_epoch]
    if not schedules:
        parser.error("give --share and/or --per-epoch")
    for seed in args.seeds:
        for name, options in schedules:
            pairs = schedule(seed, epochs=args.epochs, studies=args.studies, **options)
            print(f"seed {seed}, {name}: {len(pairs)} of {args.epochs * args.studies} studies, (epoch, study) {pairs}")


if __name__ == "__main__":
    main()
