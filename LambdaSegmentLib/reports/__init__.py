"""Segmentation reports: the numbers (JSON, CSV) and a one-page overlay figure (PNG/PDF).

Volumes come from ``LambdaSegmentLib.lesions`` only.
"""

from .figure import write_report_figure
from .summary import DISCLAIMER, RADIOLOGICAL_CONVENTION, build_report, sha256_of_input
from .tables import (
    SUMMARY_COLUMNS,
    csv_text,
    read_csv,
    report_row,
    write_report_csv,
    write_report_json,
    write_text_atomically,
)

__all__ = [
    "DISCLAIMER",
    "RADIOLOGICAL_CONVENTION",
    "SUMMARY_COLUMNS",
    "build_report",
    "csv_text",
    "read_csv",
    "report_row",
    "sha256_of_input",
    "write_report_csv",
    "write_report_figure",
    "write_report_json",
    "write_text_atomically",
]
