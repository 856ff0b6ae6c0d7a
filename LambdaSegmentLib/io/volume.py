"""The one image type: a voxel array that never travels without its geometry.

Conventions (ITK's, so SimpleITK round trips are exact):
- ``array`` is indexed ``[k, j, i]`` (slowest to fastest), i.e. NumPy order of
  ``SimpleITK.GetArrayFromImage``; ``spacing_mm``, ``origin_mm`` and the columns of
  ``direction`` are in ``(i, j, k)`` order.
- Physical space is LPS (DICOM/ITK patient coordinates), in millimetres. A voxel
  index (i, j, k) sits at ``origin + direction @ (spacing * (i, j, k))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import SimpleITK as sitk


@dataclass(frozen=True)
class Volume:
    """A 3D scalar image with its geometry.

    Attributes:
        array: voxel values shaped (nk, nj, ni).
        spacing_mm: voxel spacing along (i, j, k) in mm.
        origin_mm: LPS position of voxel (0, 0, 0) in mm.
        direction: 3x3 matrix whose columns are the LPS unit vectors of the i, j, k axes.
    """

    array: np.ndarray
    spacing_mm: tuple[float, float, float]
    origin_mm: tuple[float, float, float] = (0.0, 0.0, 0.0)
    direction: np.ndarray = field(default_factory=lambda: np.eye(3))

    def __post_init__(self) -> None:
        array = np.asarray(self.array)
        if array.ndim != 3:
            raise ValueError(f"a Volume holds a 3D array, got shape {array.shape}")
        object.__setattr__(self, "array", array)
        object.__setattr__(self, "spacing_mm", tuple(float(s) for s in self.spacing_mm))
        object.__setattr__(self, "origin_mm", tuple(float(o) for o in self.origin_mm))
        direction = np.asarray(self.direction, dtype=np.float64).reshape(3, 3)
        object.__setattr__(self, "direction", direction)

    @property
    def size_ijk(self) -> tuple[int, int, int]:
        """Number of voxels along (i, j, k)."""
        return tuple(int(n) for n in self.array.shape[::-1])

    @property
    def voxel_volume_mm3(self) -> float:
        """Volume of one voxel in mm^3."""
        return float(np.prod(self.spacing_mm))

    def with_array(self, array: np.ndarray) -> "Volume":
        """The same geometry with another array of the same shape."""
        array = np.asarray(array)
        if array.shape != self.array.shape:
            raise ValueError(f"array shape {array.shape} differs from the volume's {self.array.shape}")
        return Volume(array, self.spacing_mm, self.origin_mm, self.direction)

    def index_to_lps(self, ijk: np.ndarray) -> np.ndarray:
        """LPS positions (mm) of continuous indices ``ijk`` shaped (..., 3) in (i, j, k) order."""
        ijk = np.asarray(ijk, dtype=np.float64)
        return np.asarray(self.origin_mm) + (ijk * np.asarray(self.spacing_mm)) @ self.direction.T

    def ijk_to_lps_matrix(self) -> np.ndarray:
        """4x4 homogeneous matrix mapping (i, j, k, 1) to LPS millimetres."""
        matrix = np.eye(4)
        matrix[:3, :3] = self.direction * np.asarray(self.spacing_mm)
        matrix[:3, 3] = self.origin_mm
        return matrix

    def to_sitk(self) -> sitk.Image:
        """A SimpleITK image with exactly this geometry."""
        image = sitk.GetImageFromArray(np.ascontiguousarray(self.array))
        image.SetSpacing(self.spacing_mm)
        image.SetOrigin(self.origin_mm)
        image.SetDirection(tuple(self.direction.flatten()))
        return image

    @classmethod
    def from_sitk(cls, image: sitk.Image) -> "Volume":
        """Wrap a 3D scalar SimpleITK image (geometry copied exactly)."""
        if image.GetDimension() != 3 or image.GetNumberOfComponentsPerPixel() != 1:
            raise ValueError(
                f"expected a 3D scalar image, got {image.GetDimension()}D with "
                f"{image.GetNumberOfComponentsPerPixel()} component(s) per voxel"
            )
        return cls(
            sitk.GetArrayFromImage(image),
            image.GetSpacing(),
            image.GetOrigin(),
            np.asarray(image.GetDirection()).reshape(3, 3),
        )
