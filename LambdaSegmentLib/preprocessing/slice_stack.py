"""The exact, invertible map between the DWI grid and the model's slice stack (t, h, w).

Three steps, each undone exactly by :meth:`SliceStackGrid.from_stack`:

1. **Reorient** without interpolation (axis permutation and flips only): t runs along
   the slice axis, and the in-plane axes are put in the radiological display
   orientation of the plane (axial: h toward posterior, w toward patient left, t toward
   superior; coronal: h toward inferior, w toward left, t toward posterior; sagittal:
   h toward inferior, w toward posterior, t toward left). The model thus sees the same
   anatomy orientation whether the file was stored LPS, RAS or anything else.
2. **Resample in-plane** (SimpleITK, linear; Gaussian anti-aliasing along h and w first
   when the spacing grows) to the model's in-plane spacing, the new field of view centred
   on the old one and covering it. Slices are never mixed: the
   stack is resampled in index space with slice positions 0, 1, 2, … on both grids, so
   every output voxel sits exactly on an input slice and its weight on neighbouring
   slices is exactly 0. Skipped when the spacing already matches (within 0.1 %).
3. **Pad** h and w to a multiple of ``pad_multiple`` (centred, zeros).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import SimpleITK as sitk

from ..io.volume import Volume
from .slice_axis import find_slice_axis, slice_normal_lps

SPACING_MATCH_TOLERANCE = 1e-3

# Display directions (LPS unit vectors) of h and w for each dominant slice-normal axis (L, P, S).
_DISPLAY_HW = {
    0: (np.array([0.0, 0.0, -1.0]), np.array([0.0, 1.0, 0.0])),  # sagittal: h inferior, w posterior
    1: (np.array([0.0, 0.0, -1.0]), np.array([1.0, 0.0, 0.0])),  # coronal: h inferior, w left
    2: (np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0])),  # axial: h posterior, w left
}


@dataclass(frozen=True)
class SliceStackGrid:
    """How arrays on the DWI grid map to (t, h, w) stacks on the model grid, and back.

    Attributes:
        dwi_grid: the reference volume (its geometry is the DWI grid).
        axes_thw: ITK axis (0 i, 1 j, 2 k) of the DWI grid feeding t, h and w.
        flips_thw: whether t, h, w run against that ITK axis.
        native_hw: (h, w) size after reorientation, before resampling.
        native_spacing_hw_mm: its in-plane spacing.
        model_spacing_hw_mm: in-plane spacing on the model grid.
        model_hw: (h, w) size after resampling, before padding.
        model_origin_hw_mm: position of the first resampled voxel in the reoriented
            native in-plane frame (native voxel 0 at 0 mm).
        padding_hw: ((before, after) along h, (before, after) along w).
    """

    dwi_grid: Volume
    axes_thw: tuple[int, int, int]
    flips_thw: tuple[bool, bool, bool]
    native_hw: tuple[int, int]
    native_spacing_hw_mm: tuple[float, float]
    model_spacing_hw_mm: tuple[float, float]
    model_hw: tuple[int, int]
    model_origin_hw_mm: tuple[float, float]
    padding_hw: tuple[tuple[int, int], tuple[int, int]]

    @property
    def resampled(self) -> bool:
        """Whether step 2 changes the in-plane grid."""
        return self.model_hw != self.native_hw or any(o != 0.0 for o in self.model_origin_hw_mm) or (
            self.model_spacing_hw_mm != self.native_spacing_hw_mm
        )

    @property
    def stack_shape(self) -> tuple[int, int, int]:
        """(t, h, w) of the model's stack, padding included."""
        (hb, ha), (wb, wa) = self.padding_hw
        t = self.dwi_grid.size_ijk[self.axes_thw[0]]
        return t, self.model_hw[0] + hb + ha, self.model_hw[1] + wb + wa

    @property
    def slice_spacing_mm(self) -> float:
        """Distance between slice centres (slice thickness plus gap), mm."""
        return float(self.dwi_grid.spacing_mm[self.axes_thw[0]])

    # Forward: DWI grid -> stack ------------------------------------------------------------

    def reorient(self, array_kji: np.ndarray) -> np.ndarray:
        """Step 1 only: (nk, nj, ni) → native (t, h, w); a view, no copy, no interpolation."""
        stack = np.transpose(array_kji, tuple(2 - axis for axis in self.axes_thw))
        flipped = tuple(position for position, flip in enumerate(self.flips_thw) if flip)
        return np.flip(stack, axis=flipped) if flipped else stack

    def to_stack(self, array_kji: np.ndarray, *, interpolation: str = "linear") -> np.ndarray:
        """An array on the DWI grid (nk, nj, ni) → float32 model stack (t, h, w)."""
        stack = np.ascontiguousarray(self.reorient(array_kji), dtype=np.float32)
        if self.resampled:
            if interpolation == "linear":
                stack = _anti_alias(stack, self.native_spacing_hw_mm, self.model_spacing_hw_mm)
            stack = _resample_stack(
                stack, self.native_spacing_hw_mm, (0.0, 0.0), self.model_hw, self.model_spacing_hw_mm, self.model_origin_hw_mm, interpolation
            )
        return np.pad(stack, ((0, 0), *self.padding_hw))

    # Backward: stack -> DWI grid -----------------------------------------------------------

    def from_stack(self, stack: np.ndarray, *, interpolation: str = "linear") -> np.ndarray:
        """A model stack (t, h, w) → array (nk, nj, ni) on the DWI grid (undoes all three steps).

        ``interpolation`` ("linear" or "nearest") only matters when step 2 resampled.
        """
        stack = np.asarray(stack)
        if stack.shape != self.stack_shape:
            raise ValueError(f"stack shape {stack.shape} differs from the prepared input's {self.stack_shape}")
        (hb, ha), (wb, wa) = self.padding_hw
        cropped = stack[:, hb : stack.shape[1] - ha, wb : stack.shape[2] - wa]
        if self.resampled:
            cropped = _resample_stack(
                np.ascontiguousarray(cropped), self.model_spacing_hw_mm, self.model_origin_hw_mm, self.native_hw, self.native_spacing_hw_mm, (0.0, 0.0), interpolation
            )
        flipped = tuple(position for position, flip in enumerate(self.flips_thw) if flip)
        native = np.flip(cropped, axis=flipped) if flipped else cropped
        inverse = np.argsort([2 - axis for axis in self.axes_thw])
        return np.ascontiguousarray(np.transpose(native, tuple(inverse)))

    # Geometry of the stack -----------------------------------------------------------------

    def stack_index_to_dwi_index(self, thw: np.ndarray) -> np.ndarray:
        """Continuous stack indices (..., 3) in (t, h, w) order → DWI-grid indices (..., 3) in (i, j, k)."""
        thw = np.asarray(thw, dtype=np.float64)
        (hb, _), (wb, _) = self.padding_hw
        native = thw.copy()
        for position, pad, index in ((1, hb, 0), (2, wb, 1)):
            native_spacing, model_spacing = self.native_spacing_hw_mm[index], self.model_spacing_hw_mm[index]
            native[..., position] = (self.model_origin_hw_mm[index] + (thw[..., position] - pad) * model_spacing) / native_spacing
        ijk = np.zeros_like(native)
        for position, (axis, flip) in enumerate(zip(self.axes_thw, self.flips_thw)):
            size = self.dwi_grid.size_ijk[axis]
            ijk[..., axis] = (size - 1 - native[..., position]) if flip else native[..., position]
        return ijk

    def stack_volume(self, stack: np.ndarray) -> Volume:
        """A stack (t, h, w) as a Volume with the model grid's LPS geometry (i = w, j = h, k = t)."""
        stack = np.asarray(stack)
        if stack.shape != self.stack_shape:
            raise ValueError(f"stack shape {stack.shape} differs from the prepared input's {self.stack_shape}")
        origin = self.dwi_grid.index_to_lps(self.stack_index_to_dwi_index(np.zeros(3)))
        columns, spacing = [], []
        for position in (2, 1, 0):  # i = w, j = h, k = t
            axis, flip = self.axes_thw[position], self.flips_thw[position]
            columns.append(self.dwi_grid.direction[:, axis] * (-1.0 if flip else 1.0))
            spacing.append(self.slice_spacing_mm if position == 0 else self.model_spacing_hw_mm[position - 1])
        return Volume(stack, tuple(spacing), tuple(origin), np.stack(columns, axis=1))


