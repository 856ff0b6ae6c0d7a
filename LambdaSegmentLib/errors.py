"""Errors and warnings the user can act on.

``BadInputError`` is raised for anything wrong with what the user gave (a file, an
option, a checkpoint); the CLI turns it into exit code 2 and a one-line message that
names the file and the problem. It subclasses ``ValueError`` so library callers (the
Slicer module) can catch it as such.

``InputWarning`` is issued (``warnings.warn``) for an input that is used but deserves a
look, e.g. a NIfTI whose qform and sform disagree; the CLI prints it as one
``lambdasegment: warning: <file>: <problem>`` line and records it in the report.
"""

from __future__ import annotations

from pathlib import Path


class _SourcedMessage:
    """One line naming the source and the problem; rebuilt from (source, problem) when it
    crosses a process boundary (report-page helper, segment-dir workers, DDP)."""

    def __init__(self, source: str | Path | None, problem: str) -> None:
        self.source = None if source is None else str(source)
        self.problem = problem
        super().__init__(f"{self.source}: {problem}" if self.source else problem)

    def __reduce__(self) -> tuple[type, tuple[str | None, str]]:
        return type(self), (self.source, self.problem)


class BadInputError(_SourcedMessage, ValueError):
    """A problem with user input. ``str(error)`` is one line naming the source and the problem."""


class InputWarning(_SourcedMessage, UserWarning):
    """Something about an input that was used but deserves a look. ``str(warning)`` is one
    line naming the source and the problem, like :class:`BadInputError`."""
