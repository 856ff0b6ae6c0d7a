"""Give a model package a seed network: a second package whose detections decide which of the
first one's components are kept (issue 13's stage-1 seeds; inference/package.py, seed_network).

    .venv/bin/python scripts/attach_seed_network.py PKG SEED_PKG --threshold 0.5

Copies SEED_PKG into PKG/seed and records it (threshold, SHA-256) in PKG's manifest, replacing
a seed network PKG already had. Both packages are verified first; a seed package with a seed
network of its own is refused. The package's post-processing was chosen without the seed:
choose it again afterwards (benchmarks/real_scan_cv.py --ship, which searches with the seed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.errors import BadInputError  # noqa: E402
from LambdaSegmentLib.inference.package import attach_seed_network  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", type=Path, help="the package that gets the seed network")
    parser.add_argument("seed", type=Path, help="the seed network's package (e.g. the stage-1 package)")
    parser.add_argument("--threshold", type=float, required=True,
                        help="the seed network's probability at or above which it detects a lesion (0 < t <= 1)")
    args = parser.parse_args(argv)
    try:
        manifest = attach_seed_network(args.package, args.seed, args.threshold)
    except (BadInputError, ValueError) as error:
        print(f"attach_seed_network.py: {error}", file=sys.stderr)
        return 2
    block = manifest["seed_network"]
    print(f"{args.package}: seed network {args.seed} copied into {block['directory']}/ "
          f"(SHA-256 {block['weights_sha256'][:12]}…, detects at {block['threshold']:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
