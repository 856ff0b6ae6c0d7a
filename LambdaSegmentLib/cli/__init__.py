"""The ``lambdasegment`` command line.

Each sub-command lives in its own module exposing ``register(subparsers)``; the
registered handler returns an exit code. Exit codes: 0 success, 2 bad input (one-line
message naming the file and the problem), 1 unexpected error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from LambdaSegmentLib import __version__
from LambdaSegmentLib.errors import BadInputError

# Sub-command modules, in the order --help lists them.
COMMAND_MODULES = ("demo", "segment", "segment_dir", "models_cmd", "synthesize", "train", "evaluate")

EXIT_OK, EXIT_UNEXPECTED, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lambdasegment",
        description="Segment acute ischemic stroke lesions on diffusion-weighted MRI with LambdaUNet. "
        "Research use only, not a medical device.",
    )
    parser.add_argument("--version", action="version", version=f"lambdasegment {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lambdasegment`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or EXIT_OK)
    except BadInputError as error:
        print(f"lambdasegment: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("lambdasegment: interrupted", file=sys.stderr)
        return EXIT_UNEXPECTED
    except Exception as error:  # noqa: BLE001 - last-resort report, exit code 1
        print(f"lambdasegment: unexpected error: {type(error).__name__}: {error}", file=sys.stderr)
        if "--debug" in (argv or sys.argv):
            raise
        return EXIT_UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
