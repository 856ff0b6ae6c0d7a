"""The one-page report drawn by a helper process.

Importing matplotlib and drawing the page took 0.5-0.8 s of a ~5 s ``lambdasegment segment``
run on a 2-core CPU (``benchmarks/end_to_end.py --stages``), and drawing a page is part of
every case of ``segment-dir``. A ``PageWriter`` made first thing starts a
clean helper interpreter ("spawn": no torch or OpenMP state is copied) that imports
matplotlib while the caller imports torch (single-threaded, so a second core is idle); pages
are then drawn there, in order, while the caller goes on (``submit``) or waits (``write``).
If the helper is gone, pages are drawn in the calling process: the same files either way.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
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


class PendingPage:
    """A page submitted to a ``PageWriter``; ``wait()`` returns its path or raises its error."""

    def __init__(self, writer: PageWriter, job: tuple[dict[str, Any], Volume, Volume, str, bool]) -> None:
        self._writer, self.job = writer, job
        self.sent = False
        self.done = False
        self.path: Path | None = None
        self.error: BaseException | None = None

    def draw_here(self) -> None:
        report, dwi, mask, path, overwrite = self.job
        if self.sent and Path(path).exists():
            self.path = Path(path)  # the helper finished it (pages are renamed into place) before it went
        else:
            try:
                self.path = write_report_figure(report, dwi, mask, path, overwrite=overwrite)
            except Exception as error:  # noqa: BLE001 - raised by wait(), like the helper's errors
                self.error = error
        self.done = True

    def wait(self) -> Path:
        self._writer._receive_until(self)
        if self.error is not None:
            raise self.error
        assert self.path is not None
        return self.path


class PageWriter:
    """Draws report pages (``write_report_figure``) in one helper process, in order.

    Use as a context manager. ``submit`` hands a page over and returns at once (it waits only
    while the helper is still busy with an earlier page); the returned page's ``wait()``
    gives its path or raises what ``write_report_figure`` raised (``BadInputError`` for an
    existing file or a bad suffix). Closing stops the helper at once: wait for every page
    first (pages are written atomically, so a stopped helper leaves none half-written).
    """

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child_end = context.Pipe()
        self._process: Any = context.Process(target=_serve, args=(child_end,), daemon=True, name="lambdasegment-pages")
        self._in_flight: deque[PendingPage] = deque()  # sent to the helper, result not read yet
        try:
            self._process.start()
        except OSError:  # no processes here (sandbox, limits): pages are drawn in this process
            self._connection.close()
            self._process = None
        child_end.close()

    def submit(
        self, report: Mapping[str, Any], dwi: Volume, mask: Volume, path: str | Path, *, overwrite: bool = False
    ) -> PendingPage:
        """Hand over the page of ``dwi`` with ``mask`` for ``path`` (PNG or PDF by suffix)."""
        page = PendingPage(self, (dict(report), dwi, mask, str(path), overwrite))
        if self._process is not None:
            try:
                self._connection.send(page.job)
                page.sent = True
                self._in_flight.append(page)
            except OSError:  # the helper died
                self._helper_gone()
        if not page.sent:
            page.draw_here()
        return page

    def _receive_until(self, page: PendingPage) -> None:
        """Read the helper's results, oldest first, until ``page`` has its own."""
        while not page.done:
            first = self._in_flight[0]
            try:
                status, value = self._connection.recv()
            except (EOFError, OSError):  # the helper died: its pages are drawn here
                self._helper_gone()
                continue
            self._in_flight.popleft()
            first.path, first.error = (Path(value), None) if status == "ok" else (None, value)
            first.done = True

    def _helper_gone(self) -> None:
        self.close()
        while self._in_flight:
            self._in_flight.popleft().draw_here()

    def close(self) -> None:
        if self._process is not None:
            self._process.terminate()  # idle or mid-page: either way no page is left half-written
            self._process.join()
            self._connection.close()
            self._process = None

    def __enter__(self) -> PageWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
