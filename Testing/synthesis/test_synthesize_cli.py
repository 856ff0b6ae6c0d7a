"""``lambdasegment synthesize``: a BIDS-style folder the other tools read."""

from __future__ import annotations

import pytest
import numpy as np

from LambdaSegmentLib.cli import main
from LambdaSegmentLib.io import read_volume
from LambdaSegmentLib.io.study import load_study

pytestmark = pytest.mark.needs_atlas  # every study here is synthesised on the atlas


def test_synthesize_writes_readable_bids_studies_and_never_overwrites(tmp_path, capsys):
    args = [str(tmp_path), "--n", "1", "--seed", "21", "--in-plane-mm", "2", "2", "--slice-mm", "6", "6",
            "--kind", "territorial", "--volume-ml", "5", "20"]
    assert main(["synthesize", *args]) == 0
    folder = tmp_path / "sub-synth0021" / "ses-0001" / "dwi"
    prefix = folder / "sub-synth0021_ses-0001"
    for role in ("dwi", "adc", "eadc", "msk"):
        assert (folder / f"sub-synth0021_ses-0001_{role}.nii.gz").exists(), role
    study = load_study(dwi=f"{prefix}_dwi.nii.gz", adc=f"{prefix}_adc.nii.gz")  # unit detected from the file
    mask = read_volume(f"{prefix}_msk.nii.gz")
    assert study.dwi.spacing_mm[:2] == (2.0, 2.0) and mask.array.shape == study.dwi.array.shape
    assert set(np.unique(mask.array)) == {0, 1}
    before = (folder / "sub-synth0021_ses-0001_dwi.nii.gz").read_bytes()
    assert main(["synthesize", *args]) == 2  # refuses to overwrite, names the file
    assert "already exists" in capsys.readouterr().err
    assert (folder / "sub-synth0021_ses-0001_dwi.nii.gz").read_bytes() == before
