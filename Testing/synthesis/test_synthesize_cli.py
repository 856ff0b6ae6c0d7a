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


def test_synthesize_takes_generator_ranges_as_json(tmp_path, capsys):
    """--synthesis passes any generator range (here the lesion's ADC) as train's --synthesis does;
    the same seed with other lesion ranges gives the same acquisition and a more restricted lesion."""
    common = ["--n", "1", "--seed", "22", "--in-plane-mm", "2", "2", "--slice-mm", "5", "5", "--kind", "territorial",
              "--volume-ml", "20", "40", "--adc-unit", "1e-3 mm2/s"]
    restricted = '{"relative_adc": [0.4, 0.41], "edge_relative_adc": [0.42, 0.43]}'
    normal = '{"relative_adc": [0.79, 0.8], "edge_relative_adc": [0.99, 1.0]}'
    assert main(["synthesize", str(tmp_path / "restricted"), *common, "--synthesis", restricted]) == 0
    assert main(["synthesize", str(tmp_path / "normal"), *common, "--synthesis", normal]) == 0
    medians, spacings = {}, {}
    for name in ("restricted", "normal"):
        prefix = tmp_path / name / "sub-synth0022" / "ses-0001" / "dwi" / "sub-synth0022_ses-0001"
        adc, mask = read_volume(f"{prefix}_adc.nii.gz"), read_volume(f"{prefix}_msk.nii.gz")
        medians[name] = float(np.median(adc.array[mask.array > 0]))
        spacings[name] = adc.spacing_mm
    assert spacings["restricted"] == spacings["normal"]  # the same acquisition
    assert medians["restricted"] < 0.7 * medians["normal"]

    capsys.readouterr()
    assert main(["synthesize", str(tmp_path / "bad"), "--n", "1", "--synthesis", '{"relative_adcc": [0.4, 0.7]}']) == 2
    assert "relative_adcc" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists() or not any((tmp_path / "bad").rglob("*.nii.gz"))
    with pytest.raises(SystemExit):  # not a JSON object: argparse's usage error
        main(["synthesize", str(tmp_path / "bad"), "--synthesis", "[0.4, 0.7]"])
