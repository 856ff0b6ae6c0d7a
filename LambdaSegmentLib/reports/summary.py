"""The numbers of a segmentation report, as one JSON-ready dict.

Every volume, count and area comes from ``LambdaSegmentLib.lesions`` (the single source
of volumes for the CLI, reports and Slicer); this module only gathers them with the
provenance a reader needs to trust them (input files with SHA-256, model and device).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from LambdaSegmentLib import __version__
from LambdaSegmentLib.io import Volume

DISCLAIMER = "Research use only — not a medical device"
ADC_CORE_NOTE = (
    "ADC core: voxels of the predicted infarct with ADC < 620 x 10^-6 mm²/s (diffusion criterion of "
    "thrombectomy trials); not a perfusion measure"
)
CONFIDENCE_NOTE = "Confidence: the model's mean output probability over a lesion, not a calibrated risk"
#: A brain volume (mL) outside this range usually means a wrong brain mask or a non-brain image.
PLAUSIBLE_BRAIN_VOLUME_ML = (800.0, 2000.0)
RADIOLOGICAL_CONVENTION = "Radiological convention: patient left on image right (R on image left, L on image right)"


def sha256_of_input(path: str | Path) -> str | None:
    """SHA-256 of an input file, or of a DICOM folder's files (relative name and bytes, sorted).

    None for in-memory inputs (``"<memory>"``) or paths that do not exist.
    """
    path = Path(path)
    if path.is_file():
        digest = hashlib.sha256()
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    if path.is_dir():
        digest = hashlib.sha256()
        for member in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(member.relative_to(path)).encode())
            digest.update(bytes.fromhex(sha256_of_input(member) or ""))
        return digest.hexdigest()
    return None


def build_report(
    *,
    case: str,
    mask: Volume,
    sources: Mapping[str, str],
    model: Mapping[str, Any],
    device: str,
    seconds: float,
    threshold: float,
    study_info: Mapping[str, Any] | None = None,
    probability: Volume | None = None,
    adc: Volume | None = None,
    low_confidence_below: float | None = None,
) -> dict[str, Any]:
    """The report of one segmented study.

    Args:
        case: case identifier shown on the report.
        mask: the binary infarct mask on the DWI grid (uint8, 1 = infarct).
        sources: role -> input path (``Study.sources``); files are hashed here.
        model: ``name``, ``version``, ``sha256`` and ``training_data`` of the model package, and
            its ``seed_network`` and ``partner_network`` when it has them (``ModelPackage.identity``).
        device: device that ran the model.
        seconds: wall time of the segmentation.
        threshold: probability threshold that made the mask.
        study_info: extra facts about the input (b-value, detected ADC unit), copied as is.
        probability, adc, low_confidence_below: for the per-lesion table
            (``lesions.lesion_table``): the model's probability and the ADC in 10^-3 mm^2/s
            on the mask's grid, and the manifest's low-confidence threshold.

    Returns:
        A JSON-serialisable dict; volumes in mL, areas in mm^2, positions in LPS mm.
    """
    from LambdaSegmentLib.lesions import hemisphere_volumes_ml, lesion_table, lesion_volume_ml, slice_areas_mm2, total_adc_core_ml
    from LambdaSegmentLib.preprocessing import find_slice_axis

    lesions = lesion_table(mask, probability=probability, adc=adc, low_confidence_below=low_confidence_below)
    slice_axis = int(find_slice_axis(mask))
    return {
        "case": case,
        "disclaimer": DISCLAIMER,
        "software": f"lambdasegment {__version__}",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "input_files": [
            {"role": role, "path": str(path), "sha256": sha256_of_input(path) if path != "<memory>" else None}
            for role, path in sources.items()
        ],
        "input": dict(study_info or {}),
        "model": {key: model[key] for key in ("name", "version", "sha256", "training_data", "seed_network", "partner_network") if key in model},
        "device": device,
        "seconds": round(float(seconds), 3),
        "threshold": float(threshold),
        "grid": {
            "size_ijk": list(mask.size_ijk),
            "spacing_mm": list(mask.spacing_mm),
            "slice_axis": slice_axis,
        },
        "infarct_volume_ml": float(lesion_volume_ml(mask)),
        "lesion_count": len(lesions),
        "largest_lesion_ml": float(max((lesion.volume_ml for lesion in lesions), default=0.0)),
        "hemisphere_volumes_ml": {side: float(v) for side, v in hemisphere_volumes_ml(mask).items()},
        "adc_core_ml": total_adc_core_ml(lesions),
        "adc_core_note": ADC_CORE_NOTE,
        "low_confidence_mean_probability": low_confidence_below,
        "confidence_note": CONFIDENCE_NOTE,
        "lesions": [lesion.as_dict() for lesion in lesions],
        "slice_areas_mm2": [float(a) for a in slice_areas_mm2(mask, slice_axis=slice_axis)],
    }


def brain_summary(brain_volume_ml: float, method: str) -> dict[str, Any]:
    """The report's brain-mask entries: ``brain_volume_ml``, ``brain_mask_method`` and
    ``warnings`` (a list, one line each) when the volume is outside
    :data:`PLAUSIBLE_BRAIN_VOLUME_ML`."""
    low, high = PLAUSIBLE_BRAIN_VOLUME_ML
    warnings = []
    if not low <= brain_volume_ml <= high:
        warnings.append(
            f"brain volume {brain_volume_ml:.0f} mL is outside the plausible {low:.0f}-{high:.0f} mL: the brain mask may be "
            "wrong, the image may not be a brain DWI, or the slices may cover only part of the brain; check the brain mask"
        )
    return {"brain_volume_ml": round(float(brain_volume_ml), 3), "brain_mask_method": method, "warnings": warnings}
