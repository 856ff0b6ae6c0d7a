"""Labelled cases on disk: a BIDS / ISLES'22 folder or a CSV listing.

A case is a DWI (b≈1000 trace), an ADC or eADC map and an expert lesion mask.

- **Folder**: files named ``<prefix>_dwi.<ext>``, ``<prefix>_adc.<ext>`` (or
  ``_eadc``) and ``<prefix>_msk.<ext>`` anywhere below the root (``.nii.gz``, ``.nii``,
  ``.nrrd``, ``.mha``), joined by their prefix. This covers ISLES'22's
  ``rawdata/sub-*/ses-*/dwi/*_dwi.nii.gz`` + ``derivatives/sub-*/ses-*/*_msk.nii.gz``
  as well as flat ``sub-*/`` folders holding all three.
- **CSV**: a header with ``dwi``, ``adc`` or ``eadc``, ``mask`` and optionally ``name``;
  relative paths are relative to the CSV's folder.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from LambdaSegmentLib.errors import BadInputError

IMAGE_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".mha")
ROLES = ("dwi", "adc", "eadc", "msk")


@dataclass(frozen=True)
class LabelledCase:
    """Paths of one labelled case (``adc`` or ``eadc`` set, not both)."""

    name: str
    dwi: Path
    mask: Path
    adc: Path | None = None
    eadc: Path | None = None


def _split_role(path: Path) -> tuple[str, str] | None:
    """(prefix, role) of ``<prefix>_<role><suffix>``, or None for other files."""
    name = path.name
    for suffix in IMAGE_SUFFIXES:
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            prefix, _, role = stem.rpartition("_")
            if prefix and role in ROLES:
                return prefix, role
    return None


def find_labelled_cases(root: str | Path) -> list[LabelledCase]:
    """Every labelled case below ``root`` (or listed by ``root`` when it is a .csv), sorted by name.

    Raises:
        BadInputError: missing folder, a DWI without ADC/eADC or mask, a prefix found twice,
            or no case at all.
    """
    root = Path(root)
    if root.is_file() and root.suffix.lower() == ".csv":
        return read_case_listing(root)
    if not root.is_dir():
        raise BadInputError(root, "labelled data folder not found")
    found: dict[str, dict[str, Path]] = {}
    for path in sorted(root.rglob("*")):
        split = _split_role(path) if path.is_file() else None
        if split is None:
            continue
        prefix, role = split
        roles = found.setdefault(prefix, {})
        if role in roles:
            raise BadInputError(path, f"a second {role} image for case {prefix} (first: {roles[role]})")
        roles[role] = path
    cases = []
    for prefix, roles in sorted(found.items()):
        if "dwi" not in roles:
            continue
        if "msk" not in roles:
            raise BadInputError(roles["dwi"], f"no expert mask <{prefix}>_msk next to or below {root}")
        if "adc" not in roles and "eadc" not in roles:
            raise BadInputError(roles["dwi"], f"no ADC or eADC map for case {prefix}")
        # With both maps (as `lambdasegment synthesize` writes them) the ADC is used: the
        # eADC is derived from it, and a study takes one of the two.
        adc = roles.get("adc")
        cases.append(LabelledCase(prefix, roles["dwi"], roles["msk"], adc, None if adc else roles.get("eadc")))
    if not cases:
        raise BadInputError(root, "no labelled case found (expected <prefix>_dwi, <prefix>_adc and <prefix>_msk images)")
    return cases


def read_case_listing(csv_path: str | Path) -> list[LabelledCase]:
    """Cases listed in a CSV with columns dwi, adc or eadc, mask, [name]."""
    csv_path = Path(csv_path)
    try:
        with open(csv_path, newline="", encoding="utf-8-sig") as stream:  # UTF-8, with or without the BOM Excel writes
            rows = list(csv.DictReader(stream))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise BadInputError(csv_path, f"cannot read the case listing ({error})") from None
    cases = []
    for number, row in enumerate(rows, start=2):
        row = {key.strip().lower(): (value or "").strip() for key, value in row.items() if key}
        if not row.get("dwi") or not row.get("mask") or not (row.get("adc") or row.get("eadc")):
            raise BadInputError(csv_path, f"line {number}: needs dwi, mask and adc or eadc columns")

        def resolve(value: str) -> Path | None:
            if not value:
                return None
            path = Path(value)
            path = path if path.is_absolute() else csv_path.parent / path
            if not path.exists():
                raise BadInputError(csv_path, f"line {number}: file not found: {path}")
            return path

        dwi = resolve(row["dwi"])
        cases.append(
            LabelledCase(row.get("name") or dwi.name.split(".")[0], dwi, resolve(row["mask"]), resolve(row.get("adc", "")), resolve(row.get("eadc", "")))
        )
    if not cases:
        raise BadInputError(csv_path, "the case listing has no rows")
    return cases
