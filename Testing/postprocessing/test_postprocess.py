"""Post-processing from probability to mask: the manifest block, each check, the symmetry feature."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from LambdaSegmentLib.inference.postprocess import (
    Components,
    PostProcessing,
    anchor_distance_mm,
    bilateral_partners,
    edge_depth_mm,
    find_components,
    height_fraction,
    keep_seeded_components,
    margin_footprint,
    postprocess,
    relative_adc,
    relative_dwi,
    with_margin,
)
from LambdaSegmentLib.preprocessing.symmetry import contralateral_dwi, contralateral_search, register_contralateral
from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.metrics.regions import false_positive_ml_by_region


def oblique_direction(degrees: float) -> np.ndarray:
    a = np.deg2rad(degrees)
    # rows stored P->A (j flipped) and tilted about L-R: an oblique LPS acquisition
    return np.array([[1.0, 0.0, 0.0], [0.0, -np.cos(a), np.sin(a)], [0.0, np.sin(a), np.cos(a)]])


def head(direction: np.ndarray, spacing=(1.5, 1.5, 3.0), shape_kji=(24, 64, 64)) -> tuple[Volume, np.ndarray, np.ndarray]:
    """An ellipsoid 'brain' symmetric about the LPS x plane through its centre, with a
    one-sided bright blob (left) and a bilateral pair of bright blobs; returns the DWI, the
    brain mask and the LPS points of every voxel."""
    grid = Volume(np.zeros(shape_kji, np.float32), spacing, (0.0, 0.0, 0.0), direction)
    kji = np.indices(shape_kji).reshape(3, -1).T
    lps = grid.index_to_lps(kji[:, ::-1]).reshape(*shape_kji, 3)
    centre = grid.index_to_lps((np.asarray(shape_kji[::-1]) - 1) / 2)
    x, y, z = (lps[..., a] - centre[a] for a in range(3))
    brain = (x / 40) ** 2 + (y / 45) ** 2 + (z / 30) ** 2 <= 1
    dwi = np.where(brain, 100.0, 0.0) + np.where(brain, 20.0 * np.cos(y / 6.0), 0.0)  # anatomy symmetric in x
    blob = lambda cx, cy, cz, r: ((x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2) <= r**2  # noqa: E731
    one_sided = blob(18.0, 5.0, 0.0, 6.0)
    bilateral = blob(25.0, -20.0, 5.0, 5.0) | blob(-25.0, -20.0, 5.0, 5.0)
    dwi = dwi + 150.0 * (one_sided | bilateral)
    return grid.with_array((dwi * brain).astype(np.float32)), brain, np.stack([one_sided, bilateral])


@pytest.mark.parametrize("direction", [np.eye(3), oblique_direction(20.0)], ids=["axial", "oblique"])
def test_contralateral_dwi_tells_one_sided_from_bilateral_bright_regions(direction: np.ndarray) -> None:
    dwi, brain, (one_sided, bilateral) = head(direction)
    own, other = contralateral_dwi(dwi, brain)
    assert own.shape == other.shape == brain.shape
    one_sided_ratio = own[one_sided].mean() / other[one_sided].mean()
    bilateral_ratio = own[bilateral].mean() / other[bilateral].mean()
    assert one_sided_ratio > 1.6
    assert 0.85 < bilateral_ratio < 1.15


def test_contralateral_check_drops_bilateral_components_and_keeps_one_sided() -> None:
    dwi, brain, (one_sided, bilateral) = head(oblique_direction(15.0))
    probability = dwi.with_array((one_sided | bilateral).astype(np.float32))
    kept = np.asarray(postprocess(probability, dwi, brain, PostProcessing(contralateral_ratio=1.3)).array)
    assert kept[one_sided].all()
    assert not kept[bilateral].any()
    unchecked = np.asarray(postprocess(probability, dwi, brain, PostProcessing()).array)
    assert unchecked[one_sided | bilateral].all()


@pytest.mark.parametrize("direction", [np.eye(3), oblique_direction(15.0)], ids=["axial", "oblique"])
def test_the_edge_check_keeps_a_shallow_lesion_that_stands_out_against_its_mirror(direction: np.ndarray) -> None:
    """Rule 93: with ``edge_keep_ratio`` a component the edge check would drop is kept when its
    DWI is that many times its registered mirror's; a bilateral one is still dropped."""
    dwi, brain, (one_sided, bilateral) = head(direction)
    probability = dwi.with_array((one_sided | bilateral).astype(np.float32))
    mask = lambda **kw: np.asarray(postprocess(probability, dwi, brain, PostProcessing(**kw)).array)  # noqa: E731
    assert not mask(min_edge_depth_mm=100.0).any()  # deeper than any voxel: everything is "shallow"
    kept = mask(min_edge_depth_mm=100.0, edge_keep_ratio=1.3)
    assert kept[one_sided].all() and not kept[bilateral].any()
    assert not mask(min_edge_depth_mm=100.0, edge_keep_ratio=3.0).any()  # the one-sided blob is ~1.6-2 x its mirror
    assert mask(min_edge_depth_mm=1.0, edge_keep_ratio=3.0)[one_sided | bilateral].all()  # deep enough: kept anyway


def test_the_edge_exception_needs_the_edge_check_and_a_positive_ratio() -> None:
    assert PostProcessing(min_edge_depth_mm=6.0, edge_keep_ratio=1.5).needs_contralateral
    with pytest.raises(ValueError, match="the edge check is off"):
        PostProcessing(edge_keep_ratio=1.5)
    with pytest.raises(ValueError, match="positive DWI ratio"):
        PostProcessing(min_edge_depth_mm=6.0, edge_keep_ratio=0.0)
    components = find_components(np.ones((2, 4, 4), np.float32), 0.5, brain=np.ones((2, 4, 4), bool),
                                 voxel_volume_mm3=1.0, depth_mm=np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match="without the contralateral DWI"):
        components.keep(PostProcessing(min_edge_depth_mm=6.0, edge_keep_ratio=1.5))