def plan_slice_stack(dwi: Volume, *, in_plane_spacing_mm: float | None, pad_multiple: int = 16) -> SliceStackGrid:
    """The slice stack for a DWI grid: slice axis from the geometry, display orientation,
    in-plane spacing ``in_plane_spacing_mm`` (None: keep the native spacing), padding."""
    slice_axis = find_slice_axis(dwi)
    normal = slice_normal_lps(dwi, slice_axis)
    dominant = int(np.argmax(np.abs(normal)))
    h_dir, w_dir = _DISPLAY_HW[dominant]
    in_plane = [axis for axis in range(3) if axis != slice_axis]
    columns = {axis: dwi.direction[:, axis] for axis in in_plane}

    def score(h_axis: int, w_axis: int) -> float:
        return abs(columns[h_axis] @ h_dir) + abs(columns[w_axis] @ w_dir)

    h_axis, w_axis = max(((in_plane[0], in_plane[1]), (in_plane[1], in_plane[0])), key=lambda pair: score(*pair))
    flips = (
        bool(normal[dominant] < 0),
        bool(columns[h_axis] @ h_dir < 0),
        bool(columns[w_axis] @ w_dir < 0),
    )
    native_hw = (dwi.size_ijk[h_axis], dwi.size_ijk[w_axis])
    native_spacing = (float(dwi.spacing_mm[h_axis]), float(dwi.spacing_mm[w_axis]))
    model_spacing, model_hw, model_origin = native_spacing, native_hw, (0.0, 0.0)
    if in_plane_spacing_mm is not None:
        target = float(in_plane_spacing_mm)
        if not all(abs(s - target) <= SPACING_MATCH_TOLERANCE * target for s in native_spacing):
            model_spacing = (target, target)
            # ceil: the model grid covers the whole native field of view, centred on it
            model_hw = tuple(max(1, math.ceil(n * s / target - 1e-6)) for n, s in zip(native_hw, native_spacing))
            model_origin = tuple((n - 1) * s / 2 - (m - 1) * target / 2 for n, s, m in zip(native_hw, native_spacing, model_hw))
    padding = tuple(_centred_padding(size, pad_multiple) for size in model_hw)
    return SliceStackGrid(
        dwi_grid=dwi,
        axes_thw=(slice_axis, h_axis, w_axis),
        flips_thw=flips,
        native_hw=native_hw,
        native_spacing_hw_mm=native_spacing,
        model_spacing_hw_mm=model_spacing,
        model_hw=model_hw,
        model_origin_hw_mm=model_origin,
        padding_hw=padding,
    )


