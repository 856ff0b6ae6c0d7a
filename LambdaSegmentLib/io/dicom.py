"""DICOM series folders: choosing a series, checking its slices, splitting b-values.

SimpleITK (GDCM) reads the files and builds the geometry from the image positions and
orientation, so a slice gap is part of the slice spacing. What is ours:

- choosing one of several series by SeriesInstanceUID or series description, or
  refusing with the list;
- refusing slices that do not form one evenly spaced stack (a missing slice would be
  read with one average spacing; several images at one position would be stacked as if
  they were slices), which SimpleITK does without an error;
- a series holding b0 and b1000 images at the same positions (Siemens "TRACEW" series do
  this) is split by b-value into a 4D image, with the b-values from the tags: the
  standard Diffusion b-value (0018,9087), else the Siemens (0019,100c), GE (0043,1039)
  or Philips (2001,1003) private tags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from ..errors import BadInputError

SERIES_DESCRIPTION_TAG = "0008|103e"
IMAGE_POSITION_TAG = "0020|0032"
IMAGE_ORIENTATION_TAG = "0020|0037"
#: Tags holding the b-value (s/mm²), in the order they are tried.
B_VALUE_TAGS = ("0018|9087", "0019|100c", "0043|1039", "2001|1003")
#: GE stores some b-values offset by 10⁹.
GE_B_VALUE_OFFSET = 1_000_000_000


def itk_reason(error: Exception) -> str:
    """The informative last part of an ITK/SimpleITK exception message, on one line."""
    text = str(error)
    match = re.search(r"(?:sitk::ERROR|ITK ERROR)[^:]*:\s*(.*)", text, flags=re.S)
    reason = match.group(1) if match else text
    reason = " ".join(line.strip() for line in reason.splitlines() if line.strip())
    return reason[:300]


@dataclass(frozen=True)
class _SliceFile:
    name: str
    position: tuple[float, float, float] | None
    normal: np.ndarray | None
    b_value: float | None


def read_dicom_series(folder: Path, series: str | None) -> tuple[sitk.Image, list[float] | None]:
    """One series of a folder as a 3D image, or as a 4D image with its b-values.

    Raises:
        BadInputError: no series; several and none (or an unknown one) chosen; slices
            that are not one evenly spaced stack per b-value; unreadable files.
    """
    chosen = _choose_series(folder, series)
    file_names = sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder), chosen)
    slices = [_slice_file(name) for name in file_names]
    positions = [s.position for s in slices if s.position is not None]
    unique_positions = {tuple(np.round(p, 3)) for p in positions}
    if len(unique_positions) == len(positions):
        _check_even_spacing(folder, slices)
        return _read_stack(folder, chosen, [s.name for s in slices]), None

    b_values = [s.b_value for s in slices]
    if any(b is None for b in b_values):
        raise BadInputError(
            folder,
            f"the DICOM series has {len(positions)} images at only {len(unique_positions)} slice positions and no b-value tags "
            "(several b-values or repetitions in one series); export b0 and b1000 as separate series or as 4D NIfTI with b-values",
        )
    groups: dict[float, list[_SliceFile]] = {}
    for slice_file in slices:
        groups.setdefault(float(slice_file.b_value), []).append(slice_file)
    volumes = []
    for b_value, members in sorted(groups.items()):
        member_positions = {tuple(np.round(m.position, 3)) for m in members}
        if len(member_positions) != len(members) or member_positions != unique_positions:
            raise BadInputError(
                folder,
                f"the DICOM images at b = {b_value:g} s/mm² do not form one stack over the series' {len(unique_positions)} "
                "slice positions (directional images or repetitions?); export the trace images b0 and b1000 separately",
            )
        _check_even_spacing(folder, members)
        volumes.append(_read_stack(folder, chosen, [m.name for m in _sorted_along_normal(members)]))
    return sitk.JoinSeries(volumes), sorted(groups)


def _choose_series(folder: Path, series: str | None) -> str:
    try:
        series_uids = list(sitk.ImageSeriesReader.GetGDCMSeriesIDs(str(folder)))
    except RuntimeError as error:
        raise BadInputError(folder, f"cannot be scanned for DICOM series: {itk_reason(error)}") from None
    if not series_uids:
        raise BadInputError(folder, "is a folder without a DICOM series (NIfTI, NRRD or MHA files are given by their file name)")
    descriptions = {uid: _series_description(folder, uid) for uid in series_uids}
    listing = "; ".join(f"{uid} ({descriptions[uid] or 'no description'})" for uid in series_uids)
    if series is None:
        if len(series_uids) > 1:
            raise BadInputError(folder, f"holds {len(series_uids)} DICOM series, choose one by UID or description: {listing}")
        return series_uids[0]
    matches = [uid for uid in series_uids if uid == series]
    if not matches:
        matches = [uid for uid in series_uids if descriptions[uid].strip().lower() == series.strip().lower()]
    if len(matches) != 1:
        problem = "no" if not matches else f"{len(matches)}"
        raise BadInputError(folder, f"{problem} DICOM series match {series!r}; the series are: {listing}")
    return matches[0]


def _series_description(folder: Path, uid: str) -> str:
    first = sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder), uid)[0]
    reader = sitk.ImageFileReader()
    reader.SetFileName(first)
    try:
        reader.ReadImageInformation()
    except RuntimeError:
        return ""
    return reader.GetMetaData(SERIES_DESCRIPTION_TAG).strip() if reader.HasMetaDataKey(SERIES_DESCRIPTION_TAG) else ""


def _numbers(text: str) -> list[float]:
    return [float(v) for v in text.replace("\\", " ").split()]


def _slice_file(name: str) -> _SliceFile:
    reader = sitk.ImageFileReader()
    reader.SetFileName(name)
    try:
        reader.ReadImageInformation()
    except RuntimeError:
        return _SliceFile(name, None, None, None)

    def tag(key: str) -> list[float] | None:
        if not reader.HasMetaDataKey(key):
            return None
        try:
            return _numbers(reader.GetMetaData(key))
        except ValueError:
            return None

    position = tag(IMAGE_POSITION_TAG)
    cosines = tag(IMAGE_ORIENTATION_TAG)
    normal = np.cross(cosines[:3], cosines[3:6]) if cosines and len(cosines) == 6 else None
    b_value = None
    for key in B_VALUE_TAGS:
        values = tag(key)
        if values:
            b_value = values[0] - GE_B_VALUE_OFFSET if values[0] >= GE_B_VALUE_OFFSET else values[0]
            break
    return _SliceFile(name, tuple(position[:3]) if position and len(position) >= 3 else None, normal, b_value)


def _distances_along_normal(slices: list[_SliceFile]) -> np.ndarray | None:
    normal = next((s.normal for s in slices if s.normal is not None and np.linalg.norm(s.normal) > 0), None)
    if normal is None or any(s.position is None for s in slices):
        return None
    return np.asarray([s.position for s in slices]) @ (normal / np.linalg.norm(normal))


def _sorted_along_normal(slices: list[_SliceFile]) -> list[_SliceFile]:
    distances = _distances_along_normal(slices)
    return slices if distances is None else [slices[i] for i in np.argsort(distances, kind="stable")]


def _check_even_spacing(folder: Path, slices: list[_SliceFile]) -> None:
    """Refuse a stack whose slice centres are not evenly spaced (a missing slice)."""
    distances = _distances_along_normal(slices)
    if distances is None or len(distances) < 3:
        return
    gaps = np.diff(np.sort(distances))
    if gaps.max() - gaps.min() > max(0.01 * float(np.median(gaps)), 0.01):
        raise BadInputError(
            folder,
            f"the DICOM slices are not evenly spaced (gaps from {gaps.min():.3g} to {gaps.max():.3g} mm): "
            "a missing slice, or images from several stacks in one series",
        )


def _read_stack(folder: Path, uid: str, file_names: list[str]) -> sitk.Image:
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames(file_names)
    try:
        return reader.Execute()
    except RuntimeError as error:
        raise BadInputError(folder, f"DICOM series {uid} cannot be read: {itk_reason(error)}") from None
