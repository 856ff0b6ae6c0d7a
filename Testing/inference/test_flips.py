"""Test-time flips in ``segment_study``: each mirrored prediction goes back onto its own voxels,
and the left-right mirror is the patient's left-right axis, whatever the storage order.

Two stand-in networks whose output is known (the engine's own code runs around them):
``PointwiseModel`` maps each voxel's DWI channel to a logit, so it commutes with any mirror:
flip averaging must give exactly the unflipped probability and zero disagreement, on an
asymmetric study where a mirror put back on the wrong voxels would show. ``HalfModel``
ignores its input and says "infarct" on the first half of the stack's w axis, so each pass
reveals which way it was mirrored: the left-right pass, mirrored back, lights up the other
half of the patient.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from LambdaSegmentLib.inference import ModelPackage, segment_study
from LambdaSegmentLib.inference.phantom import make_phantom
from LambdaSegmentLib.io import Volume, load_study

HIGH = 10.0  # logit: sigmoid(10) = 0.99995
PREPROCESSING = {"channels": ["eadc", "dwi"], "normalization": {"dwi": "brain_median", "eadc": "clip01"}, "pad_multiple": 16}


class PointwiseModel(nn.Module):
    slice_receptive_radius = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (b, c, t, h, w) -> (b, 1, t, h, w)
        return (x[:, 1:2] - 1.2) * 6.0  # the DWI channel (brain median = 1): bright infarct -> high


class HalfModel(nn.Module):
    slice_receptive_radius = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = torch.full_like(x[:, :1], -HIGH)
        logits[..., : x.shape[-1] // 2] = HIGH
        return logits


def package_of(model: nn.Module, tmp_path: Path, **manifest: object) -> ModelPackage:
    # The flips' geometry is under test, not the brain mask: every nonzero voxel counts as brain.
    base = {"name": type(model).__name__, "version": "0", "preprocessing": PREPROCESSING, "threshold": 0.5,
            "brain_mask": "nonzero"}
    return ModelPackage(model=model.eval(), manifest={**base, **manifest}, sha256="0" * 64, directory=tmp_path)


def study_stored(kind: str):
    """The phantom (infarct in the patient's left hemisphere: asymmetric) stored four ways."""
    if kind == "sagittal":  # slice axis i (6 mm) along L-R
        phantom = make_phantom(size_ijk=(14, 64, 48), spacing_mm=(6.0, 3.0, 3.0))
    else:
        phantom = make_phantom(size_ijk=(48, 56, 10), spacing_mm=(3.0, 3.0, 6.0),
                               tilt_deg=(10.0, -5.0, 20.0) if kind == "oblique" else (0.0, 0.0, 0.0))
    dwi, adc = phantom.dwi, phantom.adc
    if kind == "ras":  # the same image stored RAS: i toward the patient's right, j toward anterior
        last = np.array([dwi.size_ijk[0] - 1, dwi.size_ijk[1] - 1, 0])
        geometry = dict(spacing_mm=dwi.spacing_mm, origin_mm=tuple(dwi.index_to_lps(last)), direction=np.diag([-1.0, -1.0, 1.0]))
        dwi, adc = (Volume(np.ascontiguousarray(v.array[:, ::-1, ::-1]), **geometry) for v in (dwi, adc))
    return load_study(dwi=dwi, adc=adc)


def toward_left(volume: Volume) -> np.ndarray:
    """[k, j, i] bool: the voxels in the half of the in-plane axis that runs most along the
    patient's left-right axis (LPS x) lying toward the patient's left; computed here from the
    direction matrix, independently of the engine's slice stack."""
    slice_axis = int(np.argmax(volume.spacing_mm))
    in_plane = [a for a in range(3) if a != slice_axis]
    axis = max(in_plane, key=lambda a: abs(volume.direction[0, a]))
    index = np.indices(volume.array.shape)[2 - axis]
    centred = index - (volume.size_ijk[axis] - 1) / 2
    return centred * np.sign(volume.direction[0, axis]) > 0


@pytest.mark.parametrize("kind", ["lps", "ras", "oblique"])
def test_flip_averaging_puts_every_mirrored_prediction_back_on_its_voxels(kind: str, tmp_path: Path) -> None:
    study = study_stored(kind)
    package = package_of(PointwiseModel(), tmp_path)
    plain = segment_study(study, package, device="cpu")
    averaged = segment_study(study, package, device="cpu", tta=True, uncertainty=True)
    assert plain.flips == ("none",) and not plain.tta and plain.disagreement is None
    assert averaged.flips == ("none", "left-right", "anterior-posterior") and averaged.tta
    probability = np.asarray(plain.probability.array)
    assert probability.max() > 0.9 and np.abs(probability - probability[:, ::-1, ::-1]).max() > 0.5  # asymmetric
    np.testing.assert_allclose(averaged.probability.array, probability, atol=1e-5)
    assert float(np.abs(averaged.disagreement.array).max()) < 1e-3
    assert averaged.disagreement.size_ijk == study.dwi.size_ijk and averaged.disagreement.origin_mm == study.dwi.origin_mm
    np.testing.assert_array_equal(averaged.mask.array, plain.mask.array)


@pytest.mark.parametrize("kind", ["lps", "ras", "oblique"])
def test_the_left_right_flip_mirrors_the_patients_left_right_axis(kind: str, tmp_path: Path) -> None:
    study = study_stored(kind)
    result = segment_study(study, package_of(HalfModel(), tmp_path), device="cpu", tta=True, uncertainty=True)
    high, low = 1 / (1 + np.exp(-HIGH)), 1 / (1 + np.exp(HIGH))
    left = toward_left(study.dwi)
    probability = np.asarray(result.probability.array)
    # Unflipped and anterior-posterior passes: the stack's first w half = the patient's right;
    # the left-right pass, mirrored back: the patient's left.
    np.testing.assert_allclose(probability[~left], (2 * high + low) / 3, atol=1e-5)
    np.testing.assert_allclose(probability[left], (high + 2 * low) / 3, atol=1e-5)
    np.testing.assert_allclose(result.disagreement.array, np.sqrt(2) / 3 * (high - low), atol=1e-4)
    if kind != "oblique":  # axis-aligned: "toward the left" is simply LPS x beyond the centre
        x = study.dwi.index_to_lps(np.moveaxis(np.indices(study.dwi.array.shape)[::-1], 0, -1))[..., 0]
        centre = study.dwi.index_to_lps((np.asarray(study.dwi.size_ijk) - 1) / 2)[0]
        np.testing.assert_array_equal(left, x > centre)


def test_a_sagittal_study_is_flipped_in_plane_only(tmp_path: Path) -> None:
    study = study_stored("sagittal")
    package = package_of(PointwiseModel(), tmp_path)
    result = segment_study(study, package, device="cpu", tta=True, uncertainty=True)
    assert result.flips == ("none", "anterior-posterior", "superior-inferior")  # left-right is the slice axis
    np.testing.assert_allclose(result.probability.array, segment_study(study, package, device="cpu").probability.array, atol=1e-5)


def test_the_manifest_can_turn_flips_on_by_default_and_uncertainty_alone_keeps_the_plain_mask(tmp_path: Path) -> None:
    study = study_stored("lps")
    by_manifest = segment_study(study, package_of(HalfModel(), tmp_path, postprocessing={"test_time_flips": True}), device="cpu")
    assert by_manifest.tta and len(by_manifest.flips) == 3
    overridden = segment_study(study, package_of(HalfModel(), tmp_path, postprocessing={"test_time_flips": True}), device="cpu", tta=False)
    assert not overridden.tta and overridden.flips == ("none",)
    plain = segment_study(study, package_of(HalfModel(), tmp_path), device="cpu")
    doubtful = segment_study(study, package_of(HalfModel(), tmp_path), device="cpu", uncertainty=True)
    assert not doubtful.tta and doubtful.disagreement is not None
    np.testing.assert_array_equal(doubtful.probability.array, plain.probability.array)
