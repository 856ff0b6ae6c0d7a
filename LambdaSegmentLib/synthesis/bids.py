"""Writing synthetic studies as a BIDS-style folder, named like the ISLES'22 case.

``OUT/sub-synthNNNN/ses-0001/dwi/sub-synthNNNN_ses-0001_{dwi,adc,eadc,msk}.nii.gz`` plus
a ``..._params.json`` sidecar (b-value, ADC unit, everything drawn) per study.
"""

from __future__ import annotations

import json
from pathlib import Path

from LambdaSegmentLib.io.writing import write_mask, write_volume

from .generator import SyntheticStudy


def study_folder(out_dir: Path, index: int) -> tuple[Path, str]:
    """The ``dwi`` folder and file-name prefix of study number ``index``."""
    subject = f"sub-synth{index:04d}"
    return out_dir / subject / "ses-0001" / "dwi", f"{subject}_ses-0001"


def write_study(study: SyntheticStudy, out_dir: str | Path, index: int, *, overwrite: bool = False) -> list[Path]:
    """Write one study (DWI, ADC in its stored unit, eADC, mask, params sidecar); returns the paths.

    Raises:
        BadInputError: a file exists and ``overwrite`` is False (nothing is overwritten).
    """
    folder, prefix = study_folder(Path(out_dir), index)
    folder.mkdir(parents=True, exist_ok=True)
    written = [
        write_volume(study.dwi, folder / f"{prefix}_dwi.nii.gz", overwrite=overwrite),
        write_volume(study.adc, folder / f"{prefix}_adc.nii.gz", overwrite=overwrite),
        write_volume(study.eadc, folder / f"{prefix}_eadc.nii.gz", overwrite=overwrite),
        write_mask(study.mask, folder / f"{prefix}_msk.nii.gz", overwrite=overwrite),
    ]
    sidecar = folder / f"{prefix}_params.json"
    sidecar.write_text(json.dumps(
        {"b_value": study.b_value, "adc_unit": study.adc_unit, "generator": "LambdaSegmentLib.synthesis", **study.params},
        indent=1, default=float,
    ) + "\n")
    return [*written, sidecar]
