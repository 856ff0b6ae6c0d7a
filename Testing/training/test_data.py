"""Data: labelled folders / CSV listings, windows, synthetic studies on the fly, mixes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.training import PreparedCase, SegmentationDataModule, find_labelled_cases, load_labelled_case
from LambdaSegmentLib.training.windows import Interleaved, RealWindows, SyntheticWindows, cut_window

from lambdasegment_training_helpers import TINY_PREPROCESSING, TINY_RANGES


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_isles22_layout_joins_rawdata_and_derivatives_by_prefix(tmp_path: Path) -> None:
    raw = tmp_path / "rawdata" / "sub-strokecase0007" / "ses-0001" / "dwi"
    dwi = touch(raw / "sub-strokecase0007_ses-0001_dwi.nii.gz")
    adc = touch(raw / "sub-strokecase0007_ses-0001_adc.nii.gz")
    mask = touch(tmp_path / "derivatives" / "sub-strokecase0007" / "ses-0001" / "sub-strokecase0007_ses-0001_msk.nii.gz")
    touch(raw / "sub-strokecase0007_ses-0001_dwi.json")  # sidecars are ignored
    (case,) = find_labelled_cases(tmp_path)
    assert (case.name, case.dwi, case.adc, case.mask, case.eadc) == ("sub-strokecase0007_ses-0001", dwi, adc, mask, None)


def test_a_folder_with_both_adc_and_eadc_uses_the_adc(tmp_path: Path) -> None:
    """`lambdasegment synthesize` writes both maps; a study takes one, the measured ADC."""
    folder = tmp_path / "sub-synth0001" / "ses-0001" / "dwi"
    touch(folder / "sub-synth0001_ses-0001_dwi.nii.gz")
    adc = touch(folder / "sub-synth0001_ses-0001_adc.nii.gz")
    touch(folder / "sub-synth0001_ses-0001_eadc.nii.gz")
    touch(folder / "sub-synth0001_ses-0001_msk.nii.gz")
    (case,) = find_labelled_cases(tmp_path)
    assert (case.adc, case.eadc) == (adc, None)


def test_a_case_without_mask_is_refused_naming_the_file(tmp_path: Path) -> None:
    dwi = touch(tmp_path / "sub-1" / "sub-1_dwi.nii.gz")
    touch(tmp_path / "sub-1" / "sub-1_adc.nii.gz")
    with pytest.raises(BadInputError, match="no expert mask") as error:
        find_labelled_cases(tmp_path)
    assert str(dwi) in str(error.value)


def test_csv_listing_with_relative_paths(tmp_path: Path) -> None:
    for name in ("a_dwi.nii.gz", "a_eadc.nii.gz", "a_msk.nii.gz"):
        touch(tmp_path / "images" / name)
    listing = tmp_path / "cases.csv"
    listing.write_text("name,dwi,eadc,mask\ncase-a,images/a_dwi.nii.gz,images/a_eadc.nii.gz,images/a_msk.nii.gz\n")
    (case,) = find_labelled_cases(listing)
    assert case.name == "case-a" and case.eadc == tmp_path / "images" / "a_eadc.nii.gz" and case.adc is None
    listing.write_text("dwi,adc,mask\nimages/missing.nii.gz,images/a_eadc.nii.gz,images/a_msk.nii.gz\n")
    with pytest.raises(BadInputError, match="line 2: file not found"):
        find_labelled_cases(listing)


def test_csv_listing_is_read_as_utf8_with_or_without_a_bom_whatever_the_locale(tmp_path: Path, c_locale: None) -> None:
    """A listing saved by Excel ("CSV UTF-8": a BOM first) or by a script, naming non-ASCII
    paths, reads the same after the locale has been left at C."""
    for name in ("é_dwi.nii.gz", "é_adc.nii.gz", "é_msk.nii.gz"):
        touch(tmp_path / "Bilder für Studie" / name)
    listing = tmp_path / "cases.csv"
    text = "dwi,adc,mask,name\nBilder für Studie/é_dwi.nii.gz,Bilder für Studie/é_adc.nii.gz,Bilder für Studie/é_msk.nii.gz,Fall é\n"
    for encoded in (text.encode("utf-8"), text.encode("utf-8-sig")):
        listing.write_bytes(encoded)
        (case,) = find_labelled_cases(listing)
        assert case.name == "Fall é" and case.adc == tmp_path / "Bilder für Studie" / "é_adc.nii.gz"


@pytest.mark.needs_atlas
def test_real_case_goes_through_the_inference_preprocessing(labelled_folders: tuple[Path, Path]) -> None:
    (case,) = find_labelled_cases(labelled_folders[0])
    prepared = load_labelled_case(case, TINY_PREPROCESSING)
    c, t, h, w = prepared.channels.shape
    assert c == 2 and prepared.mask.shape == (t, h, w) and h % 16 == 0 and w % 16 == 0
    assert set(np.unique(prepared.mask)) == {0.0, 1.0}
    assert 0.0 <= prepared.channels[0].min() and prepared.channels[0].max() <= 1.0  # eADC clipped to 0-1


def small_case(slices: int) -> PreparedCase:
    channels = np.arange(2 * slices * 4 * 4, dtype=np.float32).reshape(2, slices, 4, 4)
    mask = np.zeros((slices, 4, 4), dtype=np.float32)
    mask[1, 1, 1] = 1
    return PreparedCase("small", channels, mask)


def test_real_windows_are_every_stride_one_window_of_eight_slices() -> None:
    windows = RealWindows([small_case(10), small_case(8)], window_slices=8, size_hw=(16, 16))
    assert len(windows) == 3 + 1
    starts = sorted((number, start) for number, start in windows.index)
    assert starts == [(0, 0), (0, 1), (0, 2), (1, 0)]
    item = windows[0]
    assert item["image"].shape == (2, 8, 16, 16) and item["mask"].shape == (1, 8, 16, 16)


def test_short_studies_and_small_slices_are_zero_padded() -> None:
    window = cut_window(small_case(3), 0, 8, (8, 8))
    image, mask = window["image"], window["mask"]
    assert image.shape == (2, 8, 8, 8)
    assert torch.equal(image[:, :3, 2:6, 2:6], torch.from_numpy(small_case(3).channels))  # centred in-plane
    assert image[:, 3:].abs().sum() == 0 and mask[0, 1, 3, 3] == 1


def test_interleaving_keeps_each_sources_order_and_proportion() -> None:
    first, second = list(range(2)), list(range(100, 106))
    mixed = [Interleaved(first, second)[i] for i in range(8)]
    assert sorted(mixed) == first + second
    assert [v for v in mixed if v < 100] == first and [v for v in mixed if v >= 100] == second
    assert mixed.index(0) < 4 <= mixed.index(1)  # spread out, not concatenated


@pytest.mark.needs_atlas
def test_synthetic_windows_are_deterministic_and_fresh_every_epoch() -> None:
    make = lambda epoch: SyntheticWindows(  # noqa: E731
        1, preprocessing=TINY_PREPROCESSING, windows_per_study=2, window_slices=8, size_hw=(32, 32), epoch=epoch, ranges=TINY_RANGES
    )
    first, again, later = make(0), make(0), make(1)
    assert len(first) == 2
    a, b = first[0], again[0]
    assert a["image"].shape == (2, 8, 32, 32) and a["mask"].shape == (1, 8, 32, 32)
    assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
    assert (first.study_seed(0), later.study_seed(0)) == (0, 1)
    assert not torch.equal(a["image"], later[0]["image"])


@pytest.mark.needs_atlas
def test_datamodule_mixes_real_and_synthetic_and_describes_its_data(labelled_folders: tuple[Path, Path]) -> None:
    train, val = labelled_folders
    datamodule = SegmentationDataModule(
        TINY_PREPROCESSING, data=[train], synthetic_studies=1, windows_per_study=2, val_data=[val],
        synthesis_ranges=TINY_RANGES, size_hw=(32, 32), batch_size=3, seed=5,
    )
    datamodule.setup("fit")
    dataset = datamodule.train_dataset(epoch=0)
    assert isinstance(dataset, Interleaved) and len(dataset) == len(datamodule.train_dataset(0).first) + 2
    batch = next(iter(datamodule.train_dataloader()))
    assert batch["image"].shape == (3, 2, 8, 32, 32)
    val_batch = next(iter(datamodule.val_dataloader()))
    assert val_batch["image"].shape[:2] == (1, 2) and val_batch["mask"].shape[1] == 1
    described = datamodule.description()
    assert described["real_training_cases"] == ["sub-train01_ses-0001"]
    assert described["validation_cases"] == ["sub-val01_ses-0001"]
    assert described["synthetic"]["seeds"][0] == 5 and described["synthetic"]["generator_version"]


@pytest.mark.needs_atlas
def test_training_and_validation_must_not_share_a_case(labelled_folders: tuple[Path, Path]) -> None:
    train, _ = labelled_folders
    datamodule = SegmentationDataModule(TINY_PREPROCESSING, data=[train], val_data=[train], size_hw=(32, 32))
    with pytest.raises(ValueError, match="both in training and validation"):
        datamodule.setup("fit")


def test_bright_artefacts_brighten_dwi_outside_the_lesion_only() -> None:
    from LambdaSegmentLib.training.augmentation import add_bright_artefacts

    image = torch.ones(2, 8, 32, 32)
    mask = torch.zeros(1, 8, 32, 32)
    mask[0, :, 10:20, 10:20] = 1
    window = {"image": image, "mask": mask}
    augmented = add_bright_artefacts(window, np.random.default_rng(3), dwi_channel=1, max_blobs=3, gain_range=(4.0, 4.0))
    assert torch.equal(augmented["image"][0], image[0])  # eADC (normal ADC) untouched
    assert torch.equal(augmented["mask"], mask)
    dwi = augmented["image"][1]
    assert (dwi >= 1).all() and dwi.max() > 3.0
    assert torch.equal(dwi[mask[0] > 0], torch.ones(int(mask.sum())))  # the lesion itself is unchanged
    assert torch.equal(window["image"], torch.ones(2, 8, 32, 32))  # the input window is not modified


def test_bright_field_brightens_a_broad_region_of_dwi_alone() -> None:
    from LambdaSegmentLib.training.augmentation import add_bright_field

    image = torch.full((2, 8, 48, 48), 0.5)
    image[1, :, :, :4] = 0.0  # outside the brain: stays zero
    image[1, :, 20:24, 20:24] = 3.9  # near the clip: stays within it
    mask = torch.zeros(1, 8, 48, 48)
    mask[0, 3:5, 10:14, 10:14] = 1
    window = {"image": image, "mask": mask}
    augmented = add_bright_field(window, np.random.default_rng(7), dwi_channel=1, gain_range=(1.0, 1.0), sigma_range_px=(8.0, 8.0))
    assert torch.equal(augmented["image"][0], image[0])  # eADC (the ADC) untouched
    assert torch.equal(augmented["mask"], mask)  # unlabelled: bright tissue with a normal ADC is not infarct
    dwi, before = augmented["image"][1], image[1]
    assert (dwi >= before).all() and (dwi[:, :, :4] == 0).all() and dwi.max() <= 4.0
    gain = dwi[before == 0.5] / 0.5
    assert 1.9 < float(gain.max()) <= 2.0  # gain 1: twice as bright at the centre
    assert float((gain > 1.1).float().mean()) > 0.1  # broad: a sizeable share of the window, not a dot
    assert torch.equal(window["image"], image) and image[1, 0, 0, 10] == 0.5  # the input window is not modified
