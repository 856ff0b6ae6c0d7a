"""From a study on its acquisition grid to the model's input, and model output back."""

from .brain_mask import BRAIN_MASK_METHODS, brain_mask, brain_volume_ml
from .normalization import NORMALIZATIONS, normalize
from .prepare import PreparedInput, prepare_input
from .slice_axis import acquisition_plane, find_slice_axis
from .slice_stack import SliceStackGrid, plan_slice_stack

__all__ = [
    "BRAIN_MASK_METHODS",
    "NORMALIZATIONS",
    "PreparedInput",
    "SliceStackGrid",
    "acquisition_plane",
    "brain_mask",
    "brain_volume_ml",
    "find_slice_axis",
    "normalize",
    "plan_slice_stack",
    "prepare_input",
]
