"""The per-lesion review table (``lesions.lesion_table``): core volume, centroids, probabilities.

Every expected number is computed here independently of the library (hand-built volumes
with known values; positions from the explicit origin + direction x spacing x index formula).
"""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.lesions import connected_lesions, lesion_table, total_adc_core_ml


def rotation(about_z_deg: float, about_x_deg: float) -> np.ndarray:
    a, b = np.radians(about_z_deg), np.radians(about_x_deg)
    about_z = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
    about_x = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(b), -np.sin(b)], [0.0, np.sin(b), np.cos(b)]])
    return about_z @ about_x


def grid(shape_kji=(5, 12, 14), spacing=(1.0, 1.0, 5.0), origin=(0.0, 0.0, 0.0), direction=np.eye(3)) -> Volume:
    return Volume(np.zeros(shape_kji, np.uint8), spacing, origin, direction)


def test_core_volume_counts_the_lesion_voxels_with_adc_below_620e_6_on_a_hand_built_map():
    mask = grid(spacing=(0.9, 0.9, 6.0))
    adc = np.full(mask.array.shape, 0.8, np.float32)  # canonical unit: 10^-3 mm^2/s
    mask.array[2, 2:6, 2:7] = 1  # 20 voxels
    values = [0.45] * 8 + [0.619] * 4 + [0.62] * 3 + [0.9] * 4 + [0.0]  # 12 core, 3 at the threshold (not core), 1 without data
    adc[2, 2:6, 2:7] = np.asarray(values, np.float32).reshape(4, 5)
    (row,) = lesion_table(mask, adc=mask.with_array(adc))
    voxel_ml = 0.9 * 0.9 * 6.0 / 1000
    assert row.voxels == 20
    assert row.adc_core_ml == pytest.approx(12 * voxel_ml)
    with_data = [v for v in values if v > 0]
    assert row.mean_adc_1e6_mm2_s == pytest.approx(1000 * np.mean(np.asarray(with_data, np.float32)), rel=1e-6)
    assert total_adc_core_ml([row]) == pytest.approx(12 * voxel_ml)
    assert lesion_table(mask)[0].adc_core_ml is None and total_adc_core_ml(lesion_table(mask)) is None


def test_the_core_is_never_larger_than_its_lesion():
    rng = np.random.default_rng(7)
    for _ in range(20):
        mask = grid(shape_kji=(6, 16, 16), spacing=tuple(rng.uniform(0.5, 6.0, 3)))
        mask.array[...] = rng.random(mask.array.shape) < 0.2
        adc = mask.with_array(rng.uniform(-0.1, 1.5, mask.array.shape).astype(np.float32))
        table = lesion_table(mask, adc=adc)
        assert table
        for row in table:
            assert 0.0 <= row.adc_core_ml <= row.volume_ml + 1e-12
        assert total_adc_core_ml(table) <= sum(row.volume_ml for row in table) + 1e-9


def test_centroids_in_lps_and_ras_on_an_oblique_lps_volume_match_an_independent_computation():
    direction = rotation(25.0, 15.0)
    spacing = np.array([0.9, 1.1, 5.5])
    origin = np.array([-80.0, 95.0, -40.0])
    mask = grid(shape_kji=(6, 20, 24), spacing=tuple(spacing), origin=tuple(origin), direction=direction)
    mask.array[1:4, 3:6, 4:9] = 1  # an asymmetric block
    mask.array[3, 6, 9] = 1  # one more voxel touching it by a corner
    k, j, i = np.nonzero(mask.array)
    lps = origin + (np.stack([i, j, k], axis=1) * spacing) @ direction.T  # x_lps = O + D diag(s) ijk
    expected_lps = lps.mean(axis=0)
    expected_ras = expected_lps * np.array([-1.0, -1.0, 1.0])
    (row,) = lesion_table(mask)
    np.testing.assert_allclose(row.centroid_lps_mm, expected_lps, atol=1e-9)
    np.testing.assert_allclose(row.centroid_ras_mm, expected_ras, atol=1e-9)
    distances = np.linalg.norm(lps - expected_lps, axis=1)
    np.testing.assert_allclose(row.jump_lps_mm, lps[np.argmin(distances)], atol=1e-9)  # a lesion voxel's centre
    assert (row.first_slice, row.last_slice) == (1, 3)  # k, the 5.5 mm axis


