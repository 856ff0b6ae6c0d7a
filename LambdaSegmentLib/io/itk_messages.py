"""ITK's own messages, caught instead of printed, and restated as warnings naming the file.

ITK reports oddities it tolerates with ``itkWarningMacro``, which its output window
prints straight to the process's stderr from C++, e.g.::

    WARNING: In /tmp/SimpleITK-build/ITK/Modules/IO/NIFTI/src/itkNiftiImageIO.cxx, line 2008
    NiftiImageIO (0x55d0c3a1b2f0): scan.nii.gz has unexpected scales in sform

SimpleITK (2.4 and later; checked with 2.5.7 / ITK 5.4) lets Python stand in for that
window (``SimpleITK.LoggerBase.SetAsGlobalITKLogger``). :func:`caught_itk_messages`
installs a collecting logger around a read and puts the previous one back afterwards, so
nothing reaches stderr; the caller restates what it caught (:func:`warn_about`) or drops
what its own checks already say better. An older SimpleITK (without ``LoggerBase``)
prints as before.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from pathlib import Path
from typing import Iterator

import SimpleITK as sitk

from ..errors import InputWarning

# "WARNING: In <source file>, line <n>" and "<ClassName> (0x<address>): " are ITK's framing.
_ITK_FRAMING = re.compile(r"^(?:WARNING|ERROR|Debug): In .*?, line \d+\s*$|^\w+ \(0x[0-9a-fA-F]+\):\s*", flags=re.M)


class _CollectingLogger(getattr(sitk, "LoggerBase", object)):
    """An ITK output window that keeps every message instead of printing it."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def DisplayText(self, text: str) -> None:  # noqa: N802 - ITK's method names
        self.messages.append(text)

    def DisplayErrorText(self, text: str) -> None:  # noqa: N802
        self.messages.append(text)

    def DisplayWarningText(self, text: str) -> None:  # noqa: N802
        self.messages.append(text)

    def DisplayGenericOutputText(self, text: str) -> None:  # noqa: N802
        self.messages.append(text)

    def DisplayDebugText(self, text: str) -> None:  # noqa: N802
        self.messages.append(text)


@contextlib.contextmanager
def caught_itk_messages() -> Iterator[list[str]]:
    """Collect ITK's messages during the ``with`` block into the yielded list (filled on
    exit, ITK's framing removed, one line each) instead of letting ITK print them."""
    messages: list[str] = []
    if not hasattr(sitk, "LoggerBase"):
        yield messages
        return
    logger = _CollectingLogger()
    previous = logger.SetAsGlobalITKLogger()
    try:
        yield messages
    finally:
        previous.SetAsGlobalITKLogger()
        messages.extend(text for text in (one_line(m) for m in logger.messages) if text)


def one_line(message: str) -> str:
    """An ITK message without its framing (source file, line, object address), on one line."""
    return " ".join(_ITK_FRAMING.sub("", message).split())


def warn_about(source: str | Path | None, messages: list[str]) -> None:
    """Restate ITK's messages about ``source`` (None: unknown) as :class:`InputWarning`s (one
    each, the file named once: ITK's own mention of the path is dropped)."""
    for message in dict.fromkeys(messages):  # ITK often says the same thing twice
        text = (message if source is None else message.replace(str(source), "")).strip(" :") or message
        warnings.warn(InputWarning(source, f"SimpleITK: {text}"), stacklevel=3)
