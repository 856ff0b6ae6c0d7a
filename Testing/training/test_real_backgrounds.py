"""Real studies as injection backgrounds: where infarcts may go, the signal equation, augmentation, the datamodule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import ndimage

from LambdaSegmentLib.training import SegmentationDataModule, find_labelled_cases
from LambdaSegmentLib.cli import main
from LambdaSegmentLib.training.prepared import PreparedCase
from LambdaSegmentLib.training.real_backgrounds import (
    CSF_ADC, DIMMING_FLOOR, RealBackgroundWindows, bright_rim_voxels, dim_real_lesions, inject_infarcts, load_background,
    real_lesion_voxels,
)
from LambdaSegmentLib.training.window_augmentation import augment_window, elastic_warp

from lambdasegment_training_helpers import TINY_PREPROCESSING, write_bids_case
from test_cli import train_args


@pytest.fixture(scope="module")
def background_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from LambdaSegmentLib.synthesis.template import atlas_path

    if not atlas_path().exists():
        pytest.skip(f"arterial atlas not present at {atlas_path()}")
    return write_bids_case(tmp_path_factory.mktemp("background"), "bg01", seed=11)


def loaded_backgrounds(folder: Path) -> list:
    """The folder's studies as the datamodule loads them for injection."""
    datamodule = SegmentationDataModule(TINY_PREPROCESSING, real_backgrounds=[folder], real_background_studies=1,
                                        windows_per_study=1, size_hw=(32, 32), seed=3)
    datamodule.setup()
    return datamodule.backgrounds


@pytest.mark.needs_atlas
def test_injection_stays_in_lesion_free_brain_tissue_and_keeps_the_real_lesion(background_folder: Path) -> None:
    (case,) = find_labelled_cases(background_folder)
    background = load_background(case)
    assert background.lesion.any()
    dwi = np.asarray(background.study.dwi.array)
    adc = np.asarray(background.study.adc.array)
    near_real = ndimage.binary_dilation(background.lesion, iterations=2)
    injected_any = False
    for seed in range(6):
        study, label, drawn = inject_infarcts(background, np.random.default_rng(seed), count=3)
        assert len(drawn) == 3
        new_dwi, new_adc = np.asarray(study.dwi.array), np.asarray(study.adc.array)
        injected = label & ~background.lesion
        changed = (new_dwi != dwi) | (new_adc != adc)
        injected_any |= bool(injected.any())
        assert (label[background.lesion]).all()  # the expert lesion stays labelled
        assert not (changed & ~background.brain).any() and not (injected & ~background.brain).any()
        assert not (changed & near_real).any() and not (injected & near_real).any()
        assert not (changed & (adc >= CSF_ADC)).any()
        if injected.any():  # a restricted lesion: lower ADC on the whole (older parts may pseudo-normalise)
            assert new_adc[injected].mean() < 0.95 * adc[injected].mean()
        assert study.dwi.spacing_mm == background.study.dwi.spacing_mm
        np.testing.assert_allclose(study.dwi.direction, background.study.dwi.direction)
    assert injected_any
    again = inject_infarcts(background, np.random.default_rng(3), count=3)
    first = inject_infarcts(background, np.random.default_rng(3), count=3)
    np.testing.assert_array_equal(np.asarray(again[0].dwi.array), np.asarray(first[0].dwi.array))
    np.testing.assert_array_equal(again[1], first[1])


def test_window_augmentation_keeps_ranges_shapes_and_a_binary_mask() -> None:
    rng = np.random.default_rng(0)
    image = torch.zeros(2, 8, 48, 48)
    image[0] = 1.0  # eADC background
    image[0, :, 10:38, 10:38] = 0.45
    image[1, :, 10:38, 10:38] = 1.0
    mask = torch.zeros(1, 8, 48, 48)
    mask[0, 3:5, 20:26, 20:26] = 1.0
    window = {"image": image, "mask": mask}
    for seed in range(20):
        out = augment_window(window, np.random.default_rng(seed), dwi_channel=1, eadc_channel=0)
        assert out["image"].shape == image.shape and out["mask"].shape == mask.shape
        assert set(torch.unique(out["mask"]).tolist()) <= {0.0, 1.0}
        assert 0.4 < out["mask"].sum() / mask.sum() < 1.6
        assert out["image"][1].min() >= 0 and out["image"][1].max() <= 4
        assert out["image"][0].min() >= 0 and out["image"][0].max() <= 1
        assert out["image"][0, :, 0, 0].min() > 0.9  # corners keep a background eADC, never 0
    a = augment_window(window, np.random.default_rng(7), dwi_channel=1, eadc_channel=0)
    b = augment_window(window, np.random.default_rng(7), dwi_channel=1, eadc_channel=0)
    assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
    assert torch.equal(window["image"], image)  # the input is not changed in place


@pytest.mark.needs_atlas
def test_datamodule_serves_augmented_real_background_windows(background_folder: Path) -> None:
    datamodule = SegmentationDataModule(
        TINY_PREPROCESSING, real_backgrounds=[background_folder], real_background_studies=2,
        windows_per_study=2, size_hw=(32, 32), batch_size=2, seed=3,
    )
    datamodule.setup()
    dataset = datamodule.train_dataset(epoch=0)
    assert len(dataset) == 4
    items = [dataset[i] for i in range(len(dataset))]
    assert all(item["image"].shape == (2, 8, 32, 32) and item["mask"].shape == (1, 8, 32, 32) for item in items)
    assert not torch.equal(items[0]["image"], datamodule.train_dataset(epoch=1)[0]["image"])  # fresh every epoch
    assert datamodule.description()["real_backgrounds"]["cases"] == ["sub-bg01_ses-0001"]
    with pytest.raises(ValueError, match="real backgrounds need"):
        SegmentationDataModule(TINY_PREPROCESSING, synthetic_studies=1, real_backgrounds=[background_folder])


