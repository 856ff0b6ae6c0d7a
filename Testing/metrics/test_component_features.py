"""``benchmarks/false_positive_components.py``: the features it lists per component (issue 13's
rules 82-83), on a study built by hand (no ISLES'22 data needed)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from LambdaSegmentLib.inference.postprocess import find_components, relative_adc, with_bilateral
from LambdaSegmentLib.io import Volume


@pytest.fixture(scope="module")
def script(load_script):
    return load_script("benchmarks/false_positive_components.py")


def test_each_component_s_kind_ring_contrast_partner_share_and_shape(script) -> None:
    shape = (6, 30, 30)  # (k, j, i), 2 mm voxels, axial
    volume = lambda array: Volume(np.asarray(array, np.float32), (2.0, 2.0, 2.0))  # noqa: E731
    brain = np.ones(shape, dtype=bool)
    dwi, adc = np.ones(shape), np.full(shape, 0.8)
    probability = np.zeros(shape, dtype=np.float32)
    truth = np.zeros(shape, dtype=bool)
    truth[2:4, 5:7, 5:7] = True  # a lesion: twice as bright as the tissue around it
    dwi[truth] = 2.0
    probability[truth] = 0.9
    probability[3, 20:22, 5:15] = 0.9  # an elongated mark (2 x 10 voxels), not on the lesion
    probability[3, 25, 20:30] = 0.9  # its partner: half its voxels
    adc[:, :, 29] = 3.0  # CSF along one side (3.75 x the brain's median ADC)
    components = find_components(probability, 0.5, brain=brain, voxel_volume_mm3=8.0, depth_mm=np.full(shape, 20.0))
    labels = components.labels
    mark, partner = labels[3, 20, 5], labels[3, 25, 20]
    mirrored = np.zeros_like(labels)
    mirrored[3, 20, 5] = partner  # the mark's mirror region holds the partner, and the partner's the mark
    mirrored[3, 25, 20] = mark
    study = SimpleNamespace(dwi=volume(dwi), adc=volume(adc))
    prepared = SimpleNamespace(
        study=study, brain=brain, truth=truth, depth_mm=np.full(shape, 20.0), adc_ratio=relative_adc(adc, brain),
        components=lambda threshold, bilateral_mm: with_bilateral(components, mirrored, study.dwi, bilateral_mm))
    rows = {row["voxels"]: row for row in script.component_rows("case", prepared, "pkg")}
    lesion, elongated, small = rows[8], rows[20], rows[10]
    assert (lesion["kind"], elongated["kind"], small["kind"]) == ("lesion", "false", "false")
    assert lesion["ring_dwi"] == 2.0 and lesion["ring_adc"] == 1.0 and lesion["partner_share"] == 0.0
    assert elongated["partner_share"] == 0.5 and small["partner_share"] == 2.0
    assert elongated["elongation"] > 3.0 and lesion["elongation"] == 1.0
    assert small["csf_mm"] == 9.0 and lesion["csf_mm"] > 40.0  # median of 0, 2, ..., 18 mm: it reaches the CSF
    assert lesion["slices"] == [2, 3] and elongated["slices"] == [3, 3]
