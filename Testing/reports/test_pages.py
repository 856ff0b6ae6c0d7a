"""PageWriter: the report page drawn by a helper process is the page drawn here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.reports import write_report_figure
from LambdaSegmentLib.reports.pages import PageWriter

from test_reports import I_TOWARD_RIGHT, sample_report, two_lesion_mask  # this folder is on sys.path


def pixels(path: Path) -> np.ndarray:
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))


def test_the_helper_draws_the_same_page_and_hands_back_errors(tmp_path: Path) -> None:
    mask = two_lesion_mask(I_TOWARD_RIGHT)
    dwi = mask.with_array(np.random.default_rng(0).random(mask.array.shape).astype(np.float32))
    report = sample_report(mask, tmp_path)
    here = write_report_figure(report, dwi, mask, tmp_path / "here.png")
    with PageWriter() as pages:
        there = pages.submit(report, dwi, mask, tmp_path / "there.png").wait()
        assert pages._process is not None and pages._process.is_alive()  # drawn by the helper, not here
        with pytest.raises(BadInputError, match=r"there\.png: already exists"):
            pages.submit(report, dwi, mask, there).wait()
        with pytest.raises(BadInputError, match="must end in .png or .pdf"):
            pages.submit(report, dwi, mask, tmp_path / "page.jpg").wait()
        pages.submit(report, dwi, mask, there, overwrite=True).wait()
    assert np.array_equal(pixels(there), pixels(here))
    assert pages._process is None  # closed: the helper is stopped


def test_a_dead_helper_means_the_page_is_drawn_here(tmp_path: Path) -> None:
    mask = two_lesion_mask(I_TOWARD_RIGHT)
    report = sample_report(mask, tmp_path)
    with PageWriter() as pages:
        pages._process.kill()
        pages._process.join()
        path = pages.submit(report, mask, mask, tmp_path / "page.png").wait()
        assert pages._process is None
    assert pixels(path).shape[:2] == pixels(write_report_figure(report, mask, mask, tmp_path / "again.png")).shape[:2]


def test_submitted_pages_come_back_in_order_each_with_its_own_result(tmp_path: Path) -> None:
    """segment-dir hands a case's page over and segments the next case meanwhile: pages are
    drawn in order, waiting for a later page fills in the earlier ones, errors stay theirs."""
    mask = two_lesion_mask(I_TOWARD_RIGHT)
    report = sample_report(mask, tmp_path)
    with PageWriter() as pages:
        first = pages.submit(report, mask, mask, tmp_path / "first.png")
        bad = pages.submit(report, mask, mask, tmp_path / "bad.jpg")
        last = pages.submit(report, mask, mask, tmp_path / "last.pdf")
        assert last.wait() == tmp_path / "last.pdf"
        assert first.done and bad.done  # read on the way
        assert first.wait() == tmp_path / "first.png"
        with pytest.raises(BadInputError, match="must end in .png or .pdf"):
            bad.wait()
    assert (tmp_path / "first.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "last.pdf").read_bytes()[:4] == b"%PDF"
    assert not (tmp_path / "bad.jpg").exists()
