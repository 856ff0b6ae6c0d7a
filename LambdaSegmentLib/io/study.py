"""A diffusion study as the model needs it: DWI, ADC in 10⁻³ mm²/s and eADC on one grid.

Accepted inputs (exactly one route):

- DWI (b≈1000 trace) + ADC in mm²/s, 10⁻³ mm²/s or 10⁻⁶ mm²/s (detected or stated);
- DWI + eADC (= S_b/S_0 = exp(−b·ADC));
- b0 + b1000 (ADC = ln(S_0/S_b)/b, eADC = S_b/S_0), the b1000 given as ``b1000`` or ``dwi``;
- a 4D multi-b DWI with its b-values: the mean of the b≤50 volumes is b0, the trace
  (geometric mean) of the volumes at the highest b in 500–1000 s/mm² is the DWI; an ADC or
  eADC may be given alongside, otherwise ADC and eADC are computed as for b0 + b1000.

The second image must be on the DWI's grid (within the tolerance of :mod:`.grid`); it is
resampled onto it only with ``resample_to_dwi=True``. The DWI grid is the study's grid:
every output of the library lands on it.

Warnings about the inputs (:class:`~LambdaSegmentLib.errors.InputWarning`, e.g. a NIfTI
whose qform and sform disagree) are issued as usual and also kept in ``Study.warnings``,
so that they travel with the study (out of a DataLoader worker, into the report).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np
import SimpleITK as sitk

from ..errors import BadInputError, InputWarning
from . import units
from .foreground import brain_foreground
from .grid import grid_differences, overlap, resample_onto
from .reading import check_image, read_image_and_bvalues, volume_from_image
from .volume import Volume

MEMORY = "<memory>"

#: b-values (s/mm²) accepted as "b0" and as the diffusion-weighted trace in a multi-b series.
MAX_B0 = 50.0
DWI_B_RANGE = (500.0, 1000.0)
DEFAULT_B_VALUE = 1000.0

ImageInput = str | Path | Volume


@dataclass(frozen=True)
class Study:
    """One diffusion study on the DWI grid.

    Attributes:
        dwi: b≈1000 trace image (float32, scanner units).
        adc: ADC in 10⁻³ mm²/s (float32); 0 where there is no data.
        eadc: exp(−b·ADC) = S_b/S_0, unitless 0–1 (float32); 1 where the ADC is 0 (no
            data), as exp(−b·0); an eADC given as input is kept as given.
        b_value: b-value of ``dwi`` in s/mm².
        adc_unit_detected: how the ADC was given: "mm2/s", "1e-3 mm2/s", "1e-6 mm2/s",
            "eadc" (derived from an eADC) or "b0+b1000" (computed).
        sources: role ("dwi", "adc", "eadc", "b0", "b1000") → path, or "<memory>".
        warnings: the input warnings issued while loading, one line each naming the file.
    """

    dwi: Volume
    adc: Volume
    eadc: Volume
    b_value: float
    adc_unit_detected: str
    sources: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @cached_property
    def foreground(self) -> np.ndarray:
        """bool (nk, nj, ni), read-only: :func:`.foreground.brain_foreground` of ``dwi``, the
        statistics mask of the unit checks, the normalisation and the ADC rule.

        Computed once per Study (0.07 s on a 24 × 256² study,
        ``benchmarks/results/brain_mask_timing.csv``; every stage of a segmentation needs it).
        A cached property, not a field, so that
        ``dataclasses.replace(study, dwi=...)`` can never carry a stale mask to a new DWI.
        """
        return _read_only(brain_foreground(self.dwi))


def load_study(
    *,
    dwi: ImageInput | None = None,
    adc: ImageInput | None = None,
    eadc: ImageInput | None = None,
    b0: ImageInput | None = None,
    b1000: ImageInput | None = None,
    bvalues: Sequence[float] | str | Path | None = None,
    resample_to_dwi: bool = False,
    adc_unit: str = "auto",
    b_value: float | None = None,
) -> Study:
    """Read, check and convert a study (paths or in-memory Volumes).

    Args:
        dwi: the b≈1000 trace DWI, or a 4D multi-b DWI (then ``bvalues`` is required).
        adc: ADC map (any of the three units).
        eadc: eADC map (0–1).
        b0, b1000: b0 and b≈1000 images (``b1000`` may be given as ``dwi`` instead).
        bvalues: b-values (s/mm²) of a 4D DWI's volumes: a sequence or an FSL ``.bval`` file.
        resample_to_dwi: resample a second image on another grid onto the DWI grid
            (linear) instead of refusing it.
        adc_unit: "auto" (detect from the brain median) or "mm2/s", "1e-3 mm2/s", "1e-6 mm2/s".
        b_value: b-value of a 3D DWI (s/mm²; default 1000); ignored for a 4D DWI.

    Raises:
        BadInputError: naming the file and the problem, for any unusable input.

    Warns:
        InputWarning: naming the file, for inputs that are used but deserve a look; the
            same lines are in ``Study.warnings``.
    """
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            study, foreground = _load_study(dwi=dwi, adc=adc, eadc=eadc, b0=b0, b1000=b1000, bvalues=bvalues,
                                resample_to_dwi=resample_to_dwi, adc_unit=adc_unit, b_value=b_value)
    finally:  # handed on to the caller's filters and display, also when the study is refused
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno, source=warning.source)
    notes = tuple(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, InputWarning)))
    loaded = dataclasses.replace(study, warnings=notes)
    # The units check needed the foreground before the Study existed: fill the cached property's
    # own slot with it (the same function of the same DWI) instead of computing it again.
    loaded.__dict__["foreground"] = _read_only(foreground)
    return loaded


def _load_study(
    *,
    dwi: ImageInput | None,
    adc: ImageInput | None,
    eadc: ImageInput | None,
    b0: ImageInput | None,
    b1000: ImageInput | None,
    bvalues: Sequence[float] | str | Path | None,
    resample_to_dwi: bool,
    adc_unit: str,
    b_value: float | None,
) -> tuple[Study, np.ndarray]:
    """The study and its DWI's brain foreground (bool (nk, nj, ni)), which the units checks computed."""
    labels: dict[str, str] = {}  # role → path, or "<memory> (role)" for error messages
    if dwi is not None and b1000 is not None:
        raise BadInputError(None, "the b1000 image was given twice (as dwi and as b1000); give it once")
    if sum(x is not None for x in (adc, eadc, b0)) > 1:
        raise BadInputError(None, "give one of ADC, eADC or b0 with the DWI, not several")
    dwi_input = dwi if dwi is not None else b1000
    dwi_role = "dwi" if dwi is not None else "b1000"
    if dwi_input is None:
        raise BadInputError(None, "a DWI (b≈1000 trace) image is required")

    dwi_image, labels[dwi_role], tag_bvalues = _load(dwi_input, dwi_role)
    if tag_bvalues is not None and bvalues is None:
        bvalues = tag_bvalues  # a DICOM series holding several b-values carries them in its tags
    b0_volume: Volume | None = None
    if isinstance(dwi_image, sitk.Image) and dwi_image.GetDimension() == 4:
        if bvalues is None:
            raise BadInputError(labels[dwi_role], f"is a 4D image with {dwi_image.GetSize()[3]} volumes but no b-values were given (bvalues / --bvalues)")
        dwi_volume, b0_volume, b_value = _split_multi_b(dwi_image, _read_bvalues(bvalues), labels[dwi_role])
    else:
        dwi_volume = volume_from_image(dwi_image, labels[dwi_role]) if isinstance(dwi_image, sitk.Image) else dwi_image
        if bvalues is not None:
            raise BadInputError(labels[dwi_role], "b-values were given but the DWI is 3D; give b_value for a 3D DWI")
        b_value = DEFAULT_B_VALUE if b_value is None else float(b_value)
    if not 0 < b_value <= 5000:
        raise BadInputError(labels[dwi_role], f"b-value {b_value:g} s/mm² is not a diffusion weighting")
    dwi_volume = _check_not_empty(dwi_volume.with_array(dwi_volume.array.astype(np.float32)), labels[dwi_role])
    if not np.any(dwi_volume.array > 0):
        raise BadInputError(labels[dwi_role], "has no positive voxel; a DWI has signal in the brain")

    second: dict[str, Volume] = {}
    for role, given in (("adc", adc), ("eadc", eadc), ("b0", b0)):
        if given is None:
            continue
        image, labels[role], _ = _load(given, role)
        volume = volume_from_image(image, labels[role]) if isinstance(image, sitk.Image) else image
        volume = _check_not_empty(volume, labels[role])
        second[role] = _on_dwi_grid(volume, dwi_volume, role, labels[role], labels[dwi_role], resample_to_dwi)
    if b0_volume is not None and not second:
        second["b0"] = b0_volume
        labels["b0"] = labels[dwi_role]
    if not second:
        raise BadInputError(labels[dwi_role], "an ADC, eADC or b0 image is needed with the DWI")

    foreground = brain_foreground(dwi_volume)
    if "adc" in second:
        role_source = labels["adc"]
        unit = units.detect_adc_unit(second["adc"], foreground, role_source) if adc_unit == "auto" else adc_unit
        adc_volume = units.adc_to_canonical(second["adc"], unit, foreground, role_source)
        eadc_volume = units.eadc_from_adc(adc_volume, b_value)
    elif "eadc" in second:
        if adc_unit != "auto":
            raise BadInputError(labels["eadc"], f"adc_unit={adc_unit!r} was given but the input is an eADC (unitless)")
        eadc_volume = units.check_eadc(second["eadc"], foreground, labels["eadc"])
        adc_volume, unit = units.adc_from_eadc(eadc_volume, b_value), "eadc"
        _check_plausible_adc(adc_volume, foreground, labels["eadc"], "eADC")
    else:
        b0_checked = second["b0"].with_array(second["b0"].array.astype(np.float32))
        adc_volume, eadc_volume = units.adc_and_eadc_from_b0_b1000(b0_checked, dwi_volume, b_value)
        unit = "b0+b1000"
        _check_plausible_adc(adc_volume, foreground, labels["b0"], "b0 and b1000")
    sources = {role: MEMORY if label.startswith(MEMORY) else label for role, label in labels.items()}
    return Study(dwi_volume, adc_volume, eadc_volume, float(b_value), unit, sources), foreground


