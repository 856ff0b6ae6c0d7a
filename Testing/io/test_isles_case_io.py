"""The real ISLES'22 case in ../shared (skipped when absent): reading, units, expert lesion volume."""

from __future__ import annotations

import nibabel as nib
import numpy as np

from LambdaSegmentLib.io import load_study, read_volume
from LambdaSegmentLib.lesions import lesion_volume_ml

PREFIX = "sub-strokecase0001_ses-0001_"


def test_isles_case_reads_with_its_geometry_and_its_adc_unit_is_detected(isles_case):
    dwi_path, adc_path = isles_case / f"{PREFIX}dwi.nii.gz", isles_case / f"{PREFIX}adc.nii.gz"
    study = load_study(dwi=dwi_path, adc=adc_path)

    reference = nib.load(dwi_path)  # an independent reader
    assert study.dwi.size_ijk == reference.shape
    np.testing.assert_allclose(study.dwi.spacing_mm, reference.header.get_zooms()[:3], rtol=1e-6)
    ras_to_lps = np.diag([-1.0, -1.0, 1.0, 1.0])
    np.testing.assert_allclose(study.dwi.ijk_to_lps_matrix(), ras_to_lps @ reference.affine, atol=1e-3)

    # Verify the unit independently of the library: the median raw ADC where the DWI has
    # signal above its own median lies in the normal-brain range of 10⁻³ mm²/s.
    raw_adc = np.asarray(nib.load(adc_path).dataobj, dtype=np.float64)
    raw_dwi = np.asarray(reference.dataobj, dtype=np.float64)
    tissue = raw_dwi > np.median(raw_dwi[raw_dwi > 0])
    assert 0.5 < np.median(raw_adc[tissue]) < 1.5
    assert study.adc_unit_detected == "1e-3 mm2/s"
    np.testing.assert_allclose(study.adc.array, np.transpose(raw_adc, (2, 1, 0)), rtol=1e-6, atol=1e-6)


def test_isles_expert_lesion_volume_is_voxel_count_times_voxel_volume(isles_case):
    mask_path = isles_case / f"{PREFIX}msk.nii.gz"
    independent = nib.load(mask_path)
    count = int(np.count_nonzero(np.asarray(independent.dataobj)))
    expected_ml = count * float(np.prod(independent.header.get_zooms()[:3])) / 1000.0
    mask = read_volume(mask_path)
    assert count > 0
    assert abs(lesion_volume_ml(mask) - expected_ml) < 1e-9
