"""The ``lambdasegment`` command line.

Each sub-command lives in its own module exposing ``register(subparsers)``; the
registered handler returns an exit code. Exit codes: 0 success, 2 bad input (one-line
message naming the file and the problem), 1 unexpected error. The command speaks only
through its own messages: Python warnings raised while it runs (among them the
``InputWarning``s that restate ITK's, see ``io.itk_messages``) are printed as one
``lambdasegment: warning: ...`` line each; ITK messages from outside file reading (which
restates its own, naming the file) are caught for the whole command and said at its end.

Start-up time matters (a fresh ``lambdasegment segment`` is what a clinician waits for):
``main`` registers only the module of the sub-command named on the command line when it
can find it, so ``segment`` never imports what ``train`` needs (Lightning and its
dependencies take several seconds to import). Without a recognisable sub-command (``--help``,
``--version``, a typo) every module is registered, in ``COMMAND_MODULES`` order.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import sys
import warnings
from typing import Any, Sequence

from LambdaSegmentLib import __version__
from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.heap import keep_freed_memory

# Sub-command modules, in the order --help lists them.
COMMAND_MODULES = ("demo", "segment", "segment_dir", "models_cmd", "synthesize", "train", "evaluate")

EXIT_OK, EXIT_UNEXPECTED, EXIT_BAD_INPUT = 0, 1, 2
#: Anywhere on the command line: show the traceback of an unexpected error.
DEBUG_FLAG = "--debug"

# Garbage-collection thresholds of a ``lambdasegment`` process (generation 0 after 10,000
# allocations instead of 700): see ``main``.
PROCESS_GC_THRESHOLDS = (10_000, 10, 10)


def json_object(text: str) -> dict[str, Any]:
    """An argparse ``type`` for options that take a JSON object (``--synthesis``,
    ``--model-config``): the parsed dict, or argparse's own usage error naming the option."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def requested_command(argv: Sequence[str]) -> str | None:
    """The sub-command named on the command line: its first word not starting with "-"
    (the top-level options, --help and --version, take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``lambdasegment`` parser: every sub-command, or only ``command``'s when given and
    found in the module named like it (``segment-dir`` -> ``segment_dir``, ``models`` ->
    ``models_cmd``); otherwise every sub-command."""
    if command is not None:
        stem = command.replace("-", "_")
        candidates = [name for name in COMMAND_MODULES if name == stem or name == f"{stem}_cmd"]
        parser = _parser_with(candidates) if candidates else None
        if parser is not None and command in _subcommands(parser).choices:
            return parser
    return _parser_with(COMMAND_MODULES)


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))


def _parser_with(modules: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lambdasegment",
        description="Segment acute ischemic stroke lesions on diffusion-weighted MRI with LambdaUNet. "
        "Research use only, not a medical device.",
        epilog=f"Exit codes: 0 success, 2 bad input, 1 unexpected error (add {DEBUG_FLAG} anywhere to see its traceback).",
    )
    parser.add_argument("--version", action="version", version=f"lambdasegment {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in modules:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lambdasegment`` console script; returns the exit code.

    ``argv`` None means this process *is* the command (console script, ``python -m``), so
    its garbage collector may be tuned (never when called in-process with ``argv``):

    - collections ``PROCESS_GC_THRESHOLDS``: with CPython's default (700, 10, 10) importing
      torch, SimpleITK and matplotlib sets off full collections over all their objects
      (about 0.3 s of CPU in a ``segment`` run); cyclic garbage is still collected;
    - on return every object still alive is frozen (``gc.freeze``), so the interpreter's final
      collection at exit skips them (about 0.6 s of CPU otherwise);
    - glibc's malloc keeps freed blocks for reuse (``heap.keep_freed_memory``), so the forward
      passes do not fault in fresh pages for every large tensor.
    """
    if argv is None:
        gc.set_threshold(*PROCESS_GC_THRESHOLDS)
        keep_freed_memory()
    code = _run(argv)
    if argv is None:
        gc.freeze()
    return code


def _run(argv: Sequence[str] | None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    debug = DEBUG_FLAG in arguments  # accepted anywhere on the line, so it is not an argparse option
    arguments = [word for word in arguments if word != DEBUG_FLAG]
    args = build_parser(requested_command(arguments)).parse_args(arguments)
    from LambdaSegmentLib.io.itk_messages import caught_itk_messages, warn_about

    try:
        with warnings.catch_warnings():
            warnings.showwarning = show_warning
            stray_itk_messages: list[str] = []
            try:
                with caught_itk_messages() as stray_itk_messages:  # ITK's messages outside file reading
                    return int(args.func(args) or EXIT_OK)
            finally:
                warn_about(None, stray_itk_messages)
    except BadInputError as error:
        print(f"lambdasegment: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("lambdasegment: interrupted", file=sys.stderr)
        return EXIT_UNEXPECTED
    except Exception as error:  # noqa: BLE001 - last-resort report, exit code 1
        print(f"lambdasegment: unexpected error: {type(error).__name__}: {error}", file=sys.stderr)
        if debug:
            raise
        return EXIT_UNEXPECTED


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: object = None, line: str | None = None) -> None:
    """``warnings.showwarning`` of the command: one ``lambdasegment: warning:`` line, no source location."""
    print(f"lambdasegment: warning: {' '.join(str(message).split())}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
