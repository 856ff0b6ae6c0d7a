"""The one-page report: an overlay montage of lesion-bearing slices and the numbers.

Slices are shown along the acquisition's slice axis, never resampled across it: the
image is only permuted/flipped to the nearest LPS orientation (``DICOMOrient``), which
puts patient left on image right and anterior (axial) or superior (coronal, sagittal)
at the top: the radiological convention, stated on the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import SimpleITK as sitk

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume

from .summary import ADC_CORE_NOTE, CONFIDENCE_NOTE, DISCLAIMER, RADIOLOGICAL_CONVENTION

MAX_PANELS = 12
MAX_TABLE_LESIONS = 10  # the page lists the largest lesions; the JSON and CSV list all
PAGE_INCHES = (8.27, 11.69)  # A4 portrait
PNG_COMPRESS_LEVEL = 3  # zlib level; Pillow's default 6 encodes the page ~2.5x slower for a ~5 % smaller file


def display_slices(volume: Volume, slice_axis: int) -> tuple[np.ndarray, float, tuple[str, str], bool]:
    """The volume as display panels in radiological convention.

    Returns (panels (n, rows, cols) along the slice axis, pixel aspect rows/cols,
    (label of image left, label of image right), whether panel order runs against the
    stored slice order).
    """
    oriented = sitk.DICOMOrient(volume.to_sitk(), "LPS")
    array = sitk.GetArrayFromImage(oriented)  # (S, P, L) = [k, j, i]
    spacing = oriented.GetSpacing()
    column = volume.direction[:, slice_axis]
    axis = int(np.argmax(np.abs(column)))  # 0 L, 1 P, 2 S after orientation
    reversed_order = bool(column[axis] < 0)
    if axis == 2:  # axial: rows P (anterior top), columns L (patient left on image right)
        return array, spacing[1] / spacing[0], ("R", "L"), reversed_order
    if axis == 1:  # coronal: rows S flipped so superior is at the top
        return np.moveaxis(array, 1, 0)[:, ::-1, :], spacing[2] / spacing[0], ("R", "L"), reversed_order
    return np.moveaxis(array, 2, 0)[:, ::-1, :], spacing[2] / spacing[1], ("A", "P"), reversed_order


def choose_slices(areas: np.ndarray, limit: int = MAX_PANELS) -> list[int]:
    """Lesion-bearing slices (all, or ``limit`` evenly spread); the middle ones if none."""
    bearing = np.flatnonzero(areas > 0)
    if bearing.size == 0:
        bearing = np.arange(len(areas))[len(areas) // 4 : max(len(areas) // 4 + 1, 3 * len(areas) // 4)]
    if bearing.size > limit:
        bearing = bearing[np.linspace(0, bearing.size - 1, limit).round().astype(int)]
    return [int(i) for i in bearing]


def numbers_text(report: Mapping[str, Any]) -> str:
    hemispheres = report["hemisphere_volumes_ml"]
    model = report["model"]
    lines = [
        f"Infarct volume: {report['infarct_volume_ml']:.2f} mL    lesions: {report['lesion_count']}    "
        f"largest: {report['largest_lesion_ml']:.2f} mL",
        f"Left hemisphere: {hemispheres.get('left', 0.0):.2f} mL    right hemisphere: {hemispheres.get('right', 0.0):.2f} mL",
        f"ADC core (ADC < 620 x 10^-6 mm²/s inside the predicted infarct): {_number(report.get('adc_core_ml'), ' mL')}",
        f"Model: {model['name']} {model['version']} (SHA-256 {str(model['sha256'])[:12]}…)    threshold {report['threshold']:g}",
        *([f"Partner network (probabilities averaged): {partner['name']} {partner['version']} (SHA-256 {str(partner['sha256'])[:12]}…)"]
          if (partner := model.get("partner_network")) else []),
        *([f"Seed network: {seed['name']} {seed['version']} (SHA-256 {str(seed['sha256'])[:12]}…)    detects at {seed['threshold']:g}"]
          if (seed := model.get("seed_network")) else []),
        f"Device: {report['device']}    time: {report['seconds']:.1f} s    {report['software']}    {report['created']}",
    ]
    for entry in report["input_files"]:
        digest = f"SHA-256 {entry['sha256'][:12]}…" if entry["sha256"] else "in memory, not hashed"
        lines.append(f"{entry['role']}: {Path(entry['path']).name}  ({digest})")
    return "\n".join(lines)


def _number(value: float | None, unit: str = "", digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def lesion_table_text(report: Mapping[str, Any], limit: int = MAX_TABLE_LESIONS) -> str:
    """The page's lesion table: the ``limit`` largest lesions, low-confidence ones marked "*"."""
    lesions = report["lesions"]
    if not lesions:
        return "Lesions: none"
    threshold = report.get("low_confidence_mean_probability")
    mark = (f"* = low confidence (mean probability < {threshold:.4g})" if threshold is not None
            else "low-confidence threshold not set for this model")
    shown = f"the {limit} largest of {len(lesions)}" if len(lesions) > limit else f"all {len(lesions)}"
    lines = [f"Lesions ({shown}; {mark})",
             f"{'#':>3s}  {'mL':>7s} {'core mL':>7s} {'slices':>7s}  {'side':5s} {'mean p':>6s} {'max p':>5s} "
             f"{'ADC 10^-6':>9s}  centroid RAS mm"]
    for lesion in lesions[:limit]:
        flag = "*" if lesion["low_confidence"] else " "
        slices = f"{lesion['first_slice']}-{lesion['last_slice']}"
        centre = ", ".join(str(int(round(c))) for c in lesion["centroid_ras_mm"])
        adc = "n/a" if lesion["mean_adc_1e6_mm2_s"] is None else f"{lesion['mean_adc_1e6_mm2_s']:.0f}"
        lines.append(
            f"{lesion['label']:>2d}{flag}  {lesion['volume_ml']:7.2f} {_number(lesion['adc_core_ml']):>7s} {slices:>7s}  "
            f"{lesion['hemisphere']:5s} {_number(lesion['mean_probability']):>6s} {_number(lesion['max_probability']):>5s} "
            f"{adc:>9s}  ({centre})"
        )
    return "\n".join(lines)


