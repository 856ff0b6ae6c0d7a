"""Writing volumes and lesion masks, atomically and without overwriting by accident.

Formats by file name: ``.nii``/``.nii.gz`` (NIfTI, SimpleITK converts LPS to RAS),
``.nrrd`` and ``.mha`` (SimpleITK), ``.seg.nrrd`` (a 3D Slicer segmentation written
with slicerio, one segment "Infarct" with a colour and its SNOMED CT terminology).
Every file is first written to a temporary file in the target folder and then moved
into place, so a reader never sees a half-written file and a failed write leaves the
old file untouched.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Callable

import numpy as np
import SimpleITK as sitk

from ..errors import BadInputError
from .volume import Volume

SEGMENT_NAME = "Infarct"
#: Display colour of the infarct segment (RGB 0–1).
SEGMENT_COLOR = (0.85, 0.25, 0.25)
#: 3D Slicer terminology entry: category "Morphologically Altered Structure" (SCT 49755003),
#: type "Infarct" (SCT 55641003), anatomic region "Brain" (SCT 12738006).
SEGMENT_TERMINOLOGY = {
    "contextName": "Segmentation category and type - 3D Slicer General Anatomy list",
    "category": ["SCT", "49755003", "Morphologically Altered Structure"],
    "type": ["SCT", "55641003", "Infarct"],
    "anatomicContextName": "Anatomic codes - DICOM master list",
    "anatomicRegion": ["SCT", "12738006", "Brain"],
}

IMAGE_SUFFIXES = (".nii", ".nii.gz", ".nrrd", ".mha")
MASK_SUFFIXES = (".nii", ".nii.gz", ".nrrd", ".seg.nrrd")


def write_volume(volume: Volume, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write a volume with its exact geometry (NIfTI, NRRD or MHA); returns the path.

    Raises:
        BadInputError: unsupported extension, existing file without ``overwrite``,
            missing folder, or a failed write.
    """
    path = Path(path)
    suffix = _suffix(path, IMAGE_SUFFIXES)
    if suffix is None or suffix == ".seg.nrrd":
        raise BadInputError(path, f"unsupported output format; use one of {', '.join(IMAGE_SUFFIXES)} (write_mask for .seg.nrrd)")
    image = volume.to_sitk()
    return _write_atomically(path, suffix, lambda temporary: sitk.WriteImage(image, str(temporary), True), overwrite)


def write_mask(mask: Volume, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write a binary lesion mask (uint8 0/1) exactly on its grid; returns the path.

    ``.seg.nrrd`` gets one segment named "Infarct" with colour and terminology; NIfTI
    and NRRD get a plain 0/1 label map.

    Raises:
        ValueError: the mask holds values other than 0 and 1.
        BadInputError: unsupported extension, existing file without ``overwrite``,
            missing folder, or a failed write.
    """
    path = Path(path)
    suffix = _suffix(path, MASK_SUFFIXES)
    if suffix is None:
        raise BadInputError(path, f"unsupported mask format; use one of {', '.join(MASK_SUFFIXES)}")
    values = np.asarray(mask.array)
    if values.dtype != bool and not np.all(np.isin(values, (0, 1))):
        raise ValueError("write_mask expects a binary mask (0/1); threshold probabilities first")
    binary = mask.with_array(values.astype(np.uint8))
    if suffix == ".seg.nrrd":
        return _write_atomically(path, suffix, lambda temporary: _write_segmentation(binary, temporary), overwrite)
    image = binary.to_sitk()
    return _write_atomically(path, suffix, lambda temporary: sitk.WriteImage(image, str(temporary), True), overwrite)


def _write_segmentation(mask: Volume, path: Path) -> None:
    import slicerio

    voxels_ijk = np.transpose(mask.array, (2, 1, 0))  # slicerio indexes voxels (i, j, k)
    segmentation = slicerio.create_segmentation(voxels_ijk.shape, mask.ijk_to_lps_matrix())
    slicerio.add_segment(
        segmentation,
        voxels_ijk.astype(bool),
        {"id": SEGMENT_NAME, "name": SEGMENT_NAME, "color": list(SEGMENT_COLOR), "terminology": SEGMENT_TERMINOLOGY},
    )
    slicerio.write_segmentation(str(path), segmentation)


def _suffix(path: Path, accepted: tuple[str, ...]) -> str | None:
    name = path.name.lower()
    matches = [suffix for suffix in accepted if name.endswith(suffix)]
    return max(matches, key=len) if matches else None


def _write_atomically(path: Path, suffix: str, write: Callable[[Path], None], overwrite: bool) -> Path:
    """Write through a temporary file in the same folder, then move it into place."""
    if path.exists() and not overwrite:
        raise BadInputError(path, "already exists; choose another name or allow overwriting (overwrite=True / --overwrite)")
    if path.is_dir():
        raise BadInputError(path, "is a folder, not a file name")
    if not path.parent.is_dir():
        raise BadInputError(path, f"the folder {path.parent} does not exist")
    temporary = path.parent / f".{path.name[: -len(suffix)]}.{uuid.uuid4().hex[:8]}.tmp{suffix}"
    try:
        write(temporary)
        if overwrite:
            os.replace(temporary, path)
        else:
            # A hard link fails if the name was taken meanwhile, so nothing is ever overwritten.
            try:
                os.link(temporary, path)
            except FileExistsError:
                raise BadInputError(path, "already exists; choose another name or allow overwriting (overwrite=True / --overwrite)") from None
            except OSError:  # file systems without hard links
                if path.exists():
                    raise BadInputError(path, "already exists; choose another name or allow overwriting") from None
                os.replace(temporary, path)
    except (RuntimeError, OSError) as error:
        raise BadInputError(path, f"cannot be written: {str(error).splitlines()[-1]}") from None
    finally:
        temporary.unlink(missing_ok=True)
    return path
