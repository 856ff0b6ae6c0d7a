"""Inference: model packages, devices, slab-wise prediction and ``segment_study``."""

from .devices import resolve_device
from .engine import Segmentation, predict_probability, segment_study
from .package import BUNDLED_PACKAGE, ModelPackage, load_model_package, save_model_package, sha256_of_file
from .slabs import Slab, plan_slabs

__all__ = [
    "BUNDLED_PACKAGE",
    "ModelPackage",
    "Segmentation",
    "Slab",
    "load_model_package",
    "plan_slabs",
    "predict_probability",
    "resolve_device",
    "save_model_package",
    "segment_study",
    "sha256_of_file",
]