def _read_only(mask: np.ndarray) -> np.ndarray:
    mask.flags.writeable = False
    return mask


def _load(given: ImageInput, role: str) -> tuple[Volume | sitk.Image, str, list[float] | None]:
    """A Volume (in memory, checked) or a SimpleITK image read from disk, its label for
    messages, and the b-values of a multi-b DICOM series (else None)."""
    if isinstance(given, Volume):
        label = f"{MEMORY} ({role})"
        check_image(given.to_sitk(), Path(label))
        return given, label, None
    if not isinstance(given, (str, Path)):
        raise BadInputError(None, f"{role} must be a path or a Volume, got {type(given).__name__}")
    image, bvalues = read_image_and_bvalues(given)
    return image, str(given), bvalues


def _check_not_empty(volume: Volume, source: str) -> Volume:
    if not np.any(volume.array):
        raise BadInputError(source, "is all zero")
    return volume


def _on_dwi_grid(volume: Volume, dwi: Volume, role: str, source: str, dwi_source: str, resample: bool) -> Volume:
    """The volume on exactly the DWI grid: as is (within tolerance) or resampled if allowed."""
    differences = grid_differences(dwi, volume)
    if not differences:
        return dwi.with_array(volume.array)  # the DWI's geometry, bit for bit
    name = role.upper() if role != "eadc" else "eADC"
    if not overlap(dwi, volume):
        raise BadInputError(source, f"the {name} does not overlap the DWI ({dwi_source}) in space: " + "; ".join(differences))
    if not resample:
        raise BadInputError(
            source,
            f"the {name} is not on the DWI grid ({dwi_source}): " + "; ".join(differences)
            + " — pass resample_to_dwi=True (--resample-to-dwi) to resample it onto the DWI grid",
        )
    return resample_onto(dwi, volume, interpolation="linear")


