"""Writing reports as JSON and CSV, and the batch summary CSV."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from LambdaSegmentLib.errors import BadInputError

SUMMARY_COLUMNS = ("case", "volume_ml", "lesion_count", "seconds", "status", "error")


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
        "model_name": str(report["model"]["name"]),
        "model_version": str(report["model"]["version"]),
        "model_sha256": str(report["model"]["sha256"]),
        "device": report["device"],
        "seconds": f"{report['seconds']:.3f}",
    }
    for entry in report["input_files"]:
        row[f"{entry['role']}_file"] = entry["path"]
        row[f"{entry['role']}_sha256"] = entry["sha256"] or ""
    if "brain_volume_ml" in report:
        row["brain_volume_ml"] = f"{report['brain_volume_ml']:.1f}"
    row["slice_areas_mm2"] = ";".join(f"{area:.2f}" for area in report["slice_areas_mm2"])
    row["disclaimer"] = report["disclaimer"]
    return row


def write_report_json(report: Mapping[str, Any], path: str | Path, *, overwrite: bool = False) -> Path:
    return write_text_atomically(json.dumps(report, indent=2) + "\n", path, overwrite=overwrite)


def write_report_csv(report: Mapping[str, Any], path: str | Path, *, overwrite: bool = False) -> Path:
    row = report_row(report)
    return write_text_atomically(csv_text([row], list(row)), path, overwrite=overwrite)


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
