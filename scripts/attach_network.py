"""Attach a second network to a model package (inference/package.py):

- a seed network (``--as seed --threshold T``): a package whose detections (probability >= T)
  decide which of the first one's components are kept (issue 13's stage-1 seeds);
- a partner network (``--as partner``): a package whose probability is averaged with the first
  one's before the seed step and the post-processing (issue 13's rule 48).

    .venv/bin/python scripts/attach_network.py PKG SEED_PKG --as seed --threshold 0.5
    .venv/bin/python scripts/attach_network.py PKG PARTNER_PKG --as partner

Copies the second package into PKG/seed or PKG/partner and records its SHA-256 in PKG's
manifest, replacing a network of that role PKG already had. Both packages are verified first;
a second network with a seed or partner of its own is refused. PKG's post-processing was
chosen without it: choose it again afterwards (benchmarks/real_scan_cv.py --ship, which
searches with every attached network).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.errors import BadInputError  # noqa: E402
from LambdaSegmentLib.inference.package import attach_partner_network, attach_seed_network  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", type=Path, help="the package that gets the second network")
    parser.add_argument("network", type=Path, help="the second network's package (e.g. the stage-1 package)")
    parser.add_argument("--as", dest="role", choices=("seed", "partner"), required=True, help="the second network's role")
    parser.add_argument("--threshold", type=float, default=None,
                        help="seed only: the probability at or above which it detects a lesion (0 < t <= 1)")
    args = parser.parse_args(argv)
    if (args.role == "seed") != (args.threshold is not None):
        parser.error("--threshold is required with --as seed and meaningless with --as partner")
    try:
        if args.role == "seed":
            manifest = attach_seed_network(args.package, args.network, args.threshold)
        else:
            manifest = attach_partner_network(args.package, args.network)
    except (BadInputError, ValueError) as error:
        print(f"attach_network.py: {error}", file=sys.stderr)
        return 2
    block = manifest[f"{args.role}_network"]
    what = f"detects at {block['threshold']:g}" if args.role == "seed" else "probabilities averaged"
    print(f"{args.package}: {args.role} network {args.network} copied into {block['directory']}/ "
          f"(SHA-256 {block['weights_sha256'][:12]}…, {what})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
