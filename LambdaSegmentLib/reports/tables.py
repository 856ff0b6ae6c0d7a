"""Writing reports as JSON and CSV, and the batch summary CSV."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from LambdaSegmentLib.errors import BadInputError

SUMMARY_COLUMNS = ("case", "volume_ml", "lesion_count", "adc_core_ml", "seconds", "status", "error", "warnings")
#: Joins several warnings of one case in a CSV cell.
WARNINGS_SEPARATOR = " | "
#: Per-lesion columns of the report CSV (one row per lesion), from the report's ``lesions``.
LESION_COLUMNS = {
    "lesion_label": "label", "lesion_volume_ml": "volume_ml", "lesion_first_slice": "first_slice",
    "lesion_last_slice": "last_slice", "lesion_centroid_ras_mm": "centroid_ras_mm",
    "lesion_centroid_lps_mm": "centroid_lps_mm", "lesion_hemisphere": "hemisphere",
    "lesion_mean_probability": "mean_probability", "lesion_max_probability": "max_probability",
    "lesion_mean_adc_1e6_mm2_s": "mean_adc_1e6_mm2_s", "lesion_adc_core_ml": "adc_core_ml",
    "lesion_low_confidence": "low_confidence",
}


def optional_number(value: float | None, digits: int = 4) -> str:
    """A number for CSV, or "" when it is unknown (None)."""
    return "" if value is None else f"{value:.{digits}f}"


def lesion_cells(lesion: Mapping[str, Any] | None) -> dict[str, str]:
    """One lesion of the report as CSV cells (all empty for None: a report without lesions)."""
    if lesion is None:
        return {column: "" for column in LESION_COLUMNS}
    cells = {}
    for column, key in LESION_COLUMNS.items():
        value = lesion[key]
        if isinstance(value, list):
            cells[column] = ";".join(f"{c:.2f}" for c in value)
        elif isinstance(value, bool) or value is None:
            cells[column] = "" if value is None else str(value).lower()
        elif isinstance(value, float):
            cells[column] = optional_number(value)
        else:
            cells[column] = str(value)
    return cells


def write_text_atomically(text: str, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder (never half a file).

    Refuses an existing ``path`` unless ``overwrite`` (BadInputError naming it).
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise BadInputError(path, "already exists; not overwriting it (use --overwrite)")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def report_row(report: Mapping[str, Any]) -> dict[str, str]:
    """The report flattened to one CSV row (per-slice areas joined by ``;``)."""
    row = {
        "case": report["case"],
        "infarct_volume_ml": f"{report['infarct_volume_ml']:.4f}",
        "lesion_count": str(report["lesion_count"]),
        "largest_lesion_ml": f"{report['largest_lesion_ml']:.4f}",
        "left_hemisphere_ml": f"{report['hemisphere_volumes_ml'].get('left', 0.0):.4f}",
        "right_hemisphere_ml": f"{report['hemisphere_volumes_ml'].get('right', 0.0):.4f}",
        "adc_core_ml": optional_number(report.get("adc_core_ml")),
        "low_confidence_mean_probability": optional_number(report.get("low_confidence_mean_probability")),
        "model_name": str(report["model"]["name"]),
        "model_version": str(report["model"]["version"]),
        "model_sha256": str(report["model"]["sha256"]),
        # empty for a package without a seed network (every package before issue 13's seeded recipe)
        "seed_network_sha256": str(report["model"].get("seed_network", {}).get("sha256", "")),
        # empty for a package without a partner network (the default; lambdaunet-dwi-ensemble and -pair have one)
        "partner_network_sha256": str(report["model"].get("partner_network", {}).get("sha256", "")),
        "device": report["device"],
        "seconds": f"{report['seconds']:.3f}",
    }
    for entry in report["input_files"]:
        row[f"{entry['role']}_file"] = entry["path"]
        row[f"{entry['role']}_sha256"] = entry["sha256"] or ""
    if "brain_volume_ml" in report:
        row["brain_volume_ml"] = f"{report['brain_volume_ml']:.1f}"
    row["slice_areas_mm2"] = ";".join(f"{area:.2f}" for area in report["slice_areas_mm2"])
    row["warnings"] = WARNINGS_SEPARATOR.join(report.get("input", {}).get("warnings", []))
    row["disclaimer"] = report["disclaimer"]
    return row


def write_report_json(report: Mapping[str, Any], path: str | Path, *, overwrite: bool = False) -> Path:
    return write_text_atomically(json.dumps(report, indent=2) + "\n", path, overwrite=overwrite)


def write_report_csv(report: Mapping[str, Any], path: str | Path, *, overwrite: bool = False) -> Path:
    """The report as CSV: one row per lesion (the lesion table), the case's columns repeated on
    each; one row with empty lesion columns when there is no lesion."""
    row = report_row(report)
    rows = [{**row, **lesion_cells(lesion)} for lesion in report["lesions"] or [None]]
    return write_text_atomically(csv_text(rows, list(rows[0])), path, overwrite=overwrite)


def csv_text(rows: Iterable[Mapping[str, Any]], columns: list[str]) -> str:
    """CSV text with a header line."""
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def read_csv(path: str | Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))