@pytest.mark.needs_atlas
def test_a_dwi_asymmetry_channel_is_computed_from_the_injected_study(background_folder: Path, monkeypatch) -> None:
    """Real-background studies reach prepare_input after injection (and thick-slab averaging),
    so a derived channel sees the injected infarcts: the channel served is the injected study's."""
    from LambdaSegmentLib.preprocessing import prepare_input
    from LambdaSegmentLib.training import real_backgrounds

    contra = {**TINY_PREPROCESSING, "channels": ["eadc", "dwi", "dwi_asymmetry"]}
    prepared_studies = []
    original = real_backgrounds.prepare_with_masks

    def recording(name, study, mask, others, preprocessing):
        prepared_studies.append(study)
        return original(name, study, mask, others, preprocessing)

    monkeypatch.setattr(real_backgrounds, "prepare_with_masks", recording)
    datamodule = SegmentationDataModule(contra, real_backgrounds=[background_folder], real_background_studies=4,
                                        windows_per_study=1, size_hw=(32, 32), batch_size=1, seed=3)
    datamodule.setup()
    windows = datamodule.train_dataset(epoch=0)
    cases = [windows.make_study(s) for s in range(4)]
    background = datamodule.backgrounds[0]
    injected = [(case, study) for case, study in zip(cases, prepared_studies)
                if study.dwi.array.shape == background.study.dwi.array.shape
                and not np.array_equal(study.dwi.array, background.study.dwi.array)]
    assert injected, "no study of this seed got an infarct"
    for case, study in injected:
        assert case.channels.shape[0] == 3
        np.testing.assert_allclose(case.channels[2], prepare_input(study, contra).channels[2], atol=1e-5)
        unchanged = prepare_input(background.study, contra).channels[2]
        assert not np.allclose(case.channels[2], unchanged, atol=1e-3)


def test_bright_rims_are_unlabelled_bright_voxels_near_the_brain_edge_in_their_own_slice() -> None:
    """Rule 81's rim windows: which voxels count as a rim (2 mm grid, 8 mm deep, 2 x the median)."""
    t, h, w = 4, 40, 40
    yy, xx = np.mgrid[:h, :w]
    radius = np.hypot(yy - 20, xx - 20)
    dwi = np.where(radius < 15, 1.0, 0.0)[None].repeat(t, axis=0)
    dwi[:, (radius >= 13) & (radius < 15)] = 2.5  # a bright ring in the outer 4 mm of every slice
    dwi[:, 18:22, 18:22] = 3.0  # as bright, 10 mm deep or more: a lesion's place, not a rim
    mask = np.zeros((t, h, w), dtype=np.float32)
    mask[1, (radius >= 13) & (radius < 15) & (yy < 20)] = 1.0  # a labelled part of the ring stays a lesion
    case = PreparedCase("rims", np.stack([np.ones_like(dwi) * 0.5, dwi]).astype(np.float32), mask)
    rims = bright_rim_voxels(case, dwi_channel=1, in_plane_spacing_mm=2.0)
    found = np.zeros((t, h, w), dtype=bool)
    found[tuple(rims.T)] = True
    ring = (radius >= 13) & (radius < 15)
    assert found[0][ring].all() and found[3][ring].all()
    assert not found[:, 18:22, 18:22].any()
    assert not (found & (mask > 0)).any() and found[1][ring & (yy >= 20)].all()
    assert not found[:, radius >= 15].any()
    # depth is in-plane: a slice whose brain is one small disk is all edge, whatever its neighbours hold
    dwi[2] = np.where(radius < 3, 2.5, 0.0)
    small = bright_rim_voxels(PreparedCase("rims", np.stack([np.ones_like(dwi), dwi]).astype(np.float32), mask),
                              dwi_channel=1, in_plane_spacing_mm=2.0)
    assert (small[:, 0] == 2).sum() == int((radius < 3).sum())
    # the depth is in mm: on a 4 mm grid 8 mm is 2 voxels, so the ring's inner voxels (2-2.3 voxels deep) drop out
    coarse = bright_rim_voxels(case, dwi_channel=1, in_plane_spacing_mm=4.0)
    assert {tuple(v) for v in coarse} < {tuple(v) for v in rims}


@pytest.mark.needs_atlas
def test_bright_fields_brighten_dwi_alone_and_change_nothing_at_zero(background_folder: Path) -> None:
    backgrounds = loaded_backgrounds(background_folder)
    common = dict(studies=2, preprocessing=TINY_PREPROCESSING, windows_per_study=4, window_slices=8,
                  size_hw=(16, 16), base_seed=5, epoch=1, lesion_probability=0.8, dwi_channel=1)
    plain = RealBackgroundWindows(backgrounds, **common)
    off = RealBackgroundWindows(backgrounds, **common, bright_field_probability=0.0)
    always = RealBackgroundWindows(backgrounds, **common, bright_field_probability=1.0)
    for item in range(len(plain)):
        a, b, c = plain[item], off[item], always[item]
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
        assert torch.equal(c["mask"], a["mask"]) and torch.equal(c["image"][0], a["image"][0])  # labels and eADC as without
        assert (c["image"][1] >= a["image"][1]).all() and (c["image"][1] > a["image"][1]).any()  # the DWI brightened
    with pytest.raises(ValueError, match="bright_field_probability must be in"):
        RealBackgroundWindows(backgrounds, **common, bright_field_probability=1.5)


