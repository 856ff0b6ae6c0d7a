"""``lambdasegment segment-dir``: BIDS / ISLES'22 folders and CSV listings, a failing case
does not stop the batch, finished cases are skipped on the next run, and a summary CSV."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from lambdasegment_cli_helpers import lambdasegment, write_phantom

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference.batch import discover_cases
from LambdaSegmentLib.io import read_volume
from LambdaSegmentLib.lesions import connected_lesions, lesion_volume_ml

SMALL = dict(size_ijk=(32, 36, 8), spacing_mm=(4.0, 4.0, 6.0))


def bids_dataset(root: Path, subjects: list[str]) -> Path:
    """ISLES'22-style: sub-X/ses-0001/dwi/sub-X_ses-0001_{dwi,adc}.nii.gz (plus a derivatives mask folder)."""
    for number, subject in enumerate(subjects):
        write_phantom(root / subject / "ses-0001" / "dwi", f"{subject}_ses-0001", seed=number, **SMALL)
    (root / "derivatives" / subjects[0]).mkdir(parents=True)
    shutil.copy(root / subjects[0] / "ses-0001" / "dwi" / f"{subjects[0]}_ses-0001_dwi.nii.gz",
                root / "derivatives" / subjects[0] / "not_a_case_dwi.nii.gz")
    return root


def read_summary(output_dir: Path) -> dict[str, dict[str, str]]:
    with open(output_dir / "summary.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert list(rows[0]) == ["case", "volume_ml", "lesion_count", "adc_core_ml", "seconds", "status", "error", "warnings"]
    return {row["case"]: row for row in rows}


def test_batch_goes_on_past_a_broken_case_and_resumes_where_it_stopped(model_dir: Path, tmp_path: Path) -> None:
    dataset = bids_dataset(tmp_path / "rawdata", ["sub-a", "sub-b", "sub-c"])
    broken_adc = dataset / "sub-b" / "ses-0001" / "dwi" / "sub-b_ses-0001_adc.nii.gz"
    good_adc = broken_adc.read_bytes()
    broken_adc.write_text("truncated download")
    output = tmp_path / "results"

    first = lambdasegment("segment-dir", dataset, output, "--model", model_dir, "--device", "cpu")
    assert first.returncode == 2, first.stderr
    assert "ETA" in first.stderr and "3/3 cases" in first.stderr
    summary = read_summary(output)
    assert list(summary) == ["sub-a_ses-0001", "sub-b_ses-0001", "sub-c_ses-0001"]
    assert summary["sub-b_ses-0001"]["status"] == "failed"
    assert str(broken_adc) in summary["sub-b_ses-0001"]["error"]
    assert not (output / "sub-b_ses-0001").exists()
    for case in ("sub-a_ses-0001", "sub-c_ses-0001"):
        row = summary[case]
        assert row["status"] == "ok" and float(row["seconds"]) > 0
        mask = read_volume(output / case / f"{case}_mask.nii.gz")
        assert float(row["volume_ml"]) == pytest.approx(lesion_volume_ml(mask), abs=1e-4)
        assert int(row["lesion_count"]) == len(connected_lesions(mask))
        report = json.loads((output / case / f"{case}_report.json").read_text(encoding="utf-8"))
        assert float(row["adc_core_ml"]) == pytest.approx(report["adc_core_ml"], abs=1e-4)
        assert report["case"] == case
        assert (output / case / f"{case}_report.png").is_file() and (output / case / f"{case}_report.csv").is_file()
    assert not list(output.glob(".*.partial"))
    finished_mask = output / "sub-a_ses-0001" / "sub-a_ses-0001_mask.nii.gz"
    finished_mtime = finished_mask.stat().st_mtime_ns

    broken_adc.write_bytes(good_adc)  # the user fixes the broken case and runs the same command again
    second = lambdasegment("segment-dir", dataset, output, "--model", model_dir, "--device", "cpu")
    assert second.returncode == 0, second.stderr
    summary = read_summary(output)
    assert summary["sub-a_ses-0001"]["status"] == summary["sub-c_ses-0001"]["status"] == "skipped (done earlier)"
    assert summary["sub-b_ses-0001"]["status"] == "ok" and summary["sub-b_ses-0001"]["error"] == ""
    assert finished_mask.stat().st_mtime_ns == finished_mtime


def test_csv_listing_through_lightnings_predict_loop(model_dir: Path, tmp_path: Path) -> None:
    files = write_phantom(tmp_path / "images", "patient7", **SMALL)
    listing = tmp_path / "cases.csv"
    listing.write_text(f"case,dwi,adc\npatient7,images/{files.dwi.name},images/{files.adc.name}\n"
                       f"ghost,images/ghost_dwi.nii.gz,images/ghost_adc.nii.gz\n")
    output = tmp_path / "results"
    result = lambdasegment("segment-dir", listing, output, "--model", model_dir, "--device", "cpu",
                           "--devices", "1", "--workers", "1")
    assert result.returncode == 2, result.stderr
    summary = read_summary(output)
    assert summary["patient7"]["status"] == "ok"
    assert summary["ghost"]["status"] == "failed" and "ghost_dwi.nii.gz: file or folder not found" in summary["ghost"]["error"]
    assert (output / "patient7" / "patient7_mask.nii.gz").is_file()


def test_discovery_of_bids_and_csv_listings(tmp_path: Path) -> None:
    dataset = bids_dataset(tmp_path / "bids", ["sub-1", "sub-2"])
    cases = discover_cases(dataset)
    assert [c.name for c in cases] == ["sub-1_ses-0001", "sub-2_ses-0001"]
    assert set(cases[0].inputs.images) == {"dwi", "adc"}
    listing = tmp_path / "list.csv"
    listing.write_text("case,dwi,eadc\nx,a_dwi.nii.gz,a_eadc.nii.gz\n")
    (case,) = discover_cases(listing)
    assert case.inputs.images == {"dwi": tmp_path / "a_dwi.nii.gz", "eadc": tmp_path / "a_eadc.nii.gz"}
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInputError, match="no cases found"):
        discover_cases(tmp_path / "empty")
    listing.write_text("name,image\n")
    with pytest.raises(BadInputError, match="needs columns"):
        discover_cases(listing)
    listing.write_text("case,dwi,adc\nx,a,b\nx,c,d\n")
    with pytest.raises(BadInputError, match="not unique"):
        discover_cases(listing)