def centred_lps(grid: Volume, shape_kji: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y, z (LPS mm) of every voxel of ``grid`` relative to the grid's centre (head()'s frame)."""
    kji = np.indices(shape_kji).reshape(3, -1).T
    lps = grid.index_to_lps(kji[:, ::-1]).reshape(*shape_kji, 3)
    centre = grid.index_to_lps((np.asarray(shape_kji[::-1]) - 1) / 2)
    return tuple(lps[..., a] - centre[a] for a in range(3))


@pytest.mark.parametrize("direction", [np.eye(3), oblique_direction(15.0)], ids=["axial", "oblique"])
def test_the_bilateral_check_drops_mirror_pairs_by_the_model_s_own_marks_not_by_brightness(direction: np.ndarray) -> None:
    """Rule 82: a marked component whose mirror region holds another marked component is dropped,
    both members of the pair; a one-sided component stays even when its DWI is no brighter than
    its mirror's (a faint embolus, which the contralateral ratio drops); a component across the
    midline is not its own partner."""
    dwi, brain, (one_sided, bilateral) = head(direction)
    x, y, z = centred_lps(dwi, brain.shape)
    values = np.asarray(dwi.array, dtype=np.float32).copy()
    values[one_sided] -= 150.0  # faint: as bright as its mirror
    dwi = dwi.with_array(values * brain)
    midline = ((x / 5.0) ** 2 + ((y - 25.0) / 5.0) ** 2 + (z / 5.0) ** 2 <= 1) & brain
    probability = dwi.with_array((one_sided | bilateral | midline).astype(np.float32))
    kept = np.asarray(postprocess(probability, dwi, brain, PostProcessing(bilateral_partner_mm=4.0)).array)
    assert kept[one_sided].all() and kept[midline].all()
    assert not kept[bilateral].any()
    by_ratio = np.asarray(postprocess(probability, dwi, brain, PostProcessing(contralateral_ratio=1.3)).array)
    assert not by_ratio[one_sided].any()  # what the ratio costs a faint one-sided lesion
    assert np.asarray(postprocess(probability, dwi, brain, PostProcessing()).array)[bilateral].all()


def test_the_bilateral_check_s_radius_finds_a_partner_that_is_not_an_exact_mirror_image() -> None:
    """A marked pair whose right member sits 10 mm further back than the left one's mirror image
    (radii 4.5 mm: a 1 mm gap): not partners voxel by voxel, partners within 4 mm in-plane."""
    dwi, brain, (one_sided, _bilateral) = head(np.eye(3))
    x, y, z = centred_lps(dwi, brain.shape)
    left = ((x - 25.0) ** 2 + (y + 20.0) ** 2 + z**2 <= 4.5**2) & brain
    right = ((x + 25.0) ** 2 + (y + 30.0) ** 2 + z**2 <= 4.5**2) & brain
    probability = dwi.with_array((one_sided | left | right).astype(np.float32))
    exact = np.asarray(postprocess(probability, dwi, brain, PostProcessing(bilateral_partner_mm=0.0)).array)
    assert exact[left].all() and exact[right].all() and exact[one_sided].all()
    near = np.asarray(postprocess(probability, dwi, brain, PostProcessing(bilateral_partner_mm=4.0)).array)
    assert not near[left].any() and not near[right].any() and near[one_sided].all()


def test_bilateral_partners_search_in_plane_and_never_count_a_component_as_its_own_partner() -> None:
    labels = np.zeros((5, 12, 12), np.int32)
    labels[2, 2:4, 2:4] = 1
    labels[2, 8:10, 8:10] = 2
    labels[0, 2:4, 2:4] = 3  # two slices below component 1
    mirrored = np.zeros_like(labels)
    mirrored[2, 2:4, 5] = 2  # component 2's label, 2 voxels in-plane from component 1
    mirrored[2, 8:10, 8:10] = 2  # component 2's own mirror image: itself
    mirrored[1, 2:4, 2:4] = 1  # component 1's label, one slice from component 3
    assert bilateral_partners(labels, mirrored, (0, 0, 0)).tolist() == [0.0, 0.0, 0.0]
    assert bilateral_partners(labels, mirrored, (0, 2, 2)).tolist() == [1.0, 0.0, 0.0]  # partner as large as itself
    assert bilateral_partners(labels, mirrored, (1, 2, 2)).tolist() == [1.0, 0.0, 1.0]  # only across slices
    assert bilateral_partners(np.zeros((2, 3, 3), np.int32), np.zeros((2, 3, 3), np.int32), (0, 1, 1)).size == 0


def test_bilateral_partners_give_the_largest_partner_s_size_as_a_share_of_the_component_s() -> None:
    labels = np.zeros((1, 12, 12), np.int32)
    labels[0, 0:6, 0:6] = 1  # 36 voxels
    labels[0, 8, 8] = 2  # 1 voxel
    labels[0, 10:12, 8:10] = 3  # 4 voxels
    mirrored = np.zeros_like(labels)
    mirrored[0, 0, 0] = 2  # component 1's mirror region holds component 2 ...
    mirrored[0, 5, 5] = 3  # ... and component 3, the larger of the two
    mirrored[0, 8, 8] = 1  # component 2's holds component 1
    assert bilateral_partners(labels, mirrored, (0, 0, 0)).tolist() == [4 / 36, 36.0, 0.0]
    # rule 128: counted together, component 1's two partners hold 5 of its 36 voxels
    assert bilateral_partners(labels, mirrored, (0, 0, 0), total=True).tolist() == [5 / 36, 36.0, 0.0]


@pytest.mark.parametrize("direction", [np.eye(3), oblique_direction(15.0)], ids=["axial", "oblique"])
def test_partners_counted_together_drop_a_mark_whose_mirror_is_marked_in_pieces(direction: np.ndarray) -> None:
    """Rule 128: a mark on one side whose mirror region is marked as two separate pieces, each
    under half its size but together over half, is a pair when the partners count together, and
    stays when only the largest piece counts; a one-sided lesion with one speck in its mirror
    region stays either way."""
    dwi, brain, _ = head(direction)
    x, y, z = centred_lps(dwi, brain.shape)
    mark = (np.abs(x - 20.0) <= 4.0) & (np.abs(y + 20.0) <= 8.0) & (np.abs(z) <= 4.0) & brain  # one block
    pieces = (np.abs(x + 20.0) <= 4.0) & (np.abs(np.abs(y + 20.0) - 5.5) <= 2.5) & (np.abs(z) <= 4.0) & brain  # two
    lesion = ((x - 15.0) ** 2 + (y - 15.0) ** 2 + z**2 <= 10.0**2) & brain
    speck = ((x + 15.0) ** 2 + (y - 15.0) ** 2 + z**2 <= 3.0**2) & brain
    assert ndimage.label(pieces)[1] == 2 and 0.5 * mark.sum() < pieces.sum() < mark.sum()
    probability = dwi.with_array((mark | pieces | lesion | speck).astype(np.float32))
    settings = dict(bilateral_partner_mm=4.0, bilateral_partner_fraction=0.5)
    largest = np.asarray(postprocess(probability, dwi, brain, PostProcessing(**settings)).array) != 0
    together = np.asarray(postprocess(probability, dwi, brain,
                                      PostProcessing(**settings, bilateral_partner_total=True)).array) != 0
    assert largest[mark].all() and not largest[pieces].any()
    assert not together[mark].any() and not together[pieces].any()
    assert largest[lesion].all() and together[lesion].all() and not together[speck].any()
    assert PostProcessing.from_manifest(
        {"postprocessing": {"bilateral_partner_mm": 4.0, "bilateral_partner_total": True}}).bilateral_partner_total
    with pytest.raises(ValueError, match="give bilateral_partner_mm too"):
        PostProcessing(bilateral_partner_total=True)
    with pytest.raises(ValueError, match="must be true or false"):
        PostProcessing(bilateral_partner_mm=4.0, bilateral_partner_total="yes")


@pytest.mark.parametrize("direction", [np.eye(3), oblique_direction(15.0)], ids=["axial", "oblique"])
def test_a_comparable_partner_fraction_keeps_a_large_lesion_whose_mirror_region_holds_a_speck(direction: np.ndarray) -> None:
    """Rule 83: with bilateral_partner_fraction 0.5 a partner counts only if it holds at least
    half the component's voxels. A large one-sided lesion with a small mark in its mirror
    region stays (and the mark, whose partner is the large lesion, goes); an equal pair still
    goes; at 0 (rule 82) the large lesion goes with its speck."""
    dwi, brain, (_one_sided, bilateral) = head(direction)
    x, y, z = centred_lps(dwi, brain.shape)
    large = ((x - 15.0) ** 2 + (y - 15.0) ** 2 + z**2 <= 10.0**2) & brain
    speck = ((x + 15.0) ** 2 + (y - 15.0) ** 2 + z**2 <= 3.0**2) & brain
    probability = dwi.with_array((large | speck | bilateral).astype(np.float32))
    comparable = np.asarray(postprocess(probability, dwi, brain,
                                        PostProcessing(bilateral_partner_mm=4.0, bilateral_partner_fraction=0.5)).array)
    assert comparable[large].all() and not comparable[speck].any() and not comparable[bilateral].any()
    anything = np.asarray(postprocess(probability, dwi, brain, PostProcessing(bilateral_partner_mm=4.0)).array)
    assert not anything[large].any() and not anything[speck].any() and not anything[bilateral].any()
    with pytest.raises(ValueError, match="bilateral_partner_fraction must be"):
        PostProcessing(bilateral_partner_fraction=-0.5)
    with pytest.raises(ValueError, match="give bilateral_partner_mm too"):
        PostProcessing.from_manifest({"postprocessing": {"bilateral_partner_fraction": 0.5}})


def test_the_bilateral_check_is_a_manifest_setting_and_needs_its_partners() -> None:
    settings = PostProcessing.from_manifest({"threshold": 0.5, "postprocessing": {"bilateral_partner_mm": 4.0}})
    assert settings.needs_registration and not settings.needs_contralateral
    assert settings.manifest_entries()["postprocessing"]["bilateral_partner_mm"] == 4.0
    with pytest.raises(ValueError, match="bilateral_partner_mm must be a radius"):
        PostProcessing(bilateral_partner_mm=-1.0)
    probability = np.zeros((4, 8, 8), np.float32)
    probability[1:3, 2:4, 2:4] = 0.9
    brain = np.ones_like(probability, dtype=bool)
    components = find_components(probability, 0.5, brain=brain, voxel_volume_mm3=1.0, depth_mm=np.ones_like(probability))
    with pytest.raises(ValueError, match="partners were sought not at all"):
        components.keep(settings)


def test_the_registration_is_one_for_the_dwi_pair_and_the_label_mirror() -> None:
    """The registered mirror carries labels as it carries the DWI: a one-sided blob's labels
    land on its mirror place, where the contralateral DWI is the blob's brightness."""
    dwi, brain, (one_sided, _bilateral) = head(oblique_direction(10.0))
    registration = register_contralateral(dwi, brain)
    own, other = registration.pair()
    np.testing.assert_array_equal(own, contralateral_dwi(dwi, brain)[0])
    np.testing.assert_array_equal(other, contralateral_dwi(dwi, brain)[1])
    mirrored = registration.mirrored_labels(one_sided.astype(np.int32))
    assert mirrored.dtype == np.int32 and set(np.unique(mirrored)) <= {0, 1}
    assert other[mirrored == 1].mean() > 1.5 * other[one_sided].mean()
    assert not (mirrored.astype(bool) & one_sided).any()


