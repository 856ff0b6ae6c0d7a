"""Lightning training: ``SegmentationModule`` (model, loss, optimiser, schedule, metrics),
``SegmentationDataModule`` (real folders, synthetic studies on the fly, or a mix) and the
export of a trained model as a package. The Trainer owns devices, precision,
distribution, checkpoints and logging; there is no hand-written loop."""

from . import recipe
from .checkpoints import best_checkpoint, latest_checkpoint
from .cases import LabelledCase, find_labelled_cases, read_case_listing
from .datamodule import DEFAULT_PREPROCESSING, SegmentationDataModule
from .export import ExportBestPackage, build_manifest, export_package
from .losses import LOSSES, make_loss
from .module import SegmentationModule, apply_activation_checkpointing
from .prepared import PreparedCase, load_labelled_case, prepare_labelled, prepare_synthetic

__all__ = [
    "DEFAULT_PREPROCESSING",
    "LOSSES",
    "ExportBestPackage",
    "LabelledCase",
    "PreparedCase",
    "SegmentationDataModule",
    "SegmentationModule",
    "apply_activation_checkpointing",
    "best_checkpoint",
    "build_manifest",
    "export_package",
    "find_labelled_cases",
    "latest_checkpoint",
    "load_labelled_case",
    "make_loss",
    "prepare_labelled",
    "prepare_synthetic",
    "read_case_listing",
    "recipe",
]
