"""From a study on its acquisition grid to the model's input, and model output back."""

from .normalization import NORMALIZATIONS, normalize
from .prepare import PreparedInput, prepare_input
from .slice_axis import acquisition_plane, find_slice_axis
from .slice_stack import SliceStackGrid, plan_slice_stack

__all__ = [
    "NORMALIZATIONS",
    "PreparedInput",
    "SliceStackGrid",
    "acquisition_plane",
    "find_slice_axis",
    "normalize",
    "plan_slice_stack",
    "prepare_input",
]
