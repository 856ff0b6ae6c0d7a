"""scripts/regrid_package.py: the same network on another in-plane model grid (issue 13's rule 148)."""

from __future__ import annotations

from pathlib import Path

import pytest

from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import load_study
from LambdaSegmentLib.preprocessing.prepare import prepare_input

from lambdasegment_package_helpers import manifest_of


def test_the_copy_keeps_the_weights_and_changes_only_the_in_plane_grid(tmp_path: Path, load_script) -> None:
    source = save_untrained_package(tmp_path / "source", seed=0)
    script = load_script("scripts/regrid_package.py")
    assert script.main([str(source), str(tmp_path / "fine"), "--in-plane-mm", "1.5"]) == 0

    before, after = manifest_of(source), manifest_of(tmp_path / "fine")
    assert after["preprocessing"]["in_plane_spacing_mm"] == 1.5 and before["preprocessing"]["in_plane_spacing_mm"] == 2.0
    assert {k: v for k, v in after.items() if k != "preprocessing"} == {k: v for k, v in before.items() if k != "preprocessing"}
    assert load_model_package(tmp_path / "fine").sha256 == load_model_package(source).sha256

    # An oblique 4 x 4 x 6 mm study: 1.5 mm in plane, the same slices along the slice axis.
    phantom = make_phantom(size_ijk=(36, 40, 9), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(5.0, -10.0, 20.0))
    study = load_study(dwi=phantom.dwi, adc=phantom.adc)
    coarse, fine = (prepare_input(study, manifest_of(p)["preprocessing"]) for p in (source, tmp_path / "fine"))
    assert fine.grid.model_spacing_hw_mm == (1.5, 1.5) and coarse.grid.model_spacing_hw_mm == (2.0, 2.0)
    assert fine.channels.shape[1] == coarse.channels.shape[1] == 9
    assert fine.grid.model_hw[0] * 1.5 == pytest.approx(coarse.grid.model_hw[0] * 2.0, abs=2.0)


def test_an_existing_destination_an_odd_grid_or_a_tampered_source_is_refused(tmp_path: Path, load_script, capsys) -> None:
    source = save_untrained_package(tmp_path / "source", seed=0)
    script = load_script("scripts/regrid_package.py")
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    assert script.main([str(source), str(existing), "--in-plane-mm", "1.5"]) == 2
    assert "already exists" in capsys.readouterr().err and (existing / "notes.txt").read_text() == "mine"

    assert script.main([str(source), str(tmp_path / "odd"), "--in-plane-mm", "0.01"]) == 2
    assert "not a plausible model grid" in capsys.readouterr().err and not (tmp_path / "odd").exists()

    weights = source / manifest_of(source)["weights_file"]
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    assert script.main([str(source), str(tmp_path / "copy"), "--in-plane-mm", "1.5"]) == 2
    assert str(source) in capsys.readouterr().err and not (tmp_path / "copy").exists()