def test_elastic_warp_bends_every_slice_alike_and_keeps_image_and_mask_together() -> None:
    rng = np.random.default_rng(4)
    yy, xx = np.mgrid[:48, :48]
    disk = ((yy - 20) ** 2 + (xx - 26) ** 2 < 64).astype(np.float32)
    texture = rng.uniform(0.5, 1.5, (48, 48)).astype(np.float32)
    image = torch.from_numpy(np.stack([np.stack([disk] * 3), np.stack([texture] * 3)]))  # (c 2, t 3, h, w)
    window = {"image": image, "mask": torch.from_numpy(disk[None, None].repeat(3, axis=1))}
    bent = elastic_warp(window, np.random.default_rng(7), spacing_mm=2.0)
    assert bent["image"].shape == image.shape and bent["mask"].shape == window["mask"].shape
    assert set(torch.unique(bent["mask"]).tolist()) <= {0.0, 1.0}
    for k in (1, 2):  # one in-plane field for every slice, never across slices
        assert torch.equal(bent["image"][:, k], bent["image"][:, 0]) and torch.equal(bent["mask"][:, k], bent["mask"][:, 0])
    # the mask goes where the image goes: channel 0 is the mask's own picture, sampled the same way
    assert torch.equal(bent["mask"][0], (bent["image"][0] >= 0.5).float())
    assert not torch.equal(bent["mask"], window["mask"]) and not torch.equal(bent["image"][1], image[1])
    assert bent["image"][1].min() >= texture.min() - 1e-6 and bent["image"][1].max() <= texture.max() + 1e-6  # bilinear: no overshoot
    # the displacement is in mm: a field of SD 0 leaves the window as it was
    still = elastic_warp(window, np.random.default_rng(7), spacing_mm=2.0, displacement_mm=(0.0, 0.0))
    assert torch.allclose(still["image"], image, atol=1e-5) and torch.equal(still["mask"], window["mask"])
    with pytest.raises(ValueError, match="spacing_mm"):
        elastic_warp(window, rng, spacing_mm=0.0)


@pytest.mark.needs_atlas
def test_elastic_windows_bend_their_share_and_leave_every_other_window_as_it_was(background_folder: Path) -> None:
    backgrounds = loaded_backgrounds(background_folder)
    common = dict(studies=2, preprocessing=TINY_PREPROCESSING, windows_per_study=4, window_slices=8,
                  size_hw=(16, 16), base_seed=5, epoch=1, lesion_probability=0.8, dwi_channel=1,
                  bright_field_probability=0.5)
    plain = RealBackgroundWindows(backgrounds, **common)
    off = RealBackgroundWindows(backgrounds, **common, elastic_probability=0.0)
    half = RealBackgroundWindows(backgrounds, **common, elastic_probability=0.5)
    bent = 0
    for item in range(len(plain)):
        a, b, c = plain[item], off[item], half[item]
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
        same = torch.equal(a["image"], c["image"]) and torch.equal(a["mask"], c["mask"])
        bent += not same
    assert 0 < bent < len(plain)  # a share, drawn on its own stream: the unbent windows (bright fields too) as without
    with pytest.raises(ValueError, match="elastic_probability must be in"):
        RealBackgroundWindows(backgrounds, **common, elastic_probability=1.5)
    with pytest.raises(ValueError, match="in_plane_spacing_mm"):
        RealBackgroundWindows(backgrounds, **{**common, "preprocessing": {**TINY_PREPROCESSING, "in_plane_spacing_mm": None}},
                              elastic_probability=0.5)


@pytest.mark.needs_atlas
def test_bright_cortex_raises_grey_matter_dwi_keeps_adc_and_labels_and_changes_nothing_at_zero(background_folder: Path) -> None:
    from LambdaSegmentLib.synthesis.fields import sample_channels
    from LambdaSegmentLib.synthesis.template import load_tissue_template
    from LambdaSegmentLib.training.real_backgrounds import brighten_grey_matter

    (background,) = loaded_backgrounds(background_folder)
    brightened = brighten_grey_matter(background, background.study, 0.5)
    before, after = np.asarray(background.study.dwi.array), np.asarray(brightened.dwi.array)
    assert np.array_equal(np.asarray(brightened.adc.array), np.asarray(background.study.adc.array))
    assert np.array_equal(np.asarray(brightened.eadc.array), np.asarray(background.study.eadc.array))
    assert np.array_equal(after[~background.brain], before[~background.brain])  # never outside the brain
    grey = sample_channels(torch.from_numpy(np.ascontiguousarray(load_tissue_template().gm))[None],
                           background.template_ijk.reshape(3, -1))[0].reshape(before.shape)
    ratio = after[background.brain & (before > 0)] / before[background.brain & (before > 0)]
    assert np.all(ratio >= 1.0 - 1e-6) and np.all(ratio <= 1.5 + 1e-5)
    cortex, white = background.brain & (grey > 0.7), background.brain & (grey < 0.1)
    assert cortex.any() and white.any()
    assert np.median(after[cortex] / np.maximum(before[cortex], 1e-6)) > 1.35  # the grey matter by about 1 + 0.5 x its fraction
    assert np.median(after[white] / np.maximum(before[white], 1e-6)) < 1.05  # the white matter hardly
    common = dict(studies=3, preprocessing=TINY_PREPROCESSING, windows_per_study=2, window_slices=8,
                  size_hw=(16, 16), base_seed=5, epoch=1, lesion_probability=0.8)
    plain = RealBackgroundWindows([background], **common)
    off = RealBackgroundWindows([background], **common, bright_cortex_probability=0.0)
    always = RealBackgroundWindows([background], **common, bright_cortex_probability=1.0)
    for study in range(3):
        a, b, c = plain.make_study(study), off.make_study(study), always.make_study(study)
        assert np.array_equal(a.channels, b.channels) and np.array_equal(a.mask, c.mask)  # labels as without
        assert np.allclose(c.channels[0], a.channels[0])  # eADC as without
        inside = a.channels[1] > 0.05  # DWI in brain-median units: the grey matter rises against the rest
        ratio = c.channels[1][inside] / a.channels[1][inside]
        assert np.percentile(ratio, 95) / np.percentile(ratio, 5) > 1.1
    with pytest.raises(ValueError, match="bright_cortex_probability must be in"):
        RealBackgroundWindows([background], **common, bright_cortex_probability=-0.1)


