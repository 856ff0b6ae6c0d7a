"""Reports: numbers from LambdaSegmentLib.lesions, CSV = JSON, and a page in radiological convention."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.lesions import connected_lesions, hemisphere_volumes_ml, lesion_volume_ml, slice_areas_mm2
from LambdaSegmentLib.reports import (
    DISCLAIMER,
    build_report,
    read_csv,
    sha256_of_input,
    write_report_csv,
    write_report_figure,
    write_report_json,
)
from LambdaSegmentLib.reports.figure import display_slices

# LPS +x is the patient's left. Direction columns of a NIfTI stored in RAS+ order (i runs
# toward the patient's right) and of one stored in LPS order (i runs toward the left).
I_TOWARD_RIGHT = np.diag([-1.0, -1.0, 1.0])
I_TOWARD_LEFT = np.eye(3)


def two_lesion_mask(direction: np.ndarray) -> Volume:
    """A 2 mm x 2.5 mm x 5 mm grid centred on x = 0 with a large lesion in the patient's left
    hemisphere (x > 0) and a small one in the right."""
    array = np.zeros((10, 40, 40), dtype=np.uint8)
    spacing = (2.0, 2.5, 5.0)
    origin = -direction @ (np.asarray(spacing) * (np.array([40, 40, 10]) - 1) / 2)
    volume = Volume(array, spacing, tuple(origin), direction)
    i, j, k = np.meshgrid(np.arange(40), np.arange(40), np.arange(10), indexing="ij")
    x = volume.index_to_lps(np.stack([i, j, k], -1))[..., 0]
    left = (x > 12) & (x < 24) & (j > 10) & (j < 20) & (k >= 3) & (k <= 6)
    right = (x < -16) & (x > -22) & (j > 25) & (j < 30) & (k == 5)
    array[np.transpose(left | right, (2, 1, 0))] = 1
    return volume.with_array(array)


def sample_report(mask: Volume, tmp_path: Path) -> dict:
    dwi_file = tmp_path / "case_dwi.nii.gz"
    dwi_file.write_bytes(b"dwi bytes")
    return build_report(case="case", mask=mask, sources={"dwi": str(dwi_file), "adc": "<memory>"},
                        model={"name": "m", "version": "1", "sha256": "ab" * 32, "training_data": "t"},
                        device="cpu", seconds=1.5, threshold=0.5, study_info={"b_value": 1000.0})


def test_report_numbers_are_the_lesion_functions(tmp_path: Path) -> None:
    mask = two_lesion_mask(I_TOWARD_RIGHT)
    report = sample_report(mask, tmp_path)
    lesions = connected_lesions(mask)
    assert report["infarct_volume_ml"] == lesion_volume_ml(mask)
    assert report["lesion_count"] == len(lesions) == 2
    assert report["largest_lesion_ml"] == lesions[0].volume_ml
    assert report["hemisphere_volumes_ml"] == hemisphere_volumes_ml(mask)
    assert report["hemisphere_volumes_ml"]["left"] > report["hemisphere_volumes_ml"]["right"] > 0
    assert report["slice_areas_mm2"] == slice_areas_mm2(mask)
    assert [lesion["volume_ml"] for lesion in report["lesions"]] == [lesion.volume_ml for lesion in lesions]
    assert report["input_files"][0]["sha256"] == hashlib.sha256(b"dwi bytes").hexdigest()
    assert report["input_files"][1] == {"role": "adc", "path": "<memory>", "sha256": None}
    assert report["disclaimer"] == DISCLAIMER
    json.dumps(report)  # serialisable as is


def test_csv_row_carries_the_json_numbers(tmp_path: Path) -> None:
    report = sample_report(two_lesion_mask(I_TOWARD_LEFT), tmp_path)
    write_report_json(report, tmp_path / "r.json")
    write_report_csv(report, tmp_path / "r.csv")
    rows = read_csv(tmp_path / "r.csv")
    assert [int(r["lesion_label"]) for r in rows] == [1, 2]  # one row per lesion, the case's columns on each
    assert [float(r["lesion_volume_ml"]) for r in rows] == pytest.approx([l["volume_ml"] for l in report["lesions"]], abs=1e-4)
    row = rows[0]
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8")) == report
    assert float(row["infarct_volume_ml"]) == pytest.approx(report["infarct_volume_ml"], abs=1e-4)
    assert float(row["left_hemisphere_ml"]) == pytest.approx(report["hemisphere_volumes_ml"]["left"], abs=1e-4)
    assert int(row["lesion_count"]) == 2 and row["model_sha256"] == "ab" * 32
    assert [float(a) for a in row["slice_areas_mm2"].split(";")] == pytest.approx(report["slice_areas_mm2"], abs=0.01)
    with pytest.raises(BadInputError, match="already exists"):
        write_report_csv(report, tmp_path / "r.csv")


@pytest.mark.parametrize("direction", [I_TOWARD_RIGHT, I_TOWARD_LEFT], ids=["stored-RAS", "stored-LPS"])
def test_display_puts_the_patients_left_on_the_image_right(direction: np.ndarray) -> None:
    mask = two_lesion_mask(direction)
    panels, aspect, sides, _ = display_slices(mask, slice_axis=2)
    assert sides == ("R", "L")
    assert aspect == pytest.approx(2.5 / 2.0)
    large = panels[4]  # the slice holding only the large, left-hemisphere lesion
    columns = np.flatnonzero(large.any(axis=0))
    assert columns.min() > large.shape[1] // 2


def test_display_puts_anterior_at_the_top() -> None:
    mask = two_lesion_mask(I_TOWARD_RIGHT)  # large lesion at small j = anterior when j runs toward anterior
    panels, *_ = display_slices(mask, slice_axis=2)
    rows = np.flatnonzero(panels[4].any(axis=1))
    y = mask.index_to_lps(np.array([0, 15, 0]))[1]  # LPS y of the large lesion (negative = anterior)
    assert (rows.mean() < panels.shape[1] / 2) == (y < 0)


def test_figure_is_one_png_page_and_refuses_to_overwrite(tmp_path: Path) -> None:
    mask = two_lesion_mask(I_TOWARD_RIGHT)
    dwi = mask.with_array(np.random.default_rng(0).random(mask.array.shape).astype(np.float32))
    report = sample_report(mask, tmp_path)
    path = write_report_figure(report, dwi, mask, tmp_path / "page.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    write_report_figure(report, dwi, mask, tmp_path / "page.pdf")
    assert (tmp_path / "page.pdf").read_bytes()[:4] == b"%PDF"
    with pytest.raises(BadInputError, match="already exists"):
        write_report_figure(report, dwi, mask, tmp_path / "page.png")
    with pytest.raises(BadInputError, match=".png or .pdf"):
        write_report_figure(report, dwi, mask, tmp_path / "page.jpg")


def test_a_dicom_folder_is_hashed_by_names_and_contents(tmp_path: Path) -> None:
    folder = tmp_path / "series"
    folder.mkdir()
    (folder / "1.dcm").write_bytes(b"a")
    (folder / "2.dcm").write_bytes(b"b")
    first = sha256_of_input(folder)
    (folder / "2.dcm").write_bytes(b"c")
    assert sha256_of_input(folder) != first
    assert sha256_of_input(tmp_path / "absent") is None


def test_report_carries_the_lesion_table_and_the_adc_core_in_json_csv_and_on_the_page(tmp_path: Path) -> None:
    from LambdaSegmentLib.lesions import lesion_table
    from LambdaSegmentLib.reports.figure import lesion_table_text

    mask = two_lesion_mask(I_TOWARD_RIGHT)
    inside = np.asarray(mask.array) > 0
    probability = mask.with_array(np.where(inside, 0.9, 0.1).astype(np.float32))
    adc = mask.with_array(np.where(inside, 0.5, 0.8).astype(np.float32))  # 10^-3 mm^2/s: every lesion voxel is core
    report = build_report(case="c", mask=mask, sources={"dwi": "<memory>"}, model={"name": "m", "version": "1", "sha256": "ab" * 32},
                          device="cpu", seconds=1.0, threshold=0.5, probability=probability, adc=adc, low_confidence_below=0.95)
    table = lesion_table(mask, probability=probability, adc=adc, low_confidence_below=0.95)
    assert report["lesions"] == [row.as_dict() for row in table]
    assert report["adc_core_ml"] == pytest.approx(report["infarct_volume_ml"])  # all lesion voxels below 620e-6
    assert report["low_confidence_mean_probability"] == 0.95
    assert all(lesion["low_confidence"] for lesion in report["lesions"])  # mean 0.9 < 0.95
    assert "not a perfusion measure" in report["adc_core_note"] and "not a calibrated risk" in report["confidence_note"]
    write_report_csv(report, tmp_path / "r.csv")
    rows = read_csv(tmp_path / "r.csv")
    assert float(rows[0]["adc_core_ml"]) == pytest.approx(report["adc_core_ml"], abs=1e-4)
    assert [r["lesion_low_confidence"] for r in rows] == ["true", "true"]
    assert [float(r["lesion_adc_core_ml"]) for r in rows] == pytest.approx([row.adc_core_ml for row in table], abs=1e-4)
    assert [float(c) for c in rows[0]["lesion_centroid_ras_mm"].split(";")] == pytest.approx(table[0].centroid_ras_mm, abs=0.01)
    text = lesion_table_text(report)
    assert text.splitlines()[2].startswith(" 1*") and "low confidence" in text


def test_a_report_without_lesions_gives_one_csv_row_and_a_page_says_none(tmp_path: Path) -> None:
    from LambdaSegmentLib.reports.figure import lesion_table_text

    mask = two_lesion_mask(I_TOWARD_LEFT)
    empty = mask.with_array(np.zeros_like(mask.array))
    report = build_report(case="c", mask=empty, sources={"dwi": "<memory>"}, model={"name": "m", "version": "1", "sha256": "ab"},
                          device="cpu", seconds=1.0, threshold=0.5, adc=empty.with_array(np.full(empty.array.shape, 0.5, np.float32)))
    assert report["adc_core_ml"] == 0.0 and report["lesions"] == []
    write_report_csv(report, tmp_path / "r.csv")
    (row,) = read_csv(tmp_path / "r.csv")
    assert row["lesion_label"] == "" and row["adc_core_ml"] == "0.0000"
    assert lesion_table_text(report) == "Lesions: none"


def test_the_page_lists_at_most_the_ten_largest_lesions() -> None:
    from LambdaSegmentLib.lesions import lesion_table
    from LambdaSegmentLib.reports.figure import MAX_TABLE_LESIONS, lesion_table_text

    mask = Volume(np.zeros((3, 40, 40), np.uint8), (1.0, 1.0, 1.0))
    for n in range(12):
        mask.array[1, 3 * n : 3 * n + 2, 0 : n + 1] = 1  # 12 lesions of 2 (n + 1) voxels
    report = {"lesions": [row.as_dict() for row in lesion_table(mask)], "low_confidence_mean_probability": None}
    lines = lesion_table_text(report).splitlines()
    assert len(lines) == 2 + MAX_TABLE_LESIONS and "the 10 largest of 12" in lines[0]
    assert [int(line[:3].strip(" *")) for line in lines[2:]] == list(range(1, 11))
