"""Write a fine-tuned package pulled back towards its start (WiSE-FT weight interpolation).

    .venv/bin/python scripts/interpolate_weights.py START_PKG FINETUNED_PKG --alpha 0.5 --output OUT_PKG

``OUT_PKG`` holds ``(1 - alpha) * START + alpha * FINETUNED`` (every float tensor, BatchNorm
statistics included; training/weight_interpolation.py). FINETUNED must be a fine-tune of START
(same architecture and preprocessing). The output's manifest drops the fine-tune's
post-processing and confidence threshold: choose them again for the new package
(benchmarks/real_scan_cv.py, scripts/choose_confidence_threshold.py). Refuses to overwrite an
existing package unless --overwrite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.errors import BadInputError  # noqa: E402
from LambdaSegmentLib.inference.package import MANIFEST_FILE  # noqa: E402
from LambdaSegmentLib.training.weight_interpolation import interpolate_packages  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("start", type=Path, help="the package the fine-tune started from (--init-weights)")
    parser.add_argument("finetuned", type=Path, help="the fine-tuned package")
    parser.add_argument("--alpha", type=float, required=True, help="weight of the fine-tuned model, 0..1")
    parser.add_argument("--output", type=Path, required=True, help="new package directory")
    parser.add_argument("--overwrite", action="store_true", help="replace a package already in --output")
    parser.add_argument("--name", default=None, help="the new package's name (default: the fine-tuned one's)")
    parser.add_argument("--version", default=None, help="the new package's version (default: the fine-tuned one's)")
    args = parser.parse_args(argv)
    if (args.output / MANIFEST_FILE).exists() and not args.overwrite:
        print(f"interpolate_weights.py: {args.output}: a package is already there (--overwrite replaces it)", file=sys.stderr)
        return 2
    try:
        output = interpolate_packages(args.start, args.finetuned, args.alpha, args.output, name=args.name, version=args.version)
    except (BadInputError, ValueError) as error:
        print(f"interpolate_weights.py: {error}", file=sys.stderr)
        return 2
    print(f"wrote {output}: {1 - args.alpha:g} x {args.start} + {args.alpha:g} x {args.finetuned}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
