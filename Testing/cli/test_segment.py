"""``lambdasegment segment`` end to end, through a subprocess, on phantom studies."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from LambdaSegmentLib.inference import load_model_package
from LambdaSegmentLib.io import read_volume
from LambdaSegmentLib.lesions import connected_lesions, hemisphere_volumes_ml, lesion_volume_ml, slice_areas_mm2

from lambdasegment_cli_helpers import StudyFiles, lambdasegment


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_same_grid(a: sitk.Image, b: sitk.Image) -> None:
    assert a.GetSize() == b.GetSize()
    np.testing.assert_allclose(a.GetSpacing(), b.GetSpacing(), atol=1e-6)
    np.testing.assert_allclose(a.GetOrigin(), b.GetOrigin(), atol=1e-5)
    np.testing.assert_allclose(a.GetDirection(), b.GetDirection(), atol=1e-6)


@pytest.mark.parametrize("study_name", ["axial_study", "oblique_study"])
def test_segment_writes_a_mask_on_the_dwi_grid_and_a_report_whose_numbers_are_the_lesion_functions(
    study_name: str, model_dir: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    study: StudyFiles = request.getfixturevalue(study_name)
    mask_path, report_path = tmp_path / "out" / "mask.nii.gz", tmp_path / "out" / "case.json"
    result = lambdasegment("segment", "--dwi", study.dwi, "--adc", study.adc, "--output", mask_path,
                           "--report", report_path, "--model", model_dir, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "UNTRAINED" in result.stderr

    assert_same_grid(sitk.ReadImage(str(mask_path)), sitk.ReadImage(str(study.dwi)))
    mask = read_volume(mask_path)
    assert set(np.unique(mask.array)) <= {0, 1}

    report = json.loads(report_path.read_text(encoding="utf-8"))
    lesions = connected_lesions(mask)
    assert report["infarct_volume_ml"] == pytest.approx(lesion_volume_ml(mask), abs=1e-9)
    assert report["lesion_count"] == len(lesions)
    assert report["largest_lesion_ml"] == pytest.approx(max((l.volume_ml for l in lesions), default=0.0), abs=1e-9)
    assert report["hemisphere_volumes_ml"] == pytest.approx(hemisphere_volumes_ml(mask), abs=1e-9)
    assert report["slice_areas_mm2"] == pytest.approx(slice_areas_mm2(mask), abs=1e-9)
    assert report["grid"]["slice_axis"] == 2
    assert {entry["role"]: entry["sha256"] for entry in report["input_files"]} == {
        "dwi": sha256(study.dwi), "adc": sha256(study.adc)}
    package = load_model_package(model_dir)
    assert report["model"]["sha256"] == package.sha256 and report["model"]["name"] == package.name
    assert report["device"] == "cpu" and report["seconds"] > 0
    assert report["disclaimer"] == "Research use only — not a medical device"

    with open(report_path.with_suffix(".csv"), newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == max(1, report["lesion_count"])  # one row per lesion
    row = rows[0]
    assert float(row["infarct_volume_ml"]) == pytest.approx(report["infarct_volume_ml"], abs=1e-4)
    assert int(row["lesion_count"]) == report["lesion_count"]
    assert row["dwi_sha256"] == sha256(study.dwi)
    assert len(row["slice_areas_mm2"].split(";")) == len(report["slice_areas_mm2"])
    assert report_path.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tta_and_uncertainty_write_the_disagreement_map_on_the_dwi_grid_and_the_table_uses_the_averaged_map(
    axial_study: StudyFiles, model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = lambdasegment("segment", "--dwi", axial_study.dwi, "--adc", axial_study.adc, "--output", out / "mask.nii.gz",
                           "--probability", out / "probability.nii.gz", "--uncertainty", out / "doubt.nii.gz",
                           "--report", out / "case.json", "--tta", "--model", model_dir, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "averaged over 3 flips" in result.stdout and "ADC core" in result.stdout
    assert_same_grid(sitk.ReadImage(str(out / "doubt.nii.gz")), sitk.ReadImage(str(axial_study.dwi)))
    doubt = np.asarray(read_volume(out / "doubt.nii.gz").array)
    assert doubt.min() >= 0.0 and doubt.max() <= 0.5 and doubt.max() > 0.0  # an untrained net is not flip-symmetric
    report = json.loads((out / "case.json").read_text(encoding="utf-8"))
    assert report["test_time_flips"] == {"averaged": True, "flips": ["none", "left-right", "anterior-posterior"]}
    assert report["outputs"]["uncertainty"] == str(out / "doubt.nii.gz")
    probability = np.asarray(read_volume(out / "probability.nii.gz").array, dtype=np.float64)
    mask = np.asarray(read_volume(out / "mask.nii.gz").array) > 0
    np.testing.assert_array_equal(mask, probability >= load_model_package(model_dir).threshold)
    if report["lesions"]:
        from LambdaSegmentLib.lesions import lesion_table

        table = lesion_table(read_volume(out / "mask.nii.gz"), probability=read_volume(out / "probability.nii.gz"))
        assert [l["mean_probability"] for l in report["lesions"]] == pytest.approx([r.mean_probability for r in table], abs=1e-6)


def test_without_flags_nothing_is_flipped_and_an_uncertainty_path_is_checked_first(
    axial_study: StudyFiles, model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = lambdasegment("segment", "--dwi", axial_study.dwi, "--adc", axial_study.adc, "--output", out / "mask.nii.gz",
                           "--report", out / "case.json", "--model", model_dir, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "case.json").read_text(encoding="utf-8"))["test_time_flips"] == {"averaged": False, "flips": ["none"]}
    bad = lambdasegment("segment", "--dwi", axial_study.dwi, "--adc", axial_study.adc, "--output", out / "mask2.nii.gz",
                        "--uncertainty", out / "doubt.txt", "--model", model_dir, "--device", "cpu")
    assert bad.returncode == 2 and "doubt.txt" in bad.stderr and not (out / "mask2.nii.gz").exists()


def test_slab_inference_through_the_cli_equals_one_pass(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A memory budget of 12 slices forces overlapping slabs (4-slice halo): the same probabilities
    (in-process through ``cli.main``; the engine-level test is in Testing/inference)."""
    from lambdasegment_cli_helpers import write_phantom

    from LambdaSegmentLib.cli import main

    from LambdaSegmentLib.inference.memory import bytes_per_slice, parameter_bytes
    from LambdaSegmentLib.inference.untrained import DEFAULT_PREPROCESSING, save_untrained_package
    from LambdaSegmentLib.io import load_study
    from LambdaSegmentLib.preprocessing import prepare_input

    # A coarse 4 mm model grid keeps the nine forward passes cheap.
    model_dir = save_untrained_package(tmp_path / "model", preprocessing={**DEFAULT_PREPROCESSING, "in_plane_spacing_mm": 4.0})
    study = write_phantom(tmp_path, "small", size_ijk=(40, 44, 16), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(0.0, 0.0, 10.0))
    package = load_model_package(model_dir)
    _c, num_slices, height, width = prepare_input(load_study(dwi=str(study.dwi), adc=str(study.adc)),
                                                  package.manifest["preprocessing"]).channels.shape
    budget_gb = (parameter_bytes(package.model) + 12.5 * bytes_per_slice(package.model, height, width)) / 2**30
    runs = {}
    for name, budget in (("one_pass", []), ("slabs", ["--memory-budget-gb", f"{budget_gb:.9f}"])):
        code = main([str(a) for a in ["segment", "--dwi", study.dwi, "--adc", study.adc,
                                      "--output", tmp_path / f"{name}.nii.gz", "--probability", tmp_path / f"{name}_p.nii.gz",
                                      "--model", model_dir, "--device", "cpu", *budget]])
        output = capsys.readouterr()
        assert code == 0, output.err
        runs[name] = output.out
    assert num_slices == 16
    assert "1 pass(es)" in runs["one_pass"] and "4 pass(es)" in runs["slabs"]  # cores of 12 - 2 x 4 slices
    one_pass = sitk.GetArrayFromImage(sitk.ReadImage(str(tmp_path / "one_pass_p.nii.gz")))
    slabs = sitk.GetArrayFromImage(sitk.ReadImage(str(tmp_path / "slabs_p.nii.gz")))
    np.testing.assert_allclose(slabs, one_pass, rtol=0, atol=1e-6)
    assert np.array_equal(read_volume(tmp_path / "one_pass.nii.gz").array, read_volume(tmp_path / "slabs.nii.gz").array)


