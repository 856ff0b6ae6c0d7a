"""Segmentation reports: the numbers (JSON, CSV) and a one-page overlay figure (PNG/PDF).

Volumes come from ``LambdaSegmentLib.lesions`` only.
"""

from .figure import write_report_figure
from .summary import DISCLAIMER, PLAUSIBLE_BRAIN_VOLUME_ML, RADIOLOGICAL_CONVENTION, brain_summary, build_report, sha256_of_input
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
    "PLAUSIBLE_BRAIN_VOLUME_ML",
    "RADIOLOGICAL_CONVENTION",
    "SUMMARY_COLUMNS",
    "brain_summary",
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