def test_the_contralateral_search_finds_a_bilateral_rim_that_is_not_an_exact_mirror_image() -> None:
    """A bright pair whose right member sits 6 mm further back than the left one's mirror
    image: voxel by voxel the left member faces normal tissue and passes as one-sided; the
    brightest partner within 9 mm in-plane is the right member, so the search drops it. The
    truly one-sided blob's neighbourhood is normal tissue: it is kept either way."""
    dwi, brain, (one_sided, _bilateral) = head(np.eye(3))
    grid = dwi
    kji = np.indices(brain.shape).reshape(3, -1).T
    lps = grid.index_to_lps(kji[:, ::-1]).reshape(*brain.shape, 3)
    centre = grid.index_to_lps((np.asarray(brain.shape[::-1]) - 1) / 2)
    x, y, z = (lps[..., a] - centre[a] for a in range(3))
    blob = lambda cx, cy, r: ((x - cx) ** 2 + (y - cy) ** 2 + z**2) <= r**2  # noqa: E731
    left, right = blob(25.0, -20.0, 4.5), blob(-25.0, -26.0, 4.5)
    values = np.asarray(dwi.array, dtype=np.float32).copy()
    values[_bilateral] = np.asarray(dwi.array)[_bilateral] - 150.0  # remove head()'s own exact pair
    values[left | right] += 150.0
    dwi = dwi.with_array(values * brain)
    probability = dwi.with_array((one_sided | left).astype(np.float32))
    exact = np.asarray(postprocess(probability, dwi, brain, PostProcessing(contralateral_ratio=1.3)).array)
    assert exact[one_sided].all() and exact[left].all()  # the shifted rim passes as one-sided
    searched = np.asarray(postprocess(probability, dwi, brain, PostProcessing(contralateral_ratio=1.3, contralateral_search_mm=9.0)).array)
    assert searched[one_sided].all() and not searched[left].any()


@pytest.mark.parametrize("slice_axis", [2, 0], ids=["axial", "sagittal"])
def test_the_contralateral_search_stays_in_plane(slice_axis: int) -> None:
    """The neighbourhood is an in-plane ellipse of the radius in mm on each axis's own spacing,
    never across the slice axis (thick slices: 6 mm away)."""
    spacing = [1.0, 2.0, 6.0] if slice_axis == 2 else [6.0, 1.0, 2.0]  # (i, j, k); the thick axis is the slice axis
    values = np.zeros((9, 21, 21), np.float32)
    values[4, 10, 10] = 1.0
    volume = Volume(values, tuple(spacing))
    searched = contralateral_search(values, volume, 4.0)
    k, j, i = np.nonzero(searched)
    extent = {0: np.ptp(i) + 1, 1: np.ptp(j) + 1, 2: np.ptp(k) + 1}  # voxels along ITK axes i, j, k
    assert extent[slice_axis] == 1
    for axis in {0, 1, 2} - {slice_axis}:
        assert extent[axis] == 2 * round(4.0 / spacing[axis]) + 1
    assert contralateral_search(values, volume, 0.0) is values


def test_size_and_edge_depth_checks_on_a_hand_built_map() -> None:
    shape = (10, 40, 40)
    spacing = (1.0, 1.0, 2.0)
    brain = np.zeros(shape, bool)
    brain[1:9, 5:35, 5:35] = True
    probability = np.zeros(shape, np.float32)
    probability[4:6, 18:22, 18:22] = 0.9  # deep, 32 voxels = 0.064 mL
    probability[4, 5:7, 20] = 0.8  # at the edge, 2 voxels
    probability[0, 0, 0] = 1.0  # outside the brain: never a lesion
    volume = Volume(probability, spacing)
    depth = edge_depth_mm(brain, spacing)
    assert depth[0, 0, 0] == 0 and depth[4, 5, 20] == pytest.approx(1.0) and depth[4, 20, 20] > 5
    components = find_components(probability, 0.5, brain=brain, voxel_volume_mm3=volume.voxel_volume_mm3, depth_mm=depth)
    assert sorted(np.round(components.volume_ml, 4)) == [0.004, 0.064]
    mask = lambda **kw: np.asarray(postprocess(volume, volume, brain, PostProcessing(**kw)).array)  # noqa: E731
    assert mask().sum() == 34 and mask()[0, 0, 0] == 0
    assert mask(min_lesion_ml=0.01).sum() == 32
    assert mask(min_edge_depth_mm=3.0).sum() == 32
    assert mask(threshold=0.85).sum() == 32