def write_report_figure(
    report: Mapping[str, Any], dwi: Volume, mask: Volume, path: str | Path, *, overwrite: bool = False
) -> Path:
    """Write the one-page report (PNG or PDF by suffix) of ``dwi`` with ``mask`` overlaid."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    path = Path(path)
    if path.suffix.lower() not in (".png", ".pdf"):
        raise BadInputError(path, "report figure must end in .png or .pdf")
    if path.exists() and not overwrite:
        raise BadInputError(path, "already exists; not overwriting it (use --overwrite)")
    slice_axis = int(report["grid"]["slice_axis"])
    images, aspect, (left_label, right_label), reversed_order = display_slices(dwi, slice_axis)
    labels, _, _, _ = display_slices(mask, slice_axis)
    areas = np.asarray(report["slice_areas_mm2"], dtype=float)
    stored = lambda n: len(images) - 1 - n if reversed_order else n  # noqa: E731 - panel -> stored slice
    shown = sorted(choose_slices(areas[[stored(n) for n in range(len(images))]]))

    figure = Figure(figsize=PAGE_INCHES, dpi=110)
    figure.text(0.5, 0.975, f"LambdaSegment — infarct segmentation report: {report['case']}",
                ha="center", va="top", fontsize=14, weight="bold")
    figure.text(0.5, 0.952, DISCLAIMER, ha="center", va="top", fontsize=12, color="darkred", weight="bold")
    training = str(report["model"].get("training_data") or "")
    if "UNTRAINED" in training.upper():
        figure.text(0.5, 0.93, "MODEL UNTRAINED, for plumbing only: the mask means nothing",
                    ha="center", va="top", fontsize=12, color="red", weight="bold")
    figure.text(0.04, 0.915, numbers_text(report), ha="left", va="top", fontsize=8.5, family="monospace")

    low, high = np.percentile(images, [1, 99.5]) if images.size else (0.0, 1.0)
    columns = 4
    rows = max(1, int(np.ceil(len(shown) / columns)))
    table = lesion_table_text(report)
    table_top = 0.80 - 0.012 * max(0, len(report["input_files"]) - 2)
    figure.text(0.04, table_top, table, ha="left", va="top", fontsize=7.5, family="monospace")
    top = table_top - 0.0115 * (table.count("\n") + 1) - 0.02
    grid = figure.add_gridspec(rows, columns, left=0.03, right=0.97, bottom=max(0.30, top - 0.2 * rows), top=top,
                               hspace=0.15, wspace=0.05)
    for panel, n in enumerate(shown):
        axes = figure.add_subplot(grid[panel // columns, panel % columns])
        axes.imshow(images[n], cmap="gray", vmin=low, vmax=high, aspect=aspect, interpolation="nearest")
        overlay = np.ma.masked_where(labels[n] == 0, labels[n])
        axes.imshow(overlay, cmap=ListedColormap(["red"]), alpha=0.4, aspect=aspect, interpolation="nearest")
        if labels[n].any():
            axes.contour(labels[n], levels=[0.5], colors="red", linewidths=0.6)
        axes.set_title(f"slice {stored(n)}: {areas[stored(n)]:.0f} mm²", fontsize=7.5)
        axes.text(0.02, 0.5, left_label, transform=axes.transAxes, color="yellow", fontsize=8, va="center")
        axes.text(0.98, 0.5, right_label, transform=axes.transAxes, color="yellow", fontsize=8, va="center", ha="right")
        axes.set_xticks([])
        axes.set_yticks([])
    chart = figure.add_axes((0.1, 0.125, 0.85, 0.12))
    chart.bar(np.arange(len(areas)), areas, color="firebrick", width=0.8)
    chart.set_xlabel("slice (as stored)", fontsize=8)
    chart.set_ylabel("infarct area (mm²)", fontsize=8)
    chart.tick_params(labelsize=7)
    chart.set_xlim(-0.5, len(areas) - 0.5)
    figure.text(0.5, 0.058, RADIOLOGICAL_CONVENTION + ".\nRed: predicted infarct. Slices along the acquisition's slice axis, "
                "numbered as stored; areas in mm².\n" + ADC_CORE_NOTE + ".\n" + CONFIDENCE_NOTE + ".",
                ha="center", va="center", fontsize=7.5, wrap=True)
    figure.text(0.5, 0.015, DISCLAIMER + ". Not for diagnosis or treatment decisions.", ha="center", fontsize=8.5, color="darkred")

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp{path.suffix}")
    png = path.suffix.lower() == ".png"
    figure.savefig(temporary, **({"pil_kwargs": {"compress_level": PNG_COMPRESS_LEVEL}} if png else {}))
    temporary.replace(path)
    return path