def _check_plausible_adc(adc: Volume, foreground: np.ndarray, source: str, route: str) -> None:
    median = units.brain_median(np.asarray(adc.array, dtype=np.float64), foreground)
    units.refuse_missing_brain_values(median, source)
    low, high = units.PLAUSIBLE_BRAIN_MEDIAN_ADC
    if not low <= median <= high:
        raise BadInputError(
            source,
            f"the ADC computed from the {route} has a brain median of {median:.4g} ×10⁻³ mm²/s, outside the "
            f"plausible {low:g}–{high:g} (wrong images or b-value?)",
        )


def _read_bvalues(bvalues: Sequence[float] | str | Path) -> list[float]:
    if isinstance(bvalues, (str, Path)):
        path = Path(bvalues)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise BadInputError(path, f"b-values file cannot be read: {error.strerror}") from None
        try:
            return [float(token) for token in text.split()]
        except ValueError:
            raise BadInputError(path, "b-values file must hold numbers separated by spaces (FSL .bval)") from None
    try:
        return [float(b) for b in bvalues]
    except (TypeError, ValueError):
        raise BadInputError(None, f"b-values must be numbers, got {bvalues!r}") from None


def _split_multi_b(image: sitk.Image, bvalues: list[float], source: str) -> tuple[Volume, Volume, float]:
    """(b≈1000 trace, b0, its b-value) from a 4D multi-b image.

    b0 = mean of the volumes with b ≤ 50; DWI = geometric mean (the trace) of the volumes
    at the highest b-value within 500–1000 s/mm².
    """
    count = image.GetSize()[3]
    if len(bvalues) != count:
        raise BadInputError(source, f"has {count} volumes but {len(bvalues)} b-values were given")
    size = list(image.GetSize()[:3]) + [0]
    volumes = [Volume.from_sitk(sitk.Extract(image, size, [0, 0, 0, index])) for index in range(count)]
    b = np.asarray(bvalues)
    low_indices = np.flatnonzero(b <= MAX_B0)
    candidates = b[(b >= DWI_B_RANGE[0]) & (b <= DWI_B_RANGE[1])]
    if low_indices.size == 0 or candidates.size == 0:
        raise BadInputError(
            source,
            f"b-values {sorted(set(bvalues))} lack a b0 (b ≤ {MAX_B0:g}) or a b in {DWI_B_RANGE[0]:g}–{DWI_B_RANGE[1]:g} s/mm²; "
            "give b0 and b1000 (or DWI and ADC) separately",
        )
    b_high = float(candidates.max())
    high_indices = np.flatnonzero(b == b_high)
    b0 = np.mean([volumes[i].array.astype(np.float64) for i in low_indices], axis=0)
    stack = np.stack([np.clip(volumes[i].array.astype(np.float64), 0, None) for i in high_indices])
    trace = np.exp(np.mean(np.log(np.where(stack > 0, stack, 1.0)), axis=0)) * np.all(stack > 0, axis=0)
    reference = volumes[0]
    return reference.with_array(trace.astype(np.float32)), reference.with_array(b0.astype(np.float32)), b_high