def sagittal_direction() -> np.ndarray:
    """Columns: i runs anterior->posterior, j superior->inferior, k left->right (a sagittal stack)."""
    return np.array([[0.0, 0.0, -1.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


DIRECTIONS = [np.eye(3), np.diag([1.0, 1.0, -1.0]), oblique_direction(20.0), sagittal_direction()]
DIRECTION_IDS = ["axial", "axial-slices-downwards", "oblique", "sagittal"]


@pytest.mark.parametrize("direction", DIRECTIONS, ids=DIRECTION_IDS)
def test_the_height_in_the_brain_is_the_patient_s_superior_axis_on_any_grid(direction: np.ndarray) -> None:
    volume, brain, _ = head(direction)
    height = height_fraction(volume, brain)
    kji = np.indices(brain.shape).reshape(3, -1).T
    z = volume.index_to_lps(kji[:, ::-1])[:, 2].reshape(brain.shape)
    expected = (z - z[brain].min()) / (z[brain].max() - z[brain].min())
    np.testing.assert_allclose(height, expected, atol=1e-5)
    assert height[brain].min() == pytest.approx(0.0, abs=1e-6) and height[brain].max() == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="brain mask is empty"):
        height_fraction(volume, np.zeros_like(brain))


@pytest.mark.parametrize("direction", DIRECTIONS, ids=DIRECTION_IDS)
def test_the_edge_check_confined_to_the_brain_s_lower_part_keeps_a_shallow_lesion_high_up(direction: np.ndarray) -> None:
    """Rule 145: with ``edge_max_height`` the edge check drops a shallow mark at the skull base and
    keeps one as shallow at the convexity, by the patient's axis whatever the grid."""
    volume, brain, _ = head(direction, spacing=(2.0, 2.0, 2.0), shape_kji=(40, 48, 48))
    kji = np.indices(brain.shape).reshape(3, -1).T
    lps = volume.index_to_lps(kji[:, ::-1]).reshape(*brain.shape, 3)
    centre = volume.index_to_lps((np.asarray(brain.shape[::-1]) - 1) / 2)
    x, y, z = (lps[..., a] - centre[a] for a in range(3))
    depth = edge_depth_mm(brain, volume.spacing_mm)
    shallow = brain & (depth <= 4.0)
    low = shallow & (z < -22.0) & (np.abs(x) < 6.0) & (np.abs(y) < 6.0)  # the brain's floor (z spans -30..30)
    high = shallow & (z > 22.0) & (np.abs(x) < 6.0) & (np.abs(y) < 6.0)  # its vertex
    assert low.sum() >= 4 and high.sum() >= 4
    probability = volume.with_array((0.9 * (low | high)).astype(np.float32))
    mask = lambda **kw: np.asarray(postprocess(probability, volume, brain, PostProcessing(**kw)).array) != 0  # noqa: E731
    assert np.array_equal(mask(), low | high)
    assert not mask(min_edge_depth_mm=8.0).any()
    assert np.array_equal(mask(min_edge_depth_mm=8.0, edge_max_height=0.5), high)
    assert np.array_equal(mask(min_edge_depth_mm=8.0, edge_max_height=1.0), np.zeros_like(high))


def test_the_edge_height_needs_the_edge_check_a_height_and_the_components_heights() -> None:
    with pytest.raises(ValueError, match="edge check is off"):
        PostProcessing(edge_max_height=0.5)
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="edge_max_height must be a height"):
            PostProcessing(min_edge_depth_mm=6.0, edge_max_height=bad)
    shape = (4, 8, 8)
    components = find_components(np.ones(shape, np.float32), 0.5, brain=np.ones(shape, bool), voxel_volume_mm3=1.0,
                                 depth_mm=np.ones(shape, np.float32))
    with pytest.raises(ValueError, match="without their heights"):
        components.keep(PostProcessing(min_edge_depth_mm=6.0, edge_max_height=0.5))
    empty = postprocess(Volume(np.zeros(shape, np.float32), (1.0, 1.0, 1.0)), Volume(np.zeros(shape, np.float32), (1.0, 1.0, 1.0)),
                        np.zeros(shape, bool), PostProcessing(min_edge_depth_mm=6.0, edge_max_height=0.5))
    assert not np.asarray(empty.array).any()


def test_postprocessing_settings_come_from_the_manifest() -> None:
    assert PostProcessing.from_manifest({"threshold": 0.4}) == PostProcessing(threshold=0.4)
    block = {"min_lesion_ml": 0.1, "min_edge_depth_mm": 4.0, "edge_keep_ratio": 1.5, "contralateral_ratio": 1.2,
             "contralateral_search_mm": 4.0,
             "test_time_flips": False, "grow_threshold": None, "max_relative_adc": None,
             "bilateral_partner_mm": None, "bilateral_partner_fraction": 0.0, "bilateral_partner_total": False,
             "margin_dwi_ratio": 1.4, "margin_lesion_fraction": 0.3, "margin_mirror_ratio": 1.2, "margin_capped": True,
             "satellite_mm": 10.0, "satellite_edge_only": True, "edge_max_height": 0.5}
    settings = PostProcessing.from_manifest({"threshold": 0.6, "postprocessing": block})
    assert settings == PostProcessing(threshold=0.6, **block)
    assert settings.manifest_entries() == {"threshold": 0.6, "postprocessing": block}
    with pytest.raises(ValueError, match="unknown postprocessing"):
        PostProcessing.from_manifest({"postprocessing": {"minimum": 3}})
    with pytest.raises(ValueError, match="top-level threshold"):
        PostProcessing.from_manifest({"threshold": 0.5, "postprocessing": {"threshold": 0.3}})


def test_false_positives_are_split_into_exclusive_regions() -> None:
    shape = (6, 20, 20)
    brain = np.zeros(shape, bool)
    brain[:, 2:18, 2:18] = True
    depth = edge_depth_mm(brain, (1.0, 1.0, 1.0))
    fossa = np.zeros(shape, bool)
    fossa[:2] = True
    truth = np.zeros(shape, bool)
    truth[3, 9:11, 9:11] = True
    prediction = truth.copy()
    prediction[3, 2, 2] = True  # edge: 1 mm deep
    prediction[1, 10, 10] = True  # posterior fossa, 2 mm deep (the field of view's end is an edge too)
    prediction[3, 10, 12] = True  # elsewhere
    split = false_positive_ml_by_region(prediction, truth, depth_mm=depth, posterior_fossa=fossa, voxel_volume_mm3=1000.0, edge_mm=1.0)
    assert split == {"fp_ml": 3.0, "fp_edge_ml": 1.0, "fp_posterior_fossa_ml": 1.0, "fp_elsewhere_ml": 1.0}


def test_a_package_with_a_bad_postprocessing_block_is_refused_naming_its_manifest(tmp_path) -> None:  # noqa: ANN001
    import json
    import shutil

    from LambdaSegmentLib.errors import BadInputError
    from LambdaSegmentLib.inference import BUNDLED_PACKAGE, load_model_package

    package = tmp_path / "pkg"
    shutil.copytree(BUNDLED_PACKAGE, package)
    manifest = json.loads((package / "manifest.json").read_text())
    manifest["postprocessing"] = {"min_edge_depth": 4}
    (package / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BadInputError, match="manifest.json.*post-processing is invalid"):
        load_model_package(package)


def box(shape: tuple[int, int, int], where: tuple[slice, ...]) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    mask[where] = True
    return mask


def test_seeding_keeps_whole_components_that_hold_a_seed_voxel_and_nothing_else() -> None:
    probability = np.zeros((3, 10, 10), dtype=np.float32)
    probability[1, 1:4, 1:4] = 0.9   # a core ...
    probability[1, 4:7, 1:4] = 0.55  # ... and its periphery: one component at 0.5
    probability[1, 1:3, 7:9] = 0.95  # a confident component no seed touches (a rim)
    probability[0, 8, 8] = 0.4       # below the threshold: in no component, so 0
    seed = np.zeros(probability.shape, dtype=bool)
    seed[1, 2, 2] = True  # the seed package found the core's centre
    seed[2, 0, 0] = True  # a seed outside every component keeps nothing
    brain = np.ones(probability.shape, dtype=bool)

    seeded = keep_seeded_components(probability, 0.5, brain, seed)

    kept = seeded >= 0.5
    np.testing.assert_array_equal(kept, box(probability.shape, np.s_[1, 1:7, 1:4]))  # core and its periphery
    np.testing.assert_array_equal(seeded[kept], probability[kept])  # probabilities unchanged where kept
    assert seeded[0, 8, 8] == 0.0 and seeded.dtype == probability.dtype
    # a lower threshold joins more into a component: the seed's component then grows with it
    probability[1, 3, 4:7] = 0.45
    assert (keep_seeded_components(probability, 0.4, brain, seed) >= 0.4)[1, 1:3, 7:9].all()


def test_hysteresis_grows_detected_lesions_to_the_lower_threshold_and_adds_no_faint_one() -> None:
    """``grow_threshold``: a lesion found at the threshold keeps its fainter rim (down to the
    lower threshold, 26-connected, inside the brain), a faint component that never reaches the
    threshold stays out, and the checks see the grown lesion (its volume)."""
    shape, spacing = (5, 20, 20), (1.0, 1.0, 1.0)
    probability = np.zeros(shape, np.float32)
    probability[2, 8:10, 8:10] = 0.9   # a core: 4 voxels
    probability[2, 6:12, 6:12] = np.maximum(probability[2, 6:12, 6:12], 0.3)  # its faint rim: 36 voxels in all
    probability[3, 12, 12] = 0.3       # touching the rim diagonally (26-connected): grown too
    probability[2, 15:18, 15:18] = 0.3  # faint, never reaching the threshold: no lesion
    probability[2, 0, 9] = 0.3         # the rim's continuation outside the brain is never a lesion
    brain = np.ones(shape, bool)
    brain[:, 0, :] = False
    volume = Volume(probability, spacing)
    mask = lambda **kw: np.asarray(postprocess(volume, volume, brain, PostProcessing(threshold=0.5, **kw)).array)  # noqa: E731
    assert mask().sum() == 4
    grown = mask(grow_threshold=0.2)
    assert grown.sum() == 37 and grown[3, 12, 12] == 1 and grown[2, 16, 16] == 0 and grown[2, 0, 9] == 0
    assert mask(grow_threshold=0.4).sum() == 4  # the rim is below the lower threshold too
    # the size check judges the grown lesion: 37 voxels = 0.037 mL passes 0.03 mL, the bare core does not
    assert mask(grow_threshold=0.2, min_lesion_ml=0.03).sum() == 37 and mask(min_lesion_ml=0.03).sum() == 0
    # from a manifest, and refused unless it lies below the threshold
    settings = PostProcessing.from_manifest({"threshold": 0.5, "postprocessing": {"grow_threshold": 0.2}})
    assert settings.grow_threshold == 0.2 and settings.candidate_threshold == 0.2
    assert settings.manifest_entries()["postprocessing"]["grow_threshold"] == 0.2
    for bad in (0.5, 0.7, 0.0):
        with pytest.raises(ValueError, match="grow_threshold must lie between 0 and the threshold"):
            PostProcessing(threshold=0.5, grow_threshold=bad)


def restricted_and_normal_spots(adc_scale: float) -> tuple[Volume, Volume, Volume, np.ndarray, np.ndarray, np.ndarray]:
    """A brain of ADC 0.8 (10^-3 mm^2/s, times ``adc_scale``) with CSF at 3.0 in a fifth of it,
    and two equally bright, equally probable spots: one restricted (ADC 0.45), one at the
    tissue's ADC (T2 shine-through, or an EPI pile-up); returns probability, DWI and ADC
    volumes, the brain and the two spots."""
    shape, spacing = (8, 32, 32), (1.5, 1.5, 3.0)
    brain = box(shape, np.s_[1:7, 2:30, 2:30])
    adc = np.where(brain, 0.8, 0.0).astype(np.float32)
    adc[1:7, 2:30, 24:30] = 3.0  # CSF raises the brain's median above the tissue's ADC, as in real brains
    restricted, normal = box(shape, np.s_[3:5, 8:12, 6:10]), box(shape, np.s_[3:5, 18:22, 6:10])
    adc[restricted] = 0.45
    dwi = np.where(brain, 100.0, 0.0).astype(np.float32)
    dwi[restricted | normal] = 250.0
    probability = (restricted | normal).astype(np.float32) * 0.9
    volume = lambda values: Volume(values.astype(np.float32), spacing)  # noqa: E731
    return volume(probability), volume(dwi), volume(adc * adc_scale), brain, restricted, normal


@pytest.mark.parametrize("adc_scale", [1.0, 1e-3, 1e3], ids=["1e-3 mm2/s", "mm2/s", "1e-6 mm2/s"])
def test_the_adc_check_drops_bright_spots_without_restricted_diffusion_in_any_unit(adc_scale: float) -> None:
    """``max_relative_adc``: a component's median ADC against the brain's median ADC (voxels with
    data). The restricted spot (0.45 / 0.8 = 0.56) stays; the bright spot at the tissue's ADC
    (1.0 x the median here) goes at 0.9 and stays at 1.05. The ratio has no unit, so the check
    does the same in every ADC unit."""
    probability, dwi, adc, brain, restricted, normal = restricted_and_normal_spots(adc_scale)
    np.testing.assert_allclose(np.median(relative_adc(adc.array, brain)[brain]), 1.0)
    mask = lambda limit: np.asarray(postprocess(probability, dwi, brain, PostProcessing(max_relative_adc=limit), adc=adc).array)  # noqa: E731
    np.testing.assert_array_equal(mask(0.9), restricted.astype(np.uint8))
    np.testing.assert_array_equal(mask(1.05), (restricted | normal).astype(np.uint8))
    np.testing.assert_array_equal(mask(None), (restricted | normal).astype(np.uint8))
    depth = edge_depth_mm(brain, probability.spacing_mm)
    components = find_components(probability.array, 0.5, brain=brain, voxel_volume_mm3=probability.voxel_volume_mm3,
                                 depth_mm=depth, adc_ratio=relative_adc(adc.array, brain))
    assert sorted(np.round(components.relative_adc, 4)) == [0.5625, 1.0]


def test_the_adc_check_needs_the_adc_and_a_positive_limit() -> None:
    probability, dwi, adc, brain, _, _ = restricted_and_normal_spots(1.0)
    with pytest.raises(ValueError, match="give the study's ADC"):
        postprocess(probability, dwi, brain, PostProcessing(max_relative_adc=0.9))
    with pytest.raises(ValueError, match="no ADC inside the brain mask"):
        relative_adc(np.zeros(brain.shape, np.float32), brain)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="max_relative_adc must be a positive ADC ratio"):
            PostProcessing(max_relative_adc=bad)
    # the settings round-trip through a manifest; components found without the ADC cannot be judged by it
    settings = PostProcessing.from_manifest({"threshold": 0.5, "postprocessing": {"max_relative_adc": 0.9}})
    assert settings.needs_adc and settings.manifest_entries()["postprocessing"]["max_relative_adc"] == 0.9
    components = find_components(probability.array, 0.5, brain=brain, voxel_volume_mm3=probability.voxel_volume_mm3,
                                 depth_mm=edge_depth_mm(brain, probability.spacing_mm))
    with pytest.raises(ValueError, match="found without the ADC"):
        components.keep(settings)


