"""From a :class:`~LambdaSegmentLib.io.Study` to the model's input array, and back.

Everything is driven by the model manifest's ``preprocessing`` block, for example::

    {"channels": ["eadc", "dwi"], "in_plane_spacing_mm": 2.0,
     "normalization": {"dwi": "brain_median", "eadc": "clip01"}, "pad_multiple": 16}

Channels are normalised on the native DWI grid (statistics over the DWI's brain
foreground), then put on the model's slice stack (:mod:`.slice_stack`). A *derived*
channel is computed on the DWI grid from the study's final signals, then stacked the same
way: ``"dwi_asymmetry"`` (:func:`.symmetry.dwi_asymmetry`, the DWI minus its registered
contralateral mirror; it costs a rigid registration, paid only when a manifest names it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..errors import BadInputError
from ..io.grid import grid_differences
from ..io.study import Study
from ..io.volume import Volume
from . import symmetry
from .normalization import normalize
from .slice_axis import acquisition_plane
from .slice_stack import SliceStackGrid, plan_slice_stack

#: Channels read from the study and normalised by the manifest's ``normalization``.
STUDY_CHANNELS = ("eadc", "dwi", "adc")
#: Channels computed from the study, normalised by their own definition (no ``normalization`` entry).
DERIVED_CHANNELS = ("dwi_asymmetry",)
CHANNELS = STUDY_CHANNELS + DERIVED_CHANNELS


@dataclass(frozen=True)
class PreparedInput:
    """The model's input for one study, and the way back to the DWI grid.

    Attributes:
        channels: float32 (c, t, h, w) in the manifest's channel order; t along the slice
            axis, h and w padded to the manifest's multiple.
        channel_names: the manifest's channel names, in order.
        slice_axis: ITK axis (0 i, 1 j, 2 k) of the DWI grid that t runs along.
        plane: "axial", "sagittal", "coronal" or "oblique".
        grid: the exact DWI-grid ⇄ stack map.
    """

    channels: np.ndarray
    channel_names: tuple[str, ...]
    slice_axis: int
    plane: str
    grid: SliceStackGrid

    @property
    def num_slices(self) -> int:
        """t, the number of slices the model must be told about."""
        return int(self.channels.shape[1])

    @property
    def spacing_thw_mm(self) -> tuple[float, float, float]:
        """Slice distance and in-plane spacing (mm) of the model grid."""
        return (self.grid.slice_spacing_mm, *self.grid.model_spacing_hw_mm)

    def to_dwi_grid(self, prob: np.ndarray, *, interpolation: str = "linear") -> Volume:
        """Put a model-grid map (t, h, w) exactly on the DWI grid (size, spacing, origin, direction).

        Undoes padding, in-plane resampling ("linear" for probabilities, "nearest" for
        labels) and the axis permutation/flips. Returns float32 for "linear", the input's
        type for "nearest".
        """
        array = self.grid.from_stack(prob, interpolation=interpolation)
        if interpolation == "nearest":
            array = array.astype(np.asarray(prob).dtype, copy=False)
        else:
            array = array.astype(np.float32, copy=False)
        return self.grid.dwi_grid.with_array(array)

    def to_model_grid(self, volume: Volume, *, interpolation: str = "nearest") -> np.ndarray:
        """A volume on the DWI grid (e.g. an expert mask, a training target) as a (t, h, w)
        float32 stack on the model grid, exactly as the channels were made (without their
        normalisation; "nearest" for labels, "linear" for images).

        Raises:
            BadInputError: the volume is not on the DWI grid (the message says how).
        """
        differences = grid_differences(self.grid.dwi_grid, volume)
        if differences:
            raise BadInputError("<memory>", "the volume is not on the DWI grid: " + "; ".join(differences))
        return self.grid.to_stack(volume.array, interpolation=interpolation)

    def model_grid_volume(self, stack: np.ndarray) -> Volume:
        """A (t, h, w) stack with the LPS geometry of the model grid (for checks and display)."""
        return self.grid.stack_volume(stack)


def prepare_input(study: Study, preprocessing: Mapping[str, Any]) -> PreparedInput:
    """The model input of ``study`` as the manifest's ``preprocessing`` block prescribes.

    Keys: ``channels`` (names from :data:`CHANNELS`; required), ``normalization``
    (channel → method of :data:`.normalization.NORMALIZATIONS`; default "none"; derived
    channels take none: ``dwi_asymmetry`` is in brain-median units clipped to ±4),
    ``in_plane_spacing_mm`` (None or absent: native spacing), ``pad_multiple`` (default 16).

    Raises:
        BadInputError: an unusable manifest block (source "model manifest").
    """
    channel_names = tuple(preprocessing.get("channels", ()))
    unknown = [name for name in channel_names if name not in CHANNELS]
    if not channel_names or unknown:
        raise BadInputError("model manifest", f"preprocessing channels must be a list of {CHANNELS}, got {list(channel_names)}")
    normalization = dict(preprocessing.get("normalization", {}) or {})
    renormalised = [name for name in DERIVED_CHANNELS if normalization.get(name, "none") != "none"]
    if renormalised:
        raise BadInputError("model manifest", f"derived channel(s) {renormalised} are normalised by their definition; give them no normalization")
    pad_multiple = int(preprocessing.get("pad_multiple", 16))
    spacing = preprocessing.get("in_plane_spacing_mm")
    if spacing is not None and not 0.1 <= float(spacing) <= 20:
        raise BadInputError("model manifest", f"in_plane_spacing_mm {spacing} is not a plausible voxel size")

    grid = plan_slice_stack(study.dwi, in_plane_spacing_mm=spacing, pad_multiple=pad_multiple)
    brain = study.foreground
    volumes = {"eadc": study.eadc, "dwi": study.dwi, "adc": study.adc}
    stacks = [
        grid.to_stack(
            symmetry.dwi_asymmetry(study.dwi, brain)
            if name == "dwi_asymmetry"
            else normalize(normalization.get(name, "none"), volumes[name].array, brain)
        )
        for name in channel_names
    ]
    return PreparedInput(
        channels=np.stack(stacks).astype(np.float32, copy=False),
        channel_names=channel_names,
        slice_axis=grid.axes_thw[0],
        plane=acquisition_plane(study.dwi, grid.axes_thw[0]),
        grid=grid,
    )