def test_existing_output_is_never_overwritten(axial_study: StudyFiles, model_dir: Path, tmp_path: Path) -> None:
    mask_path = tmp_path / "mask.nii.gz"
    mask_path.write_bytes(b"the user's precious file")
    result = lambdasegment("segment", "--dwi", axial_study.dwi, "--adc", axial_study.adc, "--output", mask_path,
                           "--model", model_dir, "--device", "cpu")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert str(mask_path) in result.stderr and "already exists" in result.stderr
    assert mask_path.read_bytes() == b"the user's precious file"


def test_tampered_checkpoint_is_refused_with_exit_2(axial_study: StudyFiles, model_dir: Path, tmp_path: Path) -> None:
    import shutil

    tampered = tmp_path / "tampered"
    shutil.copytree(model_dir, tampered)
    weights = tampered / "weights.pt"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    result = lambdasegment("segment", "--dwi", axial_study.dwi, "--adc", axial_study.adc,
                           "--output", tmp_path / "mask.nii.gz", "--model", tampered)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert str(weights) in result.stderr and sha256(weights) in result.stderr and "SHA-256" in result.stderr
    assert not (tmp_path / "mask.nii.gz").exists()


@pytest.mark.parametrize("route", ["eadc", "b0+b1000"])
def test_other_input_routes_give_the_same_grid(route: str, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--eadc, and --b0 with --b1000, in place of --adc (in-process through cli.main)."""
    from LambdaSegmentLib.cli import main
    from LambdaSegmentLib.inference.phantom import make_phantom
    from LambdaSegmentLib.io import write_volume

    phantom = make_phantom(size_ijk=(32, 36, 8), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(0.0, 10.0, 0.0))
    eadc = np.exp(-1000.0 * phantom.adc.array)
    dwi_file = write_volume(phantom.dwi, tmp_path / "dwi.nii.gz")
    if route == "eadc":
        inputs = ["--dwi", dwi_file, "--eadc", write_volume(phantom.dwi.with_array(eadc.astype(np.float32)), tmp_path / "eadc.nii.gz")]
    else:
        b0 = np.where(eadc > 0, phantom.dwi.array / np.maximum(eadc, 1e-6), 0).astype(np.float32)
        inputs = ["--b1000", dwi_file, "--b0", write_volume(phantom.dwi.with_array(b0), tmp_path / "b0.nii.gz")]
    code = main([str(a) for a in ["segment", *inputs, "--output", tmp_path / "mask.nrrd", "--report", tmp_path / "r.json",
                                  "--model", model_dir, "--device", "cpu"]])
    assert code == 0, capsys.readouterr().err
    assert_same_grid(sitk.ReadImage(str(tmp_path / "mask.nrrd")), sitk.ReadImage(str(dwi_file)))
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["input"]["adc_unit_detected"] == route


def write_dicom_folder(volume, folder: Path, series_number: int) -> Path:
    """One int16 file per slice with position, orientation and spacing tags (what GDCM needs)."""
    folder.mkdir(parents=True)
    image = sitk.Cast(volume.to_sitk(), sitk.sitkInt16)
    d = image.GetDirection()
    series_uid = f"1.2.826.0.1.3680043.8.498.77.{series_number}"
    writer = sitk.ImageFileWriter()
    writer.KeepOriginalImageUIDOn()
    for k in range(image.GetDepth()):
        plane = image[:, :, k]
        for tag, value in {
            "0008|0060": "MR", "0008|0016": "1.2.840.10008.5.1.4.1.1.4", "0020|000d": "1.2.826.0.1.3680043.8.498.77",
            "0020|000e": series_uid, "0008|0018": f"{series_uid}.{k + 1}", "0020|0013": str(k + 1),
            "0020|0032": "\\".join(f"{p:.5f}" for p in image.TransformIndexToPhysicalPoint((0, 0, k))),
            "0020|0037": "\\".join(f"{v:.6f}" for v in (d[0], d[3], d[6], d[1], d[4], d[7])),
            "0028|0030": f"{volume.spacing_mm[1]:g}\\{volume.spacing_mm[0]:g}", "0018|0050": f"{volume.spacing_mm[2]:g}",
        }.items():
            plane.SetMetaData(tag, value)
        writer.SetFileName(str(folder / f"IM{k:04d}.dcm"))
        writer.Execute(plane)
    return folder


def test_dicom_folders_are_accepted_where_files_are(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from LambdaSegmentLib.cli import main
    from LambdaSegmentLib.inference.phantom import make_phantom

    phantom = make_phantom(size_ijk=(32, 36, 8), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(0.0, 0.0, 12.0))
    dwi = write_dicom_folder(phantom.dwi, tmp_path / "DWI", 1)
    adc = write_dicom_folder(phantom.adc.with_array(phantom.adc.array * 1e6), tmp_path / "ADC", 2)  # 10^-6 mm²/s, as scanners store it
    code = main([str(a) for a in ["segment", "--dwi", dwi, "--adc", adc, "--output", tmp_path / "mask.seg.nrrd",
                                  "--report", tmp_path / "r.json", "--model", model_dir, "--device", "cpu"]])
    assert code == 0, capsys.readouterr().err
    mask, dwi_volume = read_volume(tmp_path / "mask.seg.nrrd"), read_volume(dwi)
    assert mask.array.shape == dwi_volume.array.shape
    np.testing.assert_allclose(mask.spacing_mm, dwi_volume.spacing_mm, atol=1e-5)
    np.testing.assert_allclose(mask.origin_mm, dwi_volume.origin_mm, atol=1e-4)
    np.testing.assert_allclose(mask.direction, dwi_volume.direction, atol=1e-5)
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["input"]["adc_unit_detected"] == "1e-6 mm2/s"
    assert all(entry["sha256"] and len(entry["sha256"]) == 64 for entry in report["input_files"])


def segmented_with(model: Path, study: StudyFiles, tmp_path: Path) -> tuple[str, dict, dict[str, str]]:
    """``lambdasegment segment`` of ``study`` with package ``model``, which must succeed:
    (its stdout, the JSON report, the CSV report's row)."""
    report_path = tmp_path / "out" / "case.json"
    result = lambdasegment("segment", "--dwi", study.dwi, "--adc", study.adc, "--output", tmp_path / "out" / "mask.nii.gz",
                           "--report", report_path, "--model", model, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    with open(report_path.with_suffix(".csv"), newline="", encoding="utf-8") as stream:
        row = next(csv.DictReader(stream))
    return result.stdout, json.loads(report_path.read_text(encoding="utf-8")), row


def test_a_package_with_a_seed_network_says_so_and_its_report_records_both_networks(
    axial_study: StudyFiles, model_dir: Path, tmp_path: Path
) -> None:
    """A seeded package (issue 13's stage-1 seeds) through the CLI: the line says which seed
    network decided, and the report's JSON and CSV record its SHA-256 beside the package's."""
    from LambdaSegmentLib.inference.package import attach_seed_network
    from LambdaSegmentLib.inference.untrained import save_untrained_package
    import shutil

    seeded = shutil.copytree(model_dir, tmp_path / "seeded")
    seed_dir = save_untrained_package(tmp_path / "stage1", seed=1)
    attach_seed_network(seeded, seed_dir, 0.5)
    stdout, report, row = segmented_with(seeded, axial_study, tmp_path)
    seed = load_model_package(seed_dir)
    assert f"lesions kept where seed network {seed.name} {seed.version} detects one" in stdout
    assert report["model"]["sha256"] == load_model_package(model_dir).sha256
    assert report["model"]["seed_network"] == {"name": seed.name, "version": seed.version, "sha256": seed.sha256, "threshold": 0.5}
    assert row["seed_network_sha256"] == seed.sha256 and row["partner_network_sha256"] == ""


def test_a_package_with_a_partner_network_says_so_and_its_report_records_it(
    axial_study: StudyFiles, model_dir: Path, tmp_path: Path
) -> None:
    """A package whose probability is averaged with a partner network's (`lambdaunet-dwi-pair`'s layout): the
    line says so, and the report's JSON and CSV record the partner's SHA-256."""
    from LambdaSegmentLib.inference.package import attach_partner_network
    from LambdaSegmentLib.inference.untrained import save_untrained_package
    import shutil

    paired = shutil.copytree(model_dir, tmp_path / "paired")
    partner_dir = save_untrained_package(tmp_path / "partner", seed=1)
    attach_partner_network(paired, partner_dir)
    stdout, report, row = segmented_with(paired, axial_study, tmp_path)
    partner = load_model_package(partner_dir)
    assert f"averaged with partner network {partner.name} {partner.version}" in stdout
    assert report["model"]["partner_network"] == {"name": partner.name, "version": partner.version, "sha256": partner.sha256}
    assert "seed_network" not in report["model"]
    assert row["partner_network_sha256"] == partner.sha256 and row["seed_network_sha256"] == ""