@pytest.mark.parametrize("spacing", [(1.0, 1.0, 1.0), (0.9, 0.9, 6.5), (2.0, 1.2, 0.8)])
def test_edge_depth_in_the_brain_s_box_equals_the_whole_grid_s(spacing: tuple[float, float, float]) -> None:
    """The box with its one-voxel ring gives the whole grid's distances exactly: brains with
    holes, several pieces, and pieces touching the field of view's border (an edge too)."""
    rng = np.random.default_rng(7)
    shape = (12, 40, 36)
    for trial in range(6):
        brain = ndimage.binary_opening(rng.random(shape) < 0.7, iterations=1)
        brain[:, :, : 3 + trial] = False  # a non-brain margin of varying width on one side only
        if trial % 2:
            brain[:2] = False  # and, on some, slices without brain
        whole = ndimage.distance_transform_edt(np.pad(brain, 1), sampling=tuple(spacing[::-1]))[1:-1, 1:-1, 1:-1]
        np.testing.assert_array_equal(edge_depth_mm(brain, spacing), whole.astype(np.float32))
    assert not edge_depth_mm(np.zeros(shape, bool), spacing).any()
    one = np.zeros(shape, bool)
    one[5, 20, 20] = True
    assert edge_depth_mm(one, spacing)[5, 20, 20] == pytest.approx(min(spacing))