@pytest.mark.needs_atlas
def test_rim_windows_hold_a_rim_and_change_nothing_at_zero(background_folder: Path) -> None:
    backgrounds = loaded_backgrounds(background_folder)
    common = dict(studies=2, preprocessing=TINY_PREPROCESSING, windows_per_study=6, window_slices=8,
                  size_hw=(16, 16), base_seed=5, epoch=1, lesion_probability=0.8)
    plain = RealBackgroundWindows(backgrounds, **common)
    off = RealBackgroundWindows(backgrounds, **common, rim_probability=0.0, dwi_channel=1)
    always = RealBackgroundWindows(backgrounds, **common, rim_probability=1.0, dwi_channel=1)
    for item in range(len(plain)):
        a, b = plain[item], off[item]
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
    for item in range(len(always)):
        study = always.make_study(item // 6)
        rims = bright_rim_voxels(study, dwi_channel=1, in_plane_spacing_mm=4.0)
        assert len(rims), "the synthetic background has no bright rim to test with"
        window = always[item]
        assert ((window["image"][1] >= 2.0) & (window["mask"][0] == 0)).any()  # 16 x 16 of a larger slice: the rim came with it
    again = RealBackgroundWindows(backgrounds, **common, rim_probability=1.0, dwi_channel=1)
    assert torch.equal(again[3]["image"], always[3]["image"])  # deterministic per seed
    with pytest.raises(ValueError, match="rim_probability must be in"):
        RealBackgroundWindows(backgrounds, **common, rim_probability=1.5, dwi_channel=1)
    with pytest.raises(ValueError, match="brain-median units"):
        RealBackgroundWindows(backgrounds, **{**common, "preprocessing": {
            **TINY_PREPROCESSING, "normalization": {"dwi": "none", "eadc": "clip01"}}}, rim_probability=0.3, dwi_channel=1)


def test_real_lesion_voxels_lists_each_component_once_whatever_its_size() -> None:
    real = np.zeros((6, 12, 12), dtype=bool)
    real[1:5, 2:8, 2:8] = True  # one large lesion (144 voxels)
    real[0, 10, 10] = True  # two one-voxel emboli
    real[5, 0, 11] = True
    real[2, 10, 0] = real[3, 11, 1] = True  # diagonal neighbours: one 26-connected lesion
    lesions = real_lesion_voxels(real)
    assert sorted(len(v) for v in lesions) == [1, 1, 2, 144]
    joined = np.concatenate(lesions)
    assert len({tuple(v) for v in joined}) == int(real.sum()) and real[tuple(joined.T)].all()
    assert real_lesion_voxels(np.zeros((2, 3, 3), dtype=bool)) == []


def crop_holding(case: PreparedCase, window: dict, real: np.ndarray, slices: int, size_hw: tuple[int, int]) -> bool:
    """Whether ``window`` (unaugmented) is a crop of ``case`` whose extent holds a ``real`` voxel."""
    _c, t, h, w = case.channels.shape
    image = window["image"].numpy()
    for start in range(max(1, t - slices + 1)):
        for oh in range(max(1, h - size_hw[0] + 1)):
            for ow in range(max(1, w - size_hw[1] + 1)):
                n = min(slices, t - start)
                part = case.channels[:, start:start + n, oh:oh + size_hw[0], ow:ow + size_hw[1]]
                if part.shape[2:] == image.shape[2:] and np.array_equal(part, image[:, :n]):
                    if real[start:start + n, oh:oh + size_hw[0], ow:ow + size_hw[1]].any():
                        return True
    return False


@pytest.mark.needs_atlas
def test_real_lesion_windows_hold_a_real_lesion_and_leave_the_other_windows_alone(background_folder: Path) -> None:
    """A share of windows around the background's own expert lesions (issue 13), drawn
    from a stream of their own, so a window that does not draw one is the window without the option."""
    backgrounds = loaded_backgrounds(background_folder)
    size_hw = (16, 16)
    common = dict(studies=2, preprocessing=TINY_PREPROCESSING, windows_per_study=6, window_slices=8,
                  size_hw=size_hw, base_seed=5, epoch=1, lesion_probability=0.0)  # plain windows land anywhere
    plain = RealBackgroundWindows(backgrounds, **common)
    off = RealBackgroundWindows(backgrounds, **common, real_lesion_probability=0.0)
    half = RealBackgroundWindows(backgrounds, **common, real_lesion_probability=0.5)
    always = RealBackgroundWindows(backgrounds, **common, real_lesion_probability=1.0)
    same = changed = 0
    for item in range(len(plain)):
        a, b, c = plain[item], off[item], half[item]
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
        if torch.equal(a["image"], c["image"]):
            same += 1
        else:
            changed += 1
    assert same and changed  # about half the windows drawn again, the rest untouched
    for study in range(2):
        case, real = always.make_study_with_real_lesions(study)
        assert real.any() and not (real & (case.mask == 0)).any()  # the real lesions are a part of the label
        assert np.array_equal(case.mask, plain.make_study(study).mask)  # the study itself is unchanged
        for window in range(6):
            assert crop_holding(case, always[study * 6 + window], real, 8, size_hw)
    again = RealBackgroundWindows(backgrounds, **common, real_lesion_probability=1.0)
    assert torch.equal(again[3]["image"], always[3]["image"])  # deterministic per seed
    with pytest.raises(ValueError, match="real_lesion_probability must be in"):
        RealBackgroundWindows(backgrounds, **common, real_lesion_probability=1.5)


def ring_ratio(study, component: np.ndarray, ring: np.ndarray) -> float:
    dwi = np.asarray(study.dwi.array, dtype=np.float64)
    return float(np.median(dwi[component]) / np.median(dwi[ring]))


def with_small_embolus(background):
    """(the background with a 6-voxel embolus added to its study and its expert mask, as bright
    and restricted as 0003's satellites, the embolus, its ring)."""
    from dataclasses import replace as replaced

    from LambdaSegmentLib.io.units import eadc_from_adc

    study = background.study
    dwi = np.asarray(study.dwi.array, dtype=np.float64).copy()
    adc = np.asarray(study.adc.array, dtype=np.float64).copy()
    brain = background.brain & (adc < CSF_ADC)
    k, j, i = (int(np.median(a)) for a in np.nonzero(brain & ~ndimage.binary_dilation(background.lesion, iterations=6)))
    small = np.zeros_like(brain)
    small[k, j:j + 2, i:i + 3] = True  # 0.48 mL of these 4 x 4 x 5 mm voxels
    small &= brain
    assert 4 <= small.sum() and small.sum() * study.dwi.voxel_volume_mm3 / 1000.0 <= 0.5
    dwi[small] *= 1.8
    adc[small] *= 0.7
    adc_volume = study.adc.with_array(adc.astype(np.float32))
    made = replaced(study, dwi=study.dwi.with_array(dwi.astype(np.float32)), adc=adc_volume,
                    eadc=eadc_from_adc(adc_volume, study.b_value))
    lesion = background.lesion | small
    ring = ndimage.binary_dilation(small, structure=np.ones((3, 3, 3), dtype=bool), iterations=2) & brain & ~lesion
    return replaced(background, study=made, lesion=lesion), small, ring


@pytest.mark.needs_atlas
def test_dimming_moves_small_real_lesions_towards_their_ring_and_nothing_else(background_folder: Path) -> None:
    """Issue 13's rule 130: small real lesions fainter, never under the floor; large ones, the
    rest of the study and the label untouched; DWI = S0 exp(-b ADC) kept; deterministic."""
    from LambdaSegmentLib.io.units import eadc_from_adc

    (case,) = find_labelled_cases(background_folder)
    background, small, ring = with_small_embolus(load_background(case))
    made, lesion = background.study, background.lesion
    dwi = np.asarray(made.dwi.array, dtype=np.float64)
    adc = np.asarray(made.adc.array, dtype=np.float64)
    before = ring_ratio(made, small, ring)
    assert before > 1.5
    dimmed = dim_real_lesions(made, lesion, lesion, background.brain, 0.5)
    after = ring_ratio(dimmed, small, ring)
    assert DIMMING_FLOOR - 0.02 <= after < before - 0.2
    new_adc = np.asarray(dimmed.adc.array, dtype=np.float64)
    assert np.median(new_adc[small]) > np.median(adc[small])  # less restricted too
    assert np.median(new_adc[small]) < np.median(adc[ring])  # but still restricted against its ring
    assert (lesion & ~small).sum() * made.dwi.voxel_volume_mm3 / 1000.0 > 0.5  # the case's own lesion, large, left alone
    np.testing.assert_array_equal(np.asarray(dimmed.dwi.array)[~small], np.asarray(made.dwi.array)[~small])
    np.testing.assert_array_equal(np.asarray(dimmed.adc.array)[~small], np.asarray(made.adc.array)[~small])
    bk = made.b_value / 1000.0
    s0_before, s0_after = dwi * np.exp(bk * adc), np.asarray(dimmed.dwi.array, dtype=np.float64) * np.exp(bk * new_adc)
    assert np.median(s0_after[small]) < np.median(s0_before[small])  # log S0 moved with log DWI and ADC
    np.testing.assert_allclose(np.asarray(dimmed.eadc.array), np.asarray(eadc_from_adc(dimmed.adc, made.b_value).array))
    again = dim_real_lesions(made, lesion, lesion, background.brain, 0.5)
    np.testing.assert_array_equal(np.asarray(again.dwi.array), np.asarray(dimmed.dwi.array))
    same = dim_real_lesions(made, lesion, lesion, background.brain, 1.0)  # a factor of 1 changes nothing
    np.testing.assert_allclose(np.asarray(same.dwi.array), np.asarray(made.dwi.array), rtol=1e-5)
    faint = dim_real_lesions(dimmed, lesion, lesion, background.brain, 0.4)  # already at the floor
    assert ring_ratio(faint, small, ring) >= DIMMING_FLOOR - 0.02


@pytest.mark.needs_atlas
def test_dimmed_studies_change_their_small_lesions_and_keep_their_labels(background_folder: Path) -> None:
    """In the dataset: at 0 the studies are those without the option; at 1 every study's small
    real lesion is fainter, its labels and everything far from it unchanged."""
    (base,) = loaded_backgrounds(background_folder)
    background, small, _ring = with_small_embolus(base)
    common = dict(studies=3, preprocessing=TINY_PREPROCESSING, windows_per_study=2, window_slices=8,
                  size_hw=(16, 16), base_seed=5, epoch=1, lesion_probability=0.8)
    plain = RealBackgroundWindows([background], **common)
    off = RealBackgroundWindows([background], **common, dimming_probability=0.0)
    always = RealBackgroundWindows([background], **common, dimming_probability=1.0)
    for study in range(3):
        a, b = plain.make_study_with_real_lesions(study), off.make_study_with_real_lesions(study)
        c = always.make_study_with_real_lesions(study)
        assert np.array_equal(a[0].channels, b[0].channels) and np.array_equal(a[0].mask, b[0].mask)
        assert np.array_equal(a[0].mask, c[0].mask) and np.array_equal(a[1], c[1])  # the labels stay
        assert not np.array_equal(a[0].channels, c[0].channels)  # the embolus dimmed
    with pytest.raises(ValueError, match="dimming_probability must be in"):
        RealBackgroundWindows([background], **common, dimming_probability=2.0)


@pytest.mark.needs_atlas
def test_faint_injection_keeps_the_shapes_and_dims_the_lesions(background_folder: Path) -> None:
    """Rule 87: faint injected infarcts have the same shapes and draws, with less DWI contrast."""
    from LambdaSegmentLib.synthesis.generator import faint_signal_ranges

    (case,) = find_labelled_cases(background_folder)
    background = load_background(case)
    faint = faint_signal_ranges({})
    assert faint["core_dwi_ratio"] == (1.25, 1.7) and faint["grade_reach"] == (0.3, 0.8)
    assert faint_signal_ranges({"faint_core_dwi_ratio": [1.3, 1.5]})["core_dwi_ratio"] == (1.3, 1.5)
    with pytest.raises(ValueError, match="faint_core_dwi_ratio"):
        faint_signal_ranges({"faint_core_dwi_ratio": [0.5, 1.5]})
    dwi = np.asarray(background.study.dwi.array, dtype=np.float64)
    compared = 0
    for seed in range(6):
        plain, plain_label, plain_drawn = inject_infarcts(background, np.random.default_rng(seed), count=2)
        dim, dim_label, dim_drawn = inject_infarcts(background, np.random.default_rng(seed), count=2, signal=faint)
        np.testing.assert_array_equal(plain_label, dim_label)  # the same lesions, only their signal differs
        assert plain_drawn == dim_drawn
        injected = dim_label & ~background.lesion
        if injected.sum() < 20:
            continue
        compared += 1
        ratio_plain = np.asarray(plain.dwi.array)[injected] / dwi[injected]
        ratio_dim = np.asarray(dim.dwi.array)[injected] / dwi[injected]
        assert np.median(ratio_dim) < np.median(ratio_plain)
        # still restricted: a faint lesion is dim on DWI, not on ADC
        assert np.median(np.asarray(dim.adc.array)[injected]) < np.median(np.asarray(background.study.adc.array)[injected])
    assert compared


@pytest.mark.needs_atlas
def test_faint_studies_change_only_their_signal_and_nothing_at_zero(background_folder: Path) -> None:
    backgrounds = loaded_backgrounds(background_folder)
    common = dict(studies=4, preprocessing=TINY_PREPROCESSING, windows_per_study=2, window_slices=8,
                  size_hw=(16, 16), base_seed=5, epoch=1, lesion_probability=0.8)
    from LambdaSegmentLib.synthesis.generator import faint_signal_ranges

    plain = RealBackgroundWindows(backgrounds, **common)
    off = RealBackgroundWindows(backgrounds, **common, faint_probability=0.0, faint_signal=faint_signal_ranges({}))
    always = RealBackgroundWindows(backgrounds, **common, faint_probability=1.0, faint_signal=faint_signal_ranges({}))
    for item in range(len(plain)):
        a, b = plain[item], off[item]
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
    changed = 0
    for study in range(4):
        a, b = plain.make_study(study), always.make_study(study)
        np.testing.assert_array_equal(a.mask, b.mask)  # the same injected shapes and acquisition
        changed += int(not np.array_equal(a.channels, b.channels))
    assert changed  # some study had an injected lesion to dim
    with pytest.raises(ValueError, match="faint_probability must be in"):
        RealBackgroundWindows(backgrounds, **common, faint_probability=1.5, faint_signal=faint_signal_ranges({}))
    with pytest.raises(ValueError, match="needs faint_signal"):
        RealBackgroundWindows(backgrounds, **common, faint_probability=0.3)


@pytest.mark.needs_atlas
def test_whole_territory_injection_is_large_and_bright_and_changes_only_its_studies(background_folder: Path) -> None:
    """Rule 88: a whole-territory infarct in place of a study's 0-3, the other studies as before."""
    (case,) = find_labelled_cases(background_folder)
    background = load_background(case)
    _, label, drawn = inject_infarcts(background, np.random.default_rng(4), count=1, whole_territory=True)
    (plan,) = drawn
    assert plan["kind"] == "territorial" and 100.0 <= plan["template_volume_ml"] <= 300.0 and len(plan["territories"]) > 1
    injected = label & ~background.lesion
    assert injected.sum() > 0.05 * background.brain.sum()  # a whole territory of the (small, synthetic) background brain

    backgrounds = loaded_backgrounds(background_folder)
    common = dict(studies=6, preprocessing=TINY_PREPROCESSING, windows_per_study=1, window_slices=8,
                  size_hw=(16, 16), base_seed=5, epoch=1, lesion_probability=0.8)
    plain = RealBackgroundWindows(backgrounds, **common)
    half = RealBackgroundWindows(backgrounds, **common, whole_territory_probability=0.5)
    whole = [np.random.default_rng([5, 1, s, 20261128]).random() < 0.5 for s in range(6)]
    assert any(whole) and not all(whole), "pick seeds that draw both kinds of study"
    for study, is_whole in enumerate(whole):
        a, b = plain.make_study(study), half.make_study(study)
        if is_whole:
            assert b.mask.sum() > a.mask.sum()
        else:
            np.testing.assert_array_equal(a.channels, b.channels)
            np.testing.assert_array_equal(a.mask, b.mask)
    with pytest.raises(ValueError, match="whole_territory_probability must be in"):
        RealBackgroundWindows(backgrounds, **common, whole_territory_probability=-0.1)


@pytest.mark.needs_atlas
def test_whole_territory_quota_makes_exactly_k_studies_of_every_epoch_whole(background_folder: Path) -> None:
    """Rule 96: K whole-territory studies per epoch, whichever the seed; the other studies as without."""
    backgrounds = loaded_backgrounds(background_folder)
    common = dict(studies=4, preprocessing=TINY_PREPROCESSING, windows_per_study=1, window_slices=8,
                  size_hw=(16, 16), base_seed=51000007, lesion_probability=0.8,
                  thick_probability=0.0)  # a whole-territory draw uses more of the study rng: compare native grids
    chosen_sets = set()
    for epoch in range(4):
        quota = RealBackgroundWindows(backgrounds, **common, epoch=epoch, whole_territory_per_epoch=1)
        whole = [quota.is_whole_territory(s) for s in range(4)]
        assert sum(whole) == 1
        chosen_sets.add(whole.index(True))
    assert len(chosen_sets) > 1  # which study is drawn per epoch, not fixed
    plain = RealBackgroundWindows(backgrounds, **common, epoch=2)
    quota = RealBackgroundWindows(backgrounds, **common, epoch=2, whole_territory_per_epoch=2)
    for study in range(4):
        a, b = plain.make_study(study), quota.make_study(study)
        if quota.is_whole_territory(study):
            assert b.mask.sum() > a.mask.sum()
        else:
            np.testing.assert_array_equal(a.channels, b.channels)
            np.testing.assert_array_equal(a.mask, b.mask)
    assert sum(quota.is_whole_territory(s) for s in range(4)) == 2
    with pytest.raises(ValueError, match="whole_territory_per_epoch must be in"):
        RealBackgroundWindows(backgrounds, **common, epoch=0, whole_territory_per_epoch=5)
    with pytest.raises(ValueError, match="not both"):
        RealBackgroundWindows(backgrounds, **common, epoch=0, whole_territory_per_epoch=1, whole_territory_probability=0.25)
    served = SegmentationDataModule(TINY_PREPROCESSING, real_backgrounds=[background_folder], real_background_studies=2,
                                    windows_per_study=1, size_hw=(32, 32), seed=3, injected_whole_territory_per_epoch=1)
    served.setup()
    assert served.description()["real_backgrounds"]["injected_whole_territory_per_epoch"] == 1


def test_whole_territory_quota_is_checked_before_training(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    flag = "--injected-whole-territory-per-epoch"
    with pytest.raises(ValueError, match="needs real_backgrounds"):
        SegmentationDataModule(synthetic_studies=2, injected_whole_territory_per_epoch=1)
    with pytest.raises(ValueError, match="not both"):
        SegmentationDataModule(real_backgrounds=[tmp_path], real_background_studies=4, injected_whole_territory_per_epoch=1,
                               injected_whole_territory_probability=0.25)
    assert main(train_args(tmp_path / "pkg", flag, "1")) == 2
    assert flag in capsys.readouterr().err and not (tmp_path / "pkg").exists()
    backgrounds = ["--real-backgrounds", str(tmp_path), "--real-background-studies", "2"]
    assert main(train_args(tmp_path / "pkg2", flag, "3", *backgrounds)) == 2
    assert "must be in [0, --real-background-studies = 2]" in capsys.readouterr().err and not (tmp_path / "pkg2").exists()
    assert main(train_args(tmp_path / "pkg3", flag, "1", "--injected-whole-territory", "0.25", *backgrounds)) == 2
    assert "not both" in capsys.readouterr().err and not (tmp_path / "pkg3").exists()


@pytest.mark.needs_atlas
@pytest.mark.parametrize("keyword", ["rim_window_probability", "injected_faint_probability", "injected_whole_territory_probability",
                                     "bright_field_probability", "bright_cortex_probability", "elastic_probability",
                                     "real_lesion_window_probability", "real_lesion_dimming_probability"])
def test_real_background_options_are_recorded_only_when_used(background_folder: Path, keyword: str) -> None:
    common = dict(real_backgrounds=[background_folder], real_background_studies=1, windows_per_study=1, size_hw=(32, 32), seed=3)
    served, plain = SegmentationDataModule(TINY_PREPROCESSING, **common, **{keyword: 0.3}), SegmentationDataModule(TINY_PREPROCESSING, **common)
    served.setup()
    plain.setup()
    assert served.description()["real_backgrounds"][keyword] == 0.3  # in the manifest's training_data
    assert keyword not in plain.description()["real_backgrounds"]


@pytest.mark.parametrize(("keyword", "flag"), [("rim_window_probability", "--rim-windows"),
                                               ("injected_faint_probability", "--injected-faint"),
                                               ("injected_whole_territory_probability", "--injected-whole-territory"),
                                               ("bright_field_probability", "--bright-fields"),
                                               ("bright_cortex_probability", "--bright-cortex"),
                                               ("elastic_probability", "--elastic"),
                                               ("real_lesion_window_probability", "--real-lesion-windows"),
                                               ("real_lesion_dimming_probability", "--real-lesion-dimming")])
def test_real_background_options_need_real_backgrounds_and_a_share(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                   keyword: str, flag: str) -> None:
    with pytest.raises(ValueError, match="needs real_backgrounds"):
        SegmentationDataModule(synthetic_studies=2, **{keyword: 0.3})
    assert main(train_args(tmp_path / "pkg", flag, "0.3")) == 2
    assert flag in capsys.readouterr().err and not (tmp_path / "pkg").exists()
    assert main(train_args(tmp_path / "pkg2", flag, "1.5", "--real-backgrounds", str(tmp_path), "--real-background-studies", "1")) == 2
    assert "must be in [0, 1]" in capsys.readouterr().err and not (tmp_path / "pkg2").exists()


@pytest.mark.needs_atlas
def test_a_lower_label_fraction_labels_the_same_injection_wider_and_changes_no_signal(background_folder: Path) -> None:
    """Issue 13's rule 107: the label reaches further out, the signals and the real lesion stay."""
    (case,) = find_labelled_cases(background_folder)
    background = load_background(case)
    widened = False
    for seed in range(4):
        plain, plain_label, plain_drawn = inject_infarcts(background, np.random.default_rng(seed), count=2)
        wide, wide_label, wide_drawn = inject_infarcts(background, np.random.default_rng(seed), count=2, label_fraction=0.3)
        assert plain_drawn == wide_drawn
        np.testing.assert_array_equal(np.asarray(plain.dwi.array), np.asarray(wide.dwi.array))
        np.testing.assert_array_equal(np.asarray(plain.adc.array), np.asarray(wide.adc.array))
        assert (wide_label >= plain_label).all() and wide_label[background.lesion].all()
        assert not (wide_label & ~plain_label & ~background.brain).any()
        widened |= bool((wide_label & ~plain_label).any())
    assert widened
    with pytest.raises(ValueError, match="label_fraction"):
        RealBackgroundWindows(loaded_backgrounds(background_folder), studies=1, preprocessing=TINY_PREPROCESSING,
                              windows_per_study=1, window_slices=4, size_hw=(32, 32), base_seed=1, epoch=0, label_fraction=0.0)


@pytest.mark.needs_atlas
def test_the_surface_pull_draws_the_same_injection_nearer_the_surface(background_folder: Path) -> None:
    """Issue 13's rule 116: the same kinds and volumes drawn, the shapes pulled towards the brain's
    surface; at 0 exactly as without the option; the datamodule passes the synthesis option on."""
    from LambdaSegmentLib.inference.postprocess import edge_depth_mm

    (case,) = find_labelled_cases(background_folder)
    background = load_background(case)
    depth = edge_depth_mm(background.brain, background.study.dwi.spacing_mm)
    plain_depths, pulled_depths = [], []
    for seed in range(4):
        plain, plain_label, plain_drawn = inject_infarcts(background, np.random.default_rng(seed), count=2)
        same, same_label, _ = inject_infarcts(background, np.random.default_rng(seed), count=2, surface_pull=0.0)
        np.testing.assert_array_equal(np.asarray(plain.dwi.array), np.asarray(same.dwi.array))
        pulled, pulled_label, pulled_drawn = inject_infarcts(background, np.random.default_rng(seed), count=2, surface_pull=4.0)
        assert [d["kind"] for d in plain_drawn] == [d["kind"] for d in pulled_drawn]
        plain_depths += list(depth[plain_label & ~background.lesion])
        pulled_depths += list(depth[pulled_label & ~background.lesion])
    assert plain_depths and pulled_depths and np.mean(pulled_depths) < np.mean(plain_depths)
    with pytest.raises(ValueError, match="surface_pull"):
        RealBackgroundWindows(loaded_backgrounds(background_folder), studies=1, preprocessing=TINY_PREPROCESSING,
                              windows_per_study=1, window_slices=4, size_hw=(32, 32), base_seed=1, epoch=0, surface_pull=-1.0)
