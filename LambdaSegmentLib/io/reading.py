"""Reading images from disk into :class:`Volume` objects, refusing anything unfit.

SimpleITK does the reading (NIfTI, NRRD, Slicer ``.seg.nrrd``, MHA and DICOM series
folders). What is ours is the checking around it, because SimpleITK accepts some
broken files without complaint (checked with SimpleITK 2.5):

- a truncated NIfTI file is read without an error (the missing voxels are garbage);
- NaN voxels in a NIfTI file come back as 0;
- a NIfTI voxel size of 0 comes back as 1 mm.

So NIfTI files are also opened with nibabel to check the header's voxel size, that all
voxel data are present, and that they are finite. Every problem becomes a
:class:`~LambdaSegmentLib.errors.BadInputError` naming the file.

ITK's own warnings are caught while reading (:mod:`.itk_messages`) and restated as
:class:`~LambdaSegmentLib.errors.InputWarning`s naming the file; a NIfTI whose qform and
sform disagree gets one that says which was used and how far apart they are
(:mod:`.nifti_forms`).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from ..errors import BadInputError, InputWarning
from .dicom import itk_reason as _itk_reason
from .dicom import read_dicom_series
from .itk_messages import caught_itk_messages, warn_about
from .nifti_forms import form_disagreement
from .volume import Volume

#: Voxel spacings outside this range (mm) are refused as corrupt geometry.
MIN_SPACING_MM = 0.01
MAX_SPACING_MM = 20.0

NIFTI_SUFFIXES = (".nii", ".nii.gz")
SEGMENTATION_SUFFIX = ".seg.nrrd"
ACCEPTED = "NIfTI (.nii, .nii.gz), NRRD (.nrrd, .seg.nrrd), MetaImage (.mha) or a DICOM series folder"
#: ITK's NIfTI warning that the form check of :mod:`.nifti_forms` states better (which form, how far).
SAID_BETTER_BY_FORM_CHECK = "unexpected scales in sform"


def read_volume(path: str | Path, *, series: str | None = None) -> Volume:
    """Read a 3D scalar image (or one segment of a ``.seg.nrrd``) with its exact geometry.

    Args:
        path: a NIfTI/NRRD/MHA file, a Slicer ``.seg.nrrd`` segmentation, or a folder
            holding a DICOM series.
        series: for a DICOM folder with several series, the SeriesInstanceUID or the
            series description to read; for a ``.seg.nrrd`` with several segments, the
            segment name (default: the one named "Infarct").

    Returns:
        The volume (array [k, j, i], LPS geometry), voxel type as stored.

    Raises:
        BadInputError: missing, unreadable, corrupted or non-image file; 2D or 4D image;
            several DICOM series and none chosen; NaN/Inf voxels; absurd spacing.
    """
    path = Path(path)
    if str(path).lower().endswith(SEGMENTATION_SUFFIX) and path.is_file():
        return _read_segmentation(path, segment_name=series)
    image, bvalues = read_image_and_bvalues(path, series=series)
    if bvalues is not None:
        raise BadInputError(
            path,
            f"the DICOM series holds {len(bvalues)} b-values ({', '.join(f'{b:g}' for b in bvalues)}) at every slice "
            "position; load it as the DWI of a study (load_study(dwi=...) / --dwi), which picks b0 and b1000",
        )
    return volume_from_image(image, path)


def read_image_and_bvalues(path: str | Path, *, series: str | None = None) -> tuple[sitk.Image, list[float] | None]:
    """Read and check a 3D or 4D scalar image as a SimpleITK image (the 4D case is for multi-b DWI).

    Checks everything :func:`read_volume` checks except the dimension being 3.

    Returns:
        The image, and the b-values (s/mm²) of its 4th axis when they come from DICOM tags
        (a series holding several b-values at each position); None otherwise.
    """
    path = Path(path)
    if not path.exists():
        raise BadInputError(path, "file not found")
    bvalues = None
    if path.is_dir():
        with caught_itk_messages() as messages:
            image, bvalues = read_dicom_series(path, series)
        warn_about(path, messages)
    elif series is not None:
        raise BadInputError(path, f"series={series!r} applies to DICOM folders (and segment names to .seg.nrrd files), not to this file")
    else:
        image = _read_file(path)
    check_image(image, path)
    return image, bvalues


def volume_from_image(image: sitk.Image, source: str | Path) -> Volume:
    """The checked 3D volume of an image read by :func:`read_image`; refuses 4D."""
    if image.GetDimension() == 4:
        raise BadInputError(
            source,
            f"is a 4D image with {image.GetSize()[3]} volumes; give its b-values "
            "(load_study(..., bvalues=...) / --bvalues) so b0 and b1000 can be picked",
        )
    return Volume.from_sitk(image)


def _read_file(path: Path) -> sitk.Image:
    nifti_header = _check_nifti_with_nibabel(path) if path.name.lower().endswith(NIFTI_SUFFIXES) else None
    with caught_itk_messages() as messages:
        try:
            image = sitk.ReadImage(str(path))
        except RuntimeError as error:
            raise BadInputError(path, f"cannot be read as an image ({ACCEPTED} are accepted): {_itk_reason(error)}") from None
    if nifti_header is not None and image.GetDimension() >= 3:  # a 2D image is refused by check_image next
        messages = [message for message in messages if SAID_BETTER_BY_FORM_CHECK not in message]
        disagreement = form_disagreement(nifti_header, image)
        if disagreement is not None:
            warnings.warn(InputWarning(path, disagreement), stacklevel=4)
    warn_about(path, messages)
    return image


def _check_nifti_with_nibabel(path: Path) -> Any:
    """Header voxel size, completeness and finiteness of a NIfTI file (SimpleITK hides all
    three); returns nibabel's header (for the qform/sform check)."""
    import nibabel as nib  # only NIfTI needs it
    from nibabel.openers import ImageOpener

    try:
        with ImageOpener(str(path)) as stream:
            # check=False keeps the header as stored (nibabel would silently turn a 0 voxel size into 1)
            header = nib.Nifti1Header.from_fileobj(stream, check=False)
        if header["magic"].item() not in (b"n+1", b"ni1"):
            raise ValueError("not a NIfTI-1 header")
        spatial_dims = int(min(max(int(header["dim"][0]), 1), 3))
        pixdim = np.asarray(header["pixdim"][1 : 1 + spatial_dims], dtype=np.float64)
    except Exception:  # not NIfTI-1 (NIfTI-2 or garbage): nib.load below decides
        pixdim = np.ones(1)
    if not np.all(np.isfinite(pixdim)) or np.any(pixdim == 0):
        raise BadInputError(path, f"absurd voxel spacing in the NIfTI header: {pixdim.tolist()} mm (0 is not a size)")
    try:
        image = nib.load(str(path))
        data = np.asanyarray(image.dataobj)
    except Exception as error:  # nibabel raises many types for damaged files
        raise BadInputError(path, f"is corrupted or not a NIfTI image: {error}".splitlines()[0]) from None
    if np.issubdtype(data.dtype, np.floating) or np.issubdtype(data.dtype, np.complexfloating):
        bad = ~np.isfinite(data)
        if bad.any():
            raise BadInputError(path, f"has {int(bad.sum())} NaN/Inf voxels")
    return image.header