@pytest.mark.parametrize(
    ("spacing", "shape_kji"),
    [((2.0, 2.0, 2.0), (3, 3, 3)), ((0.9, 0.9, 6.0), (1, 7, 7)), ((5.0, 1.0, 1.0), (7, 7, 1)), ((1.0, 1.0, 1.0), (7, 7, 7))],
    ids=["2 mm", "axial 6 mm slices", "sagittal 5 mm slices", "1 mm"],
)
def test_the_margin_reaches_3_5_mm_and_never_a_thick_slice_s_neighbour(spacing, shape_kji) -> None:  # noqa: ANN001
    """Exactly the offsets no further than 3.5 mm: a 2 mm grid's 26 neighbours, a ball on a 1 mm
    grid, and on 5-6 mm slices the slice itself only."""
    footprint = margin_footprint(spacing)
    assert footprint.shape == shape_kji
    centre = np.asarray(shape_kji) // 2
    lengths = np.sqrt((((np.indices(shape_kji).T - centre) * np.asarray(spacing[::-1])) ** 2).sum(axis=-1)).T
    np.testing.assert_array_equal(footprint, lengths <= 3.5)
    assert footprint.all() if spacing == (2.0, 2.0, 2.0) else not footprint.all()


def margin_scene(spacing=(2.0, 2.0, 2.0)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A kept 3 x 3 x 3 lesion at (5, 10, 10) in a brain of ratio-1 tissue: a bright shell (1.6 x)
    around it one voxel deep, a dim shell (1.2 x) one voxel further out, bright tissue far away and
    a bright voxel next to the lesion outside the brain. Returns the mask, the DWI ratio and the brain."""
    shape = (11, 21, 21)
    brain = np.zeros(shape, bool)
    brain[:, 2:19, 2:19] = True
    brain[5, 10, 8] = False  # one voxel of the bright shell lies outside the brain
    mask = np.zeros(shape, np.uint8)
    mask[4:7, 9:12, 9:12] = 1
    ratio = np.ones(shape, np.float32)
    ratio[3:8, 8:13, 8:13] = 1.6
    ratio[4:7, 9:12, 9:12] = 3.0
    ratio[5, 10, 7] = 1.2  # beyond the bright shell: dim, and in any case two voxels out
    ratio[5, 3:5, 3:5] = 2.5  # bright, far from the lesion
    return mask, ratio * brain, brain


def test_the_margin_step_adds_bright_tissue_next_to_kept_lesions_only() -> None:
    mask, ratio, brain = margin_scene()
    grown = with_margin(mask, ratio, brain, (2.0, 2.0, 2.0), 1.4)
    shell = np.zeros(mask.shape, bool)
    shell[3:8, 8:13, 8:13] = True
    np.testing.assert_array_equal(grown != 0, shell & brain)  # the shell, one step, inside the brain
    assert grown.dtype == np.uint8 and not grown[5, 3:5, 3:5].any() and not grown[5, 10, 7]
    assert not with_margin(mask, ratio, brain, (2.0, 2.0, 2.0), 1.7)[mask == 0].any()  # the shell is 1.6 x
    np.testing.assert_array_equal(with_margin(np.zeros_like(mask), ratio, brain, (2.0, 2.0, 2.0), 1.4), 0)


def test_the_margin_step_grows_a_thick_slice_stack_in_plane_only() -> None:
    mask, ratio, brain = margin_scene()
    bright = (ratio >= 1.4) & brain
    grown = with_margin(mask, ratio, brain, (0.9, 0.9, 6.0), 1.4) != 0
    assert not grown[3].any() and not grown[7].any()  # the slices above and below stay as they were
    np.testing.assert_array_equal(grown[4:7], bright[4:7] & (np.abs(np.indices((3, 21, 21))[1:] - 10).max(axis=0) <= 2))
    # sagittal 5 mm slices (the slice axis is i, the array's last): nothing grows along i
    sagittal = with_margin(mask, ratio, brain, (5.0, 1.0, 1.0), 1.4) != 0
    assert not sagittal[:, :, 8].any() and not sagittal[:, :, 12].any()
    np.testing.assert_array_equal(sagittal[:, :, 9:12], bright[:, :, 9:12] & (np.abs(np.indices((11, 21, 3))[:2] - np.array([5, 10])[:, None, None, None]).max(axis=0) <= 2))


def test_postprocess_applies_the_margin_after_the_checks() -> None:
    """The step widens what the checks kept and never brings back what they dropped."""
    mask, ratio, brain = margin_scene()
    spacing = (2.0, 2.0, 2.0)
    probability = mask.astype(np.float32)
    probability[5, 3, 3] = 0.9  # a one-voxel candidate in the far bright patch, dropped by the size check
    dwi = Volume((ratio * 200.0).astype(np.float32), spacing)
    np.testing.assert_allclose(np.median(relative_dwi(dwi.array, brain)[brain]), 1.0)
    run = lambda **kw: np.asarray(postprocess(dwi.with_array(probability), dwi, brain, PostProcessing(**kw)).array)  # noqa: E731
    np.testing.assert_array_equal(run(min_lesion_ml=0.05, margin_dwi_ratio=1.4), with_margin(mask, ratio, brain, spacing, 1.4))
    assert run(min_lesion_ml=0.05).sum() == 27
    assert run(margin_dwi_ratio=1.4)[5, 3:5, 3:5].sum() == 4  # a kept candidate there grows into its own bright patch


def test_the_margin_setting_is_validated_and_needs_a_dwi_signal() -> None:
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="margin_dwi_ratio must be a positive DWI ratio"):
            PostProcessing(margin_dwi_ratio=bad)
    with pytest.raises(ValueError, match="no DWI signal inside the brain mask"):
        relative_dwi(np.zeros((4, 4, 4), np.float32), np.ones((4, 4, 4), bool))


def marks_in_shells(shells: tuple[float, float], marks: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A (9, 30, 30) study, all brain at 1 x the brain's median DWI, with two kept 3 x 3 marks on
    slice 4 (DWI ratios ``marks``), each in a 3 x 5 x 5 shell of tissue (ratios ``shells``): brain,
    uint8 mask, float32 DWI ratio and the two shells (bool)."""
    shape = (9, 30, 30)
    mask = np.zeros(shape, np.uint8)
    ratio = np.ones(shape, np.float32)
    boxes = np.zeros(shape, bool)
    for corner, shell, mark in zip((4, 18), shells, marks):
        ratio[3:6, corner : corner + 5, corner : corner + 5] = shell
        boxes[3:6, corner : corner + 5, corner : corner + 5] = True
        mask[4, corner + 1 : corner + 4, corner + 1 : corner + 4] = 1
        ratio[4, corner + 1 : corner + 4, corner + 1 : corner + 4] = mark
    return np.ones(shape, bool), mask, ratio, boxes


def test_the_margin_as_a_share_of_each_lesion_s_own_brightness() -> None:
    """Two lesions in one study: a faint one (median 1.8 x) and a bright one (3.0 x), each with a
    shell at 1.3 x and a voxel at 1.5 x beside it. At c = 0.3 the faint lesion's cut-off is
    max(1.2, 1 + 0.3 x 0.8) = 1.24 and the bright one's 1 + 0.3 x 2 = 1.6: the faint lesion takes
    its shell, the bright one neither."""
    brain, mask, ratio, _ = marks_in_shells(shells=(1.3, 1.3), marks=(1.8, 3.0))
    shape = mask.shape
    ratio[4, 6, 4] = ratio[4, 20, 18] = 1.5
    grown = with_margin(mask, ratio, brain, (2.0, 2.0, 2.0), 1.2, lesion_fraction=0.3) != 0
    faint_shell = np.zeros(shape, bool)
    faint_shell[3:6, 4:9, 4:9] = True
    np.testing.assert_array_equal(grown[:, :15, :15], faint_shell[:, :15, :15])
    np.testing.assert_array_equal(grown[:, 15:, 15:], mask[:, 15:, 15:] != 0)  # 1.5 < 1.6: nothing joins
    # the floor alone (rule 109) takes both shells; a high floor overrides a low share
    assert (with_margin(mask, ratio, brain, (2.0, 2.0, 2.0), 1.2) != 0)[:, 15:, 15:].sum() == 75
    assert not (with_margin(mask, ratio, brain, (2.0, 2.0, 2.0), 1.55, lesion_fraction=0.1)[:, :15, :15] != 0)[ratio[:, :15, :15] < 1.55].any()
    # tissue near both a faint and a bright lesion needs the bright one's cut-off
    both = np.zeros((5, 5, 12), np.uint8)
    both[2, 2, 2] = both[2, 2, 4] = 1
    between = np.ones(both.shape, np.float32)
    between[2, 2, 2], between[2, 2, 4], between[2, 2, 3] = 1.5, 4.0, 1.6
    assert not with_margin(both, between, np.ones(both.shape, bool), (2.0, 2.0, 2.0), 1.2, lesion_fraction=0.3)[2, 2, 3]


def test_a_capped_margin_takes_tissue_dimmer_than_its_lesion_not_a_brighter_patch() -> None:
    """Rule 137: two kept marks of median DWI 1.8 x the brain's, each in a shell of tissue. Around
    the first the shell is 1.4 x (a margin, dimmer than the mark), around the second 2.5 x (a bright
    patch around a small mark). Uncapped both shells join; capped, only the first. The cap is each
    lesion's own median, so a bright lesion's dimmer margin still joins."""
    brain, mask, ratio, shells = marks_in_shells(shells=(1.4, 2.5), marks=(1.8, 1.8))
    uncapped = with_margin(mask, ratio, brain, (2.0, 2.0, 2.0), 1.2) != 0
    capped = with_margin(mask, ratio, brain, (2.0, 2.0, 2.0), 1.2, capped=True) != 0
    np.testing.assert_array_equal(uncapped, shells)
    np.testing.assert_array_equal(capped[:, :15, :15], shells[:, :15, :15])
    np.testing.assert_array_equal(capped[:, 15:, 15:], mask[:, 15:, 15:] != 0)
    # the cap rides on the lesion share's cut-off as well: both bounds hold
    both = with_margin(mask, ratio, brain, (2.0, 2.0, 2.0), 1.2, lesion_fraction=0.3, capped=True) != 0
    np.testing.assert_array_equal(both, capped)
    # through the settings, as the CLI and the search apply them
    probability = Volume(mask.astype(np.float32), (2.0, 2.0, 2.0), (0.0, 0.0, 0.0), np.eye(3))
    dwi = probability.with_array(ratio * 100.0)
    run = lambda **kw: np.asarray(postprocess(probability, dwi, brain, PostProcessing(margin_dwi_ratio=1.2, **kw)).array) != 0  # noqa: E731
    assert run().sum() > run(margin_capped=True).sum() > mask.sum()
    with pytest.raises(ValueError, match="margin_capped is set but the margin step is off"):
        PostProcessing(margin_capped=True)
    with pytest.raises(ValueError, match="margin_capped must be true or false"):
        PostProcessing(margin_dwi_ratio=1.2, margin_capped=1)


def test_the_lesion_share_needs_the_margin_step_and_a_share() -> None:
    with pytest.raises(ValueError, match="margin step is off"):
        PostProcessing(margin_lesion_fraction=0.3)
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="margin_lesion_fraction must be a share"):
            PostProcessing(margin_dwi_ratio=1.2, margin_lesion_fraction=bad)


