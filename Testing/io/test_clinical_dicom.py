"""The two real skull-on clinical DWI series in ../shared (Siemens TRACEW and GE, 6.5 mm
slices, no ADC) read as DICOM with the geometry their headers state, refused as a study
without ADC, and given a brain mask from the DWI alone. Skipped without ../shared."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import load_study, read_volume
from LambdaSegmentLib.preprocessing.brain_mask import brain_mask, brain_volume_ml

CLINICAL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "clinical-dwi-dicom"
SERIES = {  # folder: (size i, j, k), in-plane spacing mm
    "siemens-0019983": ((160, 160, 18), 1.4375),
    "ge-0226308": ((256, 256, 18), 0.9375),
}


@pytest.fixture(params=sorted(SERIES))
def series(request: pytest.FixtureRequest) -> Path:
    folder = CLINICAL / request.param
    if not folder.is_dir():
        pytest.skip(f"clinical DICOM series not present at {folder}")
    return folder


def header_numbers(path: str, tag: str) -> np.ndarray:
    reader = sitk.ImageFileReader()
    reader.SetFileName(path)
    reader.ReadImageInformation()
    return np.asarray([float(v) for v in reader.GetMetaData(tag).split("\\")])


def test_a_clinical_series_is_read_with_the_geometry_of_its_headers(series: Path) -> None:
    size, in_plane = SERIES[series.name]
    volume = read_volume(series)
    assert volume.size_ijk == size
    np.testing.assert_allclose(volume.spacing_mm, (in_plane, in_plane, 6.5), atol=2e-3)
    files = sorted(str(p) for p in series.glob("*.dcm"))
    orientation = header_numbers(files[0], "0020|0037")  # row (i) and column (j) cosines
    np.testing.assert_allclose(volume.direction[:, 0], orientation[:3], atol=1e-5)
    np.testing.assert_allclose(volume.direction[:, 1], orientation[3:6], atol=1e-5)
    np.testing.assert_allclose(header_numbers(files[0], "0028|0030"), (in_plane, in_plane), atol=1e-3)
    positions = np.asarray([header_numbers(f, "0020|0032") for f in files])
    normal = np.cross(orientation[:3], orientation[3:6])
    along = positions @ normal
    first, last = positions[np.argmin(along)], positions[np.argmax(along)]
    np.testing.assert_allclose(volume.origin_mm, first, atol=1e-3)  # slice 0 is the first along the normal
    np.testing.assert_allclose(volume.direction[:, 2], (last - first) / np.linalg.norm(last - first), atol=1e-4)
    np.testing.assert_allclose(volume.index_to_lps(np.array([0, 0, size[2] - 1])), last, atol=1e-2)


def test_a_dwi_without_adc_is_refused_as_a_study_but_gets_a_brain_mask(series: Path) -> None:
    with pytest.raises(BadInputError, match="an ADC, eADC or b0 image is needed"):
        load_study(dwi=series)
    dwi = read_volume(series)
    dwi = dwi.with_array(np.asarray(dwi.array, np.float32))
    mask = brain_mask(dwi)
    assert 800 <= brain_volume_ml(mask, dwi) <= 2000  # 18 slices of 6.5 mm: most of the brain
    # the brain lies inside the field of view, away from the scalp at its edges
    assert not mask[:, [0, -1], :].any() and not mask[:, :, [0, -1]].any()
    assert mask.sum() < 0.6 * (np.asarray(dwi.array) > 0).sum()


def test_the_brain_mask_morphology_on_the_box_is_the_whole_grids(series: Path, whole_grid_and_boxed) -> None:
    """Skull-on clinical heads, whose scalp reaches near the field of view's edge."""
    whole, boxed = whole_grid_and_boxed(read_volume(series))
    assert whole.any()
    np.testing.assert_array_equal(boxed, whole)
