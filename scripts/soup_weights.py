"""Write the uniform weight average (a "model soup") of sibling packages.

    .venv/bin/python scripts/soup_weights.py PKG PKG [PKG ...] --output OUT_PKG

``OUT_PKG`` holds the mean of every float tensor of the packages (BatchNorm statistics included;
training/weight_soup.py). They must be draws of one model: the same architecture and
preprocessing, ideally trained from the same ``--init-weights`` start. The output's manifest drops
what was chosen for the first package's outputs: choose the post-processing again for the soup
(benchmarks/real_scan_cv.py). Refuses to overwrite an existing package unless --overwrite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.errors import BadInputError  # noqa: E402
from LambdaSegmentLib.inference.package import MANIFEST_FILE  # noqa: E402
from LambdaSegmentLib.training.weight_soup import soup_packages  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("packages", type=Path, nargs="+", help="two or more package directories of one model")
    parser.add_argument("--output", type=Path, required=True, help="new package directory")
    parser.add_argument("--overwrite", action="store_true", help="replace a package already in --output")
    args = parser.parse_args(argv)
    if (args.output / MANIFEST_FILE).exists() and not args.overwrite:
        print(f"soup_weights.py: {args.output}: a package is already there (--overwrite replaces it)", file=sys.stderr)
        return 2
    try:
        output = soup_packages(args.packages, args.output)
    except (BadInputError, ValueError) as error:
        print(f"soup_weights.py: {error}", file=sys.stderr)
        return 2
    print(f"wrote {output}: the mean of {len(args.packages)} packages ({', '.join(map(str, args.packages))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