def check_image(image: sitk.Image, source: Path) -> None:
    """Dimension, voxel type, spacing and finiteness checks shared by all formats."""
    if image.GetNumberOfComponentsPerPixel() != 1:
        raise BadInputError(source, f"has {image.GetNumberOfComponentsPerPixel()} components per voxel; a scalar image is needed")
    dimension = image.GetDimension()
    size = image.GetSize()
    if dimension < 3 or min(size[:3]) < 2:
        raise BadInputError(source, f"is a 2D image (size {tuple(size)}); a 3D volume with several slices is needed")
    if dimension > 4:
        raise BadInputError(source, f"is a {dimension}D image; 3D (or 4D multi-b DWI) is needed")
    spacing = np.asarray(image.GetSpacing()[:3], dtype=np.float64)
    if not np.all(np.isfinite(spacing)) or np.any(spacing < MIN_SPACING_MM) or np.any(spacing > MAX_SPACING_MM):
        raise BadInputError(
            source,
            f"absurd voxel spacing {tuple(round(float(s), 4) for s in spacing)} mm "
            f"(each must lie in {MIN_SPACING_MM}–{MAX_SPACING_MM} mm)",
        )
    array = sitk.GetArrayViewFromImage(image)
    if np.issubdtype(array.dtype, np.floating):
        bad = ~np.isfinite(array)
        if bad.any():
            raise BadInputError(source, f"has {int(bad.sum())} NaN/Inf voxels")


def _read_segmentation(path: Path, segment_name: str | None) -> Volume:
    """One segment of a Slicer ``.seg.nrrd`` as a uint8 mask (0/1) with the file's geometry."""
    import slicerio

    try:
        segmentation = slicerio.read_segmentation(str(path))
    except Exception as error:  # slicerio/pynrrd raise many types for damaged files
        raise BadInputError(path, f"cannot be read as a Slicer segmentation: {error}".splitlines()[0]) from None
    names = [segment.get("name", segment.get("id", "")) for segment in segmentation.get("segments", [])]
    if segment_name is None:
        if len(names) == 1:
            segment_name = names[0]
        elif "Infarct" in names:
            segment_name = "Infarct"
        else:
            raise BadInputError(path, f"holds {len(names)} segments, choose one by name: {', '.join(names) or 'none'}")
    if segment_name not in names:
        raise BadInputError(path, f"has no segment named {segment_name!r}; its segments: {', '.join(names) or 'none'}")
    mask_ijk = slicerio.segment_mask(segmentation, segment_name)
    ijk_to_lps = np.asarray(segmentation["ijkToLPS"], dtype=np.float64)
    spacing = np.linalg.norm(ijk_to_lps[:3, :3], axis=0)
    if np.any(spacing < MIN_SPACING_MM) or np.any(spacing > MAX_SPACING_MM):
        raise BadInputError(path, f"absurd voxel spacing {tuple(round(float(s), 4) for s in spacing)} mm")
    if min(mask_ijk.shape) < 2:
        raise BadInputError(path, f"is a 2D segmentation (size {mask_ijk.shape}); a 3D volume is needed")
    return Volume(
        np.ascontiguousarray(np.transpose(mask_ijk, (2, 1, 0))).astype(np.uint8),
        tuple(spacing),
        tuple(ijk_to_lps[:3, 3]),
        ijk_to_lps[:3, :3] / spacing,
    )
