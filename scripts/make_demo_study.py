"""Make the embedded demo study: one small synthetic DWI + ADC pair with its true mask.

    .venv/bin/python scripts/make_demo_study.py [--overwrite]

Writes ``LambdaSegmentLib/resources/demo/sub-synth0001/ses-0001/dwi/``
``sub-synth0001_ses-0001_{dwi,adc,msk}.nii.gz`` (BIDS-style, like the ISLES'22 case),
stored the way many scanners export them: DWI and ADC as int16, ADC in 10^-6 mm^2/s.
Synthetic only (no patient data); about 1 MB. Needs the arterial atlas in ../shared.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.io import write_mask, write_volume  # noqa: E402
from LambdaSegmentLib.synthesis import generate  # noqa: E402

DEMO = REPO / "LambdaSegmentLib" / "resources" / "demo"
SEED = 2026
RANGES = {
    "in_plane_spacing_mm": 1.8, "slice_thickness_mm": 5.0, "slice_gap_mm": 1.0, "oblique_probability": 0.0,
    "fov_mm": 210.0, "coverage_mm": 140.0, "lesion_kind": "territorial", "lesion_volume_ml": (15.0, 40.0),
    "b_value": 1000.0, "adc_unit": "1e-6 mm2/s", "skull_stripped": False,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args()
    study = generate(SEED, **RANGES)
    folder = DEMO / "sub-synth0001" / "ses-0001" / "dwi"
    if folder.exists() and args.overwrite:
        shutil.rmtree(DEMO / "sub-synth0001")
    folder.mkdir(parents=True, exist_ok=True)
    prefix = folder / "sub-synth0001_ses-0001"
    dwi = study.dwi.array
    dwi_int = np.clip(np.rint(dwi * (1000.0 / np.percentile(dwi[study.tissue.array >= 2], 99))), 0, 32767).astype(np.int16)
    adc_int = np.clip(np.rint(study.adc.array), 0, 32767).astype(np.int16)  # already 1e-6 mm^2/s
    write_volume(study.dwi.with_array(dwi_int), f"{prefix}_dwi.nii.gz")
    write_volume(study.adc.with_array(adc_int), f"{prefix}_adc.nii.gz")
    write_mask(study.mask, f"{prefix}_msk.nii.gz")
    size = sum(p.stat().st_size for p in folder.iterdir())
    lesion = study.params["lesion"]
    print(f"{folder}: {study.dwi.size_ijk} voxels of {study.dwi.spacing_mm} mm, {lesion['kind']} lesion "
          f"{lesion['volume_ml']:.1f} mL in territories {lesion['territories']}, {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
