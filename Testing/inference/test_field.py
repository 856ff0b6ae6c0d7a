"""The in-plane field a network runs on when its manifest asks for one (``inference.field``,
``"network_field_mm"``): the brain's box plus a margin, at least that wide, in whole multiples
of the network's size, inside the stack; a stack no wider is run whole; segment_study runs
every network (own, partner, seed, every flip) on the package's field and puts the result back
on the DWI grid; without the key, or with a stack no wider, the result is the whole stack's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from LambdaSegmentLib.inference import engine, load_model_package, segment_study
from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference.field import FIELD_KEY, FIELD_MARGIN_MM, Field, brain_field, field_setting
from LambdaSegmentLib.inference.package import attach_partner_network, attach_seed_network
from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import load_study

from lambdasegment_package_helpers import set_manifest

MIN_FIELD_MM = 256.0


def box(shape_thw: tuple[int, int, int], rows: tuple[int, int], columns: tuple[int, int]) -> np.ndarray:
    brain = np.zeros(shape_thw, dtype=np.float32)
    brain[1:-1, rows[0]:rows[1], columns[0]:columns[1]] = 1
    return brain


def test_a_stack_no_wider_than_256_mm_is_run_whole() -> None:
    # an ISLES'22 case on the model grid: 112 x 112 at 2 mm, the brain 70 x 90 voxels
    field = brain_field(box((72, 112, 112), (10, 100), (20, 90)), (2.0, 2.0), 16, min_field_mm=MIN_FIELD_MM)
    assert field.whole and field.shape_hw == (112, 112)
    stack = np.random.default_rng(0).random((2, 72, 112, 112)).astype(np.float32)
    probability = stack[0]
    assert field.crop(stack) is stack and field.embed(probability) is probability
    assert brain_field(np.zeros((4, 256, 256)), (2.0, 2.0), 16, min_field_mm=MIN_FIELD_MM).whole  # no brain: nothing to centre on


def test_a_wide_stack_is_cut_to_the_brain_plus_margin_at_least_256_mm() -> None:
    # 512 mm at 2 mm, the brain 70 x 90 voxels off centre
    field = brain_field(box((24, 256, 256), (30, 100), (140, 230)), (2.0, 2.0), 16, min_field_mm=MIN_FIELD_MM)
    assert field.shape_hw == (128, 128) and field.stack_hw == (256, 256) and not field.whole
    margin = int(FIELD_MARGIN_MM / 2.0)
    assert field.rows.start <= 30 - margin and field.rows.stop >= 100 + margin
    assert field.columns.start <= 140 - margin and field.columns.stop >= 230 + margin
    assert field.shape_hw[0] * 2.0 >= MIN_FIELD_MM
    # centred on the brain's box where the stack allows it
    assert abs((field.rows.start + field.rows.stop) / 2 - 65) <= 1
    # at the stack's edge it is shifted inside, not shrunk
    edge = brain_field(box((24, 256, 256), (0, 60), (200, 256)), (2.0, 2.0), 16, min_field_mm=MIN_FIELD_MM)
    assert edge.rows == slice(0, 128) and edge.columns == slice(128, 256)
    # a brain wider than 256 mm: its box plus the margin, rounded up to the multiple (1 mm voxels)
    wide = brain_field(box((8, 512, 512), (100, 400), (150, 350)), (1.0, 1.0), 16, min_field_mm=MIN_FIELD_MM)
    assert wide.shape_hw == (336, 256)  # 300 + 32 -> 336; 200 + 32 -> max(232, 256) = 256


def test_embed_puts_the_field_back_with_zeros_outside() -> None:
    field = Field(slice(16, 48), slice(32, 64), (64, 96))
    values = np.random.default_rng(1).random((3, 32, 32)).astype(np.float32)
    whole = field.embed(values)
    assert whole.shape == (3, 64, 96) and whole.dtype == np.float32
    assert np.array_equal(whole[:, 16:48, 32:64], values) and np.count_nonzero(whole) == np.count_nonzero(values)
    assert np.array_equal(field.crop(whole), values)


@pytest.fixture(scope="module")
def wide_study():
    # 96 x 96 voxels of 4 mm (384 mm): on the model's 2 mm grid 192 x 192, the brain 65 x 80 voxels
    phantom = make_phantom(size_ijk=(96, 96, 6), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(0.0, 0.0, 15.0))
    return load_study(dwi=phantom.dwi, adc=phantom.adc)


def test_segment_study_runs_every_network_and_flip_on_the_field(tmp_path: Path, wide_study, monkeypatch) -> None:
    package_dir = save_untrained_package(tmp_path / "package", seed=0)
    attach_partner_network(package_dir, save_untrained_package(tmp_path / "partner", seed=1))
    attach_seed_network(package_dir, save_untrained_package(tmp_path / "seed", seed=2), 0.5)
    set_manifest(package_dir, **{FIELD_KEY: MIN_FIELD_MM})
    package = load_model_package(package_dir)
    seen: list[tuple[int, ...]] = []
    forward = engine.predict_probability

    def recording(model, channels, **kwargs):
        seen.append(channels.shape)
        return forward(model, channels, **kwargs)

    monkeypatch.setattr(engine, "predict_probability", recording)
    result = segment_study(wide_study, package, device="cpu", tta=True)
    assert len(seen) == 3 * 2 + 1  # own and partner over three flips, then the seed network
    assert {shape[2:] for shape in seen} == {(128, 128)}
    assert result.probability.array.shape == wide_study.dwi.array.shape
    assert np.all(np.asarray(result.probability.array)[np.asarray(result.brain.array) == 0] == 0)


def test_without_the_key_or_on_a_stack_no_wider_every_network_sees_the_whole_stack(tmp_path: Path, wide_study, monkeypatch) -> None:
    package_dir = save_untrained_package(tmp_path / "package", seed=0)
    seen: list[tuple[int, ...]] = []
    forward = engine.predict_probability
    monkeypatch.setattr(engine, "predict_probability", lambda model, channels, **kw: seen.append(channels.shape) or forward(model, channels, **kw))
    segment_study(wide_study, load_model_package(package_dir), device="cpu")
    assert seen[-1][2:] == (192, 192)  # no key: the whole 384 mm stack

    phantom = make_phantom(size_ijk=(36, 40, 9), spacing_mm=(4.0, 4.0, 6.0), tilt_deg=(5.0, -10.0, 20.0))
    study = load_study(dwi=phantom.dwi, adc=phantom.adc)
    whole = np.asarray(segment_study(study, load_model_package(package_dir), device="cpu").probability.array)
    set_manifest(package_dir, **{FIELD_KEY: MIN_FIELD_MM})
    fielded = np.asarray(segment_study(study, load_model_package(package_dir), device="cpu").probability.array)
    assert np.array_equal(fielded, whole)  # 144 x 160 mm: the field is the whole stack


@pytest.mark.parametrize("value", [0, -5.0, "256", True])
def test_a_bad_field_width_is_refused_naming_the_manifest(tmp_path: Path, value) -> None:
    with pytest.raises(BadInputError, match="network_field_mm must be a positive width"):
        field_setting({FIELD_KEY: value})
    assert field_setting({}) is None and field_setting({FIELD_KEY: None}) is None
    package_dir = save_untrained_package(tmp_path / "package", seed=0)
    set_manifest(package_dir, **{FIELD_KEY: value})
    with pytest.raises(BadInputError, match="network_field_mm must be a positive width") as error:
        load_model_package(package_dir)
    assert str(package_dir / "manifest.json") in str(error.value)