def test_mean_and_max_probability_on_a_hand_built_probability_map_and_the_low_confidence_flag():
    mask = grid()
    probability = np.zeros(mask.array.shape, np.float32)
    mask.array[1, 1:3, 1:4] = 1  # lesion A, 6 voxels
    probability[1, 1:3, 1:4] = [[0.5, 0.6, 0.7], [0.8, 0.9, 1.0]]
    mask.array[3, 8:10, 8:10] = 1  # lesion B, 4 voxels
    probability[3, 8:10, 8:10] = [[0.5, 0.55], [0.6, 0.65]]
    probability[3, 7, 7] = 0.99  # outside every lesion: ignored
    table = lesion_table(mask, probability=mask.with_array(probability), low_confidence_below=0.7)
    assert [row.voxels for row in table] == [6, 4]
    assert table[0].mean_probability == pytest.approx(0.75, abs=1e-6)
    assert table[0].max_probability == pytest.approx(1.0)
    assert table[1].mean_probability == pytest.approx(0.575, abs=1e-6)
    assert table[1].max_probability == pytest.approx(0.65, abs=1e-6)
    assert [row.low_confidence for row in table] == [False, True]
    unflagged = lesion_table(mask, probability=mask.with_array(probability))
    assert [row.low_confidence for row in unflagged] == [None, None]  # no threshold: unknown, not "confident"


def test_rows_follow_connected_lesions_and_slice_ranges_follow_the_slice_axis():
    sagittal = grid(shape_kji=(20, 16, 7), spacing=(6.0, 1.0, 1.0))  # slice axis i
    sagittal.array[4:9, 3:5, 2:5] = 1
    sagittal.array[10:12, 10:12, 6] = 1
    table = lesion_table(sagittal)
    assert [(row.label, row.voxels, row.volume_ml) for row in table] == [
        (lesion.label, lesion.voxels, lesion.volume_ml) for lesion in connected_lesions(sagittal)
    ]
    assert [(row.first_slice, row.last_slice) for row in table] == [(2, 4), (6, 6)]
    assert lesion_table(grid()) == []


def test_hemisphere_is_the_side_holding_nearly_all_of_the_lesion_in_lps_x():
    mask = grid(shape_kji=(3, 10, 20), spacing=(1.0, 1.0, 1.0), origin=(-9.5, 0.0, 0.0))  # x from -9.5 to 9.5
    mask.array[1, 1:3, 0:4] = 1  # x < 0: patient right (LPS x grows toward the left)
    mask.array[1, 6:8, 14:17] = 1  # x > 0: left
    mask.array[0, 5, 7:13] = 1  # x -2.5..2.5: both
    by_x = sorted(lesion_table(mask), key=lambda row: row.centroid_lps_mm[0])
    assert [row.hemisphere for row in by_x] == ["right", "both", "left"]
    ras = grid(shape_kji=(3, 10, 20), spacing=(1.0, 1.0, 1.0), origin=(9.5, 0.0, 0.0), direction=np.diag([-1.0, 1.0, 1.0]))
    ras.array[1, 1:3, 0:4] = 1  # stored RAS-like: i runs toward patient right, so i = 0..3 is patient left
    assert lesion_table(ras)[0].hemisphere == "left"


def test_maps_on_another_grid_are_refused():
    mask = grid()
    mask.array[1, 1, 1] = 1
    other = grid(spacing=(1.0, 1.0, 4.0)).with_array(np.ones((5, 12, 14), np.float32))
    with pytest.raises(BadInputError, match="probability map"):
        lesion_table(mask, probability=other)
    with pytest.raises(BadInputError, match="ADC map"):
        lesion_table(mask, adc=other)
