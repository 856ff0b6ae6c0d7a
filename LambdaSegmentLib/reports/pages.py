"""The one-page report drawn by a helper process.

Importing matplotlib takes ~0.4 s of a ~5 s ``lambdasegment segment`` run, and the caller
would otherwise spend it after segmenting. A ``PageWriter`` made first thing starts a clean
helper interpreter ("spawn": no torch or OpenMP state is copied) that imports matplotlib
while the caller imports torch (single-threaded, so a second core is idle) and segments;
pages are then drawn there, one at a time. If the helper is gone, the page is drawn in
the calling process: the same file either way.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Mapping

from LambdaSegmentLib.io import Volume

from .figure import write_report_figure


def _serve(connection: Connection) -> None:
    """Helper process: import matplotlib, then draw each page sent until None or EOF."""
    try:
        _draw_pages(connection)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the caller reports it, quietly here
        return


def _draw_pages(connection: Connection) -> None:
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.colors  # noqa: F401
    import matplotlib.figure  # noqa: F401

    while True:
        try:
            job = connection.recv()
        except EOFError:
            return
        if job is None:
            return
        report, dwi, mask, path, overwrite = job
        try:
            connection.send(("ok", str(write_report_figure(report, dwi, mask, path, overwrite=overwrite))))
        except Exception as error:  # noqa: BLE001 - handed back to the caller, who raises it
            try:
                connection.send(("error", error))
            except Exception:  # noqa: BLE001 - an exception that cannot be pickled
                connection.send(("error", RuntimeError(f"{type(error).__name__}: {error}")))


class PageWriter:
    """Draws report pages (``write_report_figure``) in one helper process.

    Use as a context manager. ``write`` blocks until the page is on disk and raises what
    ``write_report_figure`` raises (``BadInputError`` for an existing file or a bad suffix),
    so nothing is pending when the writer closes; closing stops the helper at once.
    """

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child_end = context.Pipe()
        self._process: Any = context.Process(target=_serve, args=(child_end,), daemon=True, name="lambdasegment-pages")
        try:
            self._process.start()
        except OSError:  # no processes here (sandbox, limits): pages are drawn in this process
            self._connection.close()
            self._process = None
        child_end.close()

    def write(
        self, report: Mapping[str, Any], dwi: Volume, mask: Volume, path: str | Path, *, overwrite: bool = False
    ) -> Path:
        """Draw the page of ``dwi`` with ``mask`` to ``path`` (PNG or PDF by suffix)."""
        if self._process is not None:
            try:
                self._connection.send((dict(report), dwi, mask, str(path), overwrite))
                status, value = self._connection.recv()
            except (EOFError, OSError):  # the helper died: draw the page here
                self.close()
            else:
                if status == "error":
                    raise value
                return Path(value)
        return write_report_figure(report, dwi, mask, path, overwrite=overwrite)

    def close(self) -> None:
        if self._process is not None:
            self._process.terminate()  # idle between pages: nothing half-written (pages are written atomically)
            self._process.join()
            self._connection.close()
            self._process = None

    def __enter__(self) -> PageWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
