"""Tiny synthetic studies and a tiny LambdaUNet, so real Lightning runs take seconds on CPU."""

from __future__ import annotations

from pathlib import Path

from LambdaSegmentLib.io import write_mask, write_volume

# 4 mm in-plane, 128 mm field of view, 8 slices of 5 mm: 32 x 32 x 8 studies.
TINY_RANGES = {
    "in_plane_spacing_mm": 4.0,
    "fov_mm": 128.0,
    "coverage_mm": 40.0,
    "slice_thickness_mm": 5.0,
    "slice_gap_mm": 0.0,
    "oblique_probability": 0.0,
    "lesion_kind": "territorial",
    "lesion_volume_ml": (8.0, 30.0),
    "lesion_free_probability": 0.0,
    "skull_stripped": True,
}
TINY_PREPROCESSING = {
    "channels": ["eadc", "dwi"],
    "in_plane_spacing_mm": 4.0,
    "normalization": {"dwi": "brain_median", "eadc": "clip01"},
    "pad_multiple": 16,
}
TINY_MODEL = {"widths": [8, 16, 32], "key_dim": 4, "intra_depth": 2, "value_dim": 8}


def write_bids_case(root: Path, subject: str, seed: int) -> Path:
    """A synthetic study written in the ISLES'22 layout: rawdata/…/dwi/*_dwi|_adc, derivatives/…/*_msk."""
    from LambdaSegmentLib.synthesis import generate

    study = generate(seed, **TINY_RANGES)
    prefix = f"sub-{subject}_ses-0001"
    raw = root / "rawdata" / f"sub-{subject}" / "ses-0001" / "dwi"
    derived = root / "derivatives" / f"sub-{subject}" / "ses-0001"
    raw.mkdir(parents=True)
    derived.mkdir(parents=True)
    write_volume(study.dwi, raw / f"{prefix}_dwi.nii.gz")
    write_volume(study.adc, raw / f"{prefix}_adc.nii.gz")
    write_mask(study.mask, derived / f"{prefix}_msk.nii.gz")
    return root