def _centred_padding(size: int, multiple: int) -> tuple[int, int]:
    total = (-size) % max(1, multiple)
    return total // 2, total - total // 2


def _anti_alias(stack: np.ndarray, spacing_hw: tuple[float, float], target_hw: tuple[float, float]) -> np.ndarray:
    """Gaussian low-pass along h and w (never t) before downsampling, so noise and fine
    detail are averaged instead of aliased: σ = (factor − 1)/2 input voxels, the rule of
    scikit-image's ``resize(anti_aliasing=True)``; nothing where the spacing does not grow."""
    image = sitk.GetImageFromArray(stack)
    image.SetSpacing((spacing_hw[1], spacing_hw[0], 1.0))
    for itk_axis, position in ((0, 1), (1, 0)):  # ITK i = w, j = h
        factor = target_hw[position] / spacing_hw[position]
        if factor > 1 + SPACING_MATCH_TOLERANCE and stack.shape[2 - itk_axis] >= 4:
            sigma_mm = (factor - 1) / 2 * spacing_hw[position]
            image = sitk.RecursiveGaussian(image, sigma_mm, False, sitk.RecursiveGaussianImageFilter.ZeroOrder, itk_axis)
    return sitk.GetArrayFromImage(image)


def _resample_stack(
    stack: np.ndarray,
    spacing_hw: tuple[float, float],
    origin_hw: tuple[float, float],
    out_hw: tuple[int, int],
    out_spacing_hw: tuple[float, float],
    out_origin_hw: tuple[float, float],
    interpolation: str,
) -> np.ndarray:
    """Resample every slice of a (t, h, w) stack in-plane with SimpleITK.

    The stack is an ITK image (i = w, j = h, k = t) with slice spacing 1 and origin 0
    on both sides, so output slice k sits exactly on input slice k (no slice mixing).
    """
    interpolator = {"linear": sitk.sitkLinear, "nearest": sitk.sitkNearestNeighbor}[interpolation]
    image = sitk.GetImageFromArray(stack)
    image.SetSpacing((spacing_hw[1], spacing_hw[0], 1.0))
    image.SetOrigin((origin_hw[1], origin_hw[0], 0.0))
    resampled = sitk.Resample(
        image,
        (int(out_hw[1]), int(out_hw[0]), stack.shape[0]),
        sitk.Transform(),
        interpolator,
        (out_origin_hw[1], out_origin_hw[0], 0.0),
        (out_spacing_hw[1], out_spacing_hw[0], 1.0),
        (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0),
        0.0,
        image.GetPixelID(),
    )
    return sitk.GetArrayFromImage(resampled)