def test_the_margin_s_mirror_check_keeps_one_sided_tissue_and_drops_bilateral() -> None:
    """``head``'s one-sided blob and its bilateral pair, each marked by a smaller kept core: with
    the mirror check the one-sided blob's bright rim joins, the bilateral blob's does not."""
    dwi, brain, (one_sided, bilateral) = head(np.eye(3), spacing=(2.0, 2.0, 2.0), shape_kji=(40, 56, 48))
    core = lambda blob: ndimage.binary_erosion(blob, iterations=1)  # noqa: E731
    marks = core(one_sided) | core(bilateral)
    probability = dwi.with_array(marks.astype(np.float32))
    run = lambda **kw: np.asarray(postprocess(probability, dwi, brain, PostProcessing(margin_dwi_ratio=1.2, **kw)).array) != 0  # noqa: E731
    plain, checked = run(), run(margin_mirror_ratio=1.2)
    assert (plain & one_sided & ~marks).sum() > 0 and (plain & bilateral & ~marks).sum() > 0
    np.testing.assert_array_equal((checked & one_sided), (plain & one_sided))  # the one-sided rim joins as before
    assert not (checked & bilateral & ~marks).any()  # the bilateral blob keeps its core only
    assert PostProcessing(margin_dwi_ratio=1.2, margin_mirror_ratio=1.2).needs_registration
    with pytest.raises(ValueError, match="margin step is off"):
        PostProcessing(margin_mirror_ratio=1.2)
    with pytest.raises(ValueError, match="margin_mirror_ratio must be a positive DWI ratio"):
        PostProcessing(margin_dwi_ratio=1.2, margin_mirror_ratio=0.0)


