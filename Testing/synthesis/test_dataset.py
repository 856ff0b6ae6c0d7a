"""SyntheticStudies: the on-the-fly dataset yields what training needs."""

from __future__ import annotations

import pytest
import numpy as np
import torch
from torch.utils.data import DataLoader

from LambdaSegmentLib.synthesis import SyntheticStudy
from LambdaSegmentLib.synthesis.dataset import SyntheticStudies

pytestmark = pytest.mark.needs_atlas  # every study here is synthesised on the atlas

PREPROCESSING = {
    "channels": ["eadc", "dwi"],
    "in_plane_spacing_mm": 2.0,
    "normalization": {"dwi": "brain_median", "eadc": "clip01"},
    "pad_multiple": 16,
}
SMALL = {"in_plane_spacing_mm": 2.0, "fov_mm": (200.0, 200.0), "coverage_mm": (90.0, 90.0), "slice_thickness_mm": 5.0}


def test_items_without_preprocessing_are_studies_seeded_by_index():
    dataset = SyntheticStudies(3, base_seed=40, **SMALL)
    assert len(dataset) == 3
    study = dataset[1]
    assert isinstance(study, SyntheticStudy) and study.params["seed"] == 41


def test_training_windows_have_the_paper_shape_and_batch_in_worker_processes():
    dataset = SyntheticStudies(2, base_seed=50, preprocessing=PREPROCESSING, window_slices=8, size_hw=(128, 128),
                               lesion_kind="territorial", lesion_volume_ml=(5.0, 40.0), **SMALL)
    item = dataset[0]
    assert item["image"].shape == (2, 8, 128, 128) and item["image"].dtype == torch.float32
    assert item["mask"].shape == (1, 8, 128, 128)
    assert set(torch.unique(item["mask"]).tolist()) <= {0.0, 1.0}
    eadc, dwi = item["image"]
    assert 0.0 <= float(eadc.min()) and float(eadc.max()) <= 1.0  # clip01
    assert 0.5 < float(dwi[dwi > 0.3].median()) < 1.5  # DWI / brain median
    loader = DataLoader(dataset, batch_size=2, num_workers=1)
    (batch,) = list(loader)
    assert batch["image"].shape == (2, 2, 8, 128, 128)
    assert torch.equal(batch["image"][0], item["image"])  # same study in a worker process
    assert batch["mask"].sum() > 0