def satellite_scene(spacing: tuple[float, float, float]) -> tuple[Volume, np.ndarray]:
    """A box brain on ``spacing`` (i, j, k) with a deep lesion (slice 4, rows 18-21, columns
    10-13) and four one-voxel marks at the brain's edge (row 2, 16 rows from the lesion): on the
    lesion's slice 4 columns and 20 columns off, one slice off and two slices off."""
    shape = (9, 40, 40)
    brain = np.zeros(shape, bool)
    brain[:, 2:38, 2:38] = True
    probability = np.zeros(shape, np.float32)
    probability[4, 18:22, 10:14] = 0.9  # deep: the anchor
    for k, i in ((4, 17), (4, 33), (5, 12), (6, 10)):
        probability[k, 2, i] = 0.8  # depth 1 voxel, under the edge check's 4 mm
    return Volume(probability, spacing), brain


def test_satellites_near_a_kept_lesion_escape_the_edge_check_in_millimetres() -> None:
    volume, brain = satellite_scene((2.0, 2.0, 2.0))
    kept = lambda **kw: np.asarray(postprocess(volume, volume, brain, PostProcessing(  # noqa: E731
        min_edge_depth_mm=4.0, **kw)).array) != 0
    assert kept().sum() == 16  # the edge check alone: the lesion only
    # the three near marks lie 32.98, 32.06 and 32.25 mm from the lesion's nearest voxel, the far one 51.2 mm
    assert kept(satellite_mm=32.0).sum() == 16
    wide = kept(satellite_mm=33.0)
    assert wide[4, 2, 17] and wide[5, 2, 12] and wide[6, 2, 10] and not wide[4, 2, 33]
    assert wide.sum() == 19


def test_satellite_distances_follow_the_slice_spacing() -> None:
    volume, brain = satellite_scene((2.0, 2.0, 6.0))  # thick slices: one slice off is 6 mm along k
    labels, count = ndimage.label(np.asarray(volume.array) >= 0.5, structure=np.ones((3, 3, 3), bool))
    anchor = np.zeros(count, bool)
    anchor[labels[4, 19, 11] - 1] = True
    distance = anchor_distance_mm(labels, anchor, volume.spacing_mm)
    at = lambda k, j, i: distance[labels[k, j, i] - 1]  # noqa: E731
    assert at(4, 19, 11) == 0.0
    assert at(5, 2, 12) == pytest.approx(np.hypot(32.0, 6.0))  # rows 2 -> 18, one 6 mm slice
    assert at(6, 2, 10) == pytest.approx(np.hypot(32.0, 12.0))
    assert at(4, 2, 33) == pytest.approx(np.hypot(32.0, 40.0))  # columns 33 -> 13
    assert np.isinf(anchor_distance_mm(labels, np.zeros(count, bool), volume.spacing_mm)).all()
    kept = np.asarray(postprocess(volume, volume, brain, PostProcessing(min_edge_depth_mm=4.0, satellite_mm=33.5)).array)
    assert kept[5, 2, 12] and not kept[6, 2, 10] and kept[4, 2, 17]


def hand_components(**values: np.ndarray) -> Components:
    """Three one-voxel components on a 2 mm grid, 10 mm apart along i: an anchor, a satellite and
    a satellite of the satellite; every check passes unless ``values`` says otherwise."""
    labels = np.zeros((1, 1, 11), np.int32)
    labels[0, 0, [0, 5, 10]] = (1, 2, 3)
    plain = {"volume_ml": np.full(3, 0.008), "edge_depth_mm": np.full(3, 20.0),
             "contralateral_ratio": np.full(3, 2.0), "relative_adc": np.full(3, 0.6)}
    return Components(labels, **{**plain, **values}, bilateral=(np.zeros(3), 4.0, False), spacing_mm=(2.0, 2.0, 2.0))


def test_the_satellite_exemption_lifts_only_the_edge_and_contralateral_checks() -> None:
    settings = PostProcessing(min_edge_depth_mm=6.0, contralateral_ratio=1.2, satellite_mm=10.0,
                              max_relative_adc=0.9, bilateral_partner_mm=4.0, min_lesion_ml=0.005)
    shallow = hand_components(edge_depth_mm=np.array([20.0, 1.0, 20.0]))
    assert shallow.keep(settings).tolist() == [True, True, True]
    assert shallow.keep(PostProcessing(**{**settings.as_dict(), "satellite_mm": 9.9})).tolist() == [True, False, True]
    faint = hand_components(contralateral_ratio=np.array([2.0, 1.0, 2.0]))
    assert faint.keep(settings).tolist() == [True, True, True]
    # no chains: the third is 10 mm from the exempted second and 20 mm from the anchor
    chained = hand_components(edge_depth_mm=np.array([20.0, 1.0, 1.0]))
    assert chained.keep(settings).tolist() == [True, True, False]
    # the bilateral, ADC and size checks still hold for a satellite
    for values in ({"relative_adc": np.array([0.6, 1.0, 0.6])}, {"volume_ml": np.array([0.008, 0.001, 0.008])}):
        assert hand_components(edge_depth_mm=np.array([20.0, 1.0, 20.0]), **values).keep(settings).tolist() == [True, False, True]
    paired = replace_bilateral(hand_components(edge_depth_mm=np.array([20.0, 1.0, 20.0])), np.array([0.0, 1.0, 0.0]))
    assert paired.keep(settings).tolist() == [True, False, True]
    # edge only (rule 134): a shallow satellite is still kept, a faint one no longer
    edge_only = PostProcessing(**{**settings.as_dict(), "satellite_edge_only": True})
    assert shallow.keep(edge_only).tolist() == [True, True, True]
    assert faint.keep(edge_only).tolist() == [True, False, True]
    both = hand_components(edge_depth_mm=np.array([20.0, 1.0, 20.0]), contralateral_ratio=np.array([2.0, 1.0, 2.0]))
    assert both.keep(settings).tolist() == [True, True, True] and both.keep(edge_only).tolist() == [True, False, True]
    # without an anchor there is nothing to be a satellite of
    assert hand_components(edge_depth_mm=np.full(3, 1.0)).keep(settings).tolist() == [False, False, False]
    with pytest.raises(ValueError, match="without the grid's spacing"):
        Components(shallow.labels, shallow.volume_ml, shallow.edge_depth_mm, shallow.contralateral_ratio,
                   shallow.relative_adc, shallow.bilateral).keep(settings)


def replace_bilateral(components: Components, share: np.ndarray) -> Components:
    from dataclasses import replace

    return replace(components, bilateral=(share, 4.0, False))


def test_satellite_setting_is_refused_without_a_check_to_lift() -> None:
    with pytest.raises(ValueError, match="neither the edge check nor the contralateral check"):
        PostProcessing(satellite_mm=10.0)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="satellite_mm must be a distance"):
            PostProcessing(min_edge_depth_mm=6.0, satellite_mm=bad)
    assert PostProcessing(contralateral_ratio=1.1, satellite_mm=0.0).satellite_mm == 0.0
    with pytest.raises(ValueError, match="satellite_edge_only is set but the exemption or the edge check is off"):
        PostProcessing(contralateral_ratio=1.1, satellite_mm=10.0, satellite_edge_only=True)
    with pytest.raises(ValueError, match="satellite_edge_only is set but"):
        PostProcessing(min_edge_depth_mm=6.0, satellite_edge_only=True)
    with pytest.raises(ValueError, match="satellite_edge_only must be true or false"):
        PostProcessing(min_edge_depth_mm=6.0, satellite_mm=10.0, satellite_edge_only="yes")
