"""Segmenting a DWI + ADC/eADC pair for the Slicer module, in this process or in a child process.

``segment_volumes`` is the one path from two in-memory ``Volume``s to a segmentation:
it builds the ``Study`` with ``load_study`` (units checked and converted there) and runs
``segment_study``. The Slicer module calls it directly for scripted use and its self-test.

``SegmentationJob`` runs the same function in a child Python process so that Slicer's GUI
stays responsive and Cancel is immediate: a Python thread inside Slicer would compete
with the GUI for the interpreter lock during the pre- and post-processing, and a torch
forward pass cannot be interrupted, whereas a process can be terminated at any moment
and returns all its memory. The parent and the child talk through files in a private
folder (inputs as NRRD with exact geometry, progress and result as JSON, the mask as
NRRD, the probability too); the parent polls (the Slicer widget does so from a QTimer), so no thread is needed.

Nothing here imports Slicer, VTK or Qt.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume

SECOND_IMAGE_KINDS = ("auto", "adc", "eadc")
ADC_UNITS = ("auto", "mm2/s", "1e-3 mm2/s", "1e-6 mm2/s")

#: eADC = S_b/S_0 lies in 0-1; an ADC map in 10^-3 mm^2/s has CSF near 3, so many values above 1.
EADC_UPPER_PERCENTILE_LIMIT = 1.05
#: ... and an ADC map in mm^2/s has every value below 0.005, far below a typical eADC.
EADC_MEDIAN_LOWER_LIMIT = 0.05

Progress = Callable[[float, str], None]
"""Called as ``progress(fraction 0-1, stage text)``."""


def guess_second_image_kind(volume: Volume, name: str = "") -> str:
    """``"adc"`` or ``"eadc"`` for the image given beside the DWI, from its name and its values.

    A name containing "eadc" or "exponential" means eADC. Otherwise the values decide,
    whatever the name says: eADC when 99 % of the nonzero voxels are at most 1.05 and their
    median is at least 0.05 (ADC in 10^-3 mm^2/s has CSF near 3; ADC in mm^2/s stays below
    0.005; in 10^-6 mm^2/s it is in the hundreds). The values win over a name such as
    "ADC" because an eADC's brain median (~0.45) would pass as an ADC in 10^-3 mm^2/s.
    """
    lowered = name.lower()
    if "eadc" in lowered or "exponential" in lowered:
        return "eadc"
    return "eadc" if values_look_like_eadc(volume) else "adc"


def values_look_like_eadc(volume: Volume) -> bool:
    """Whether 99 % of the nonzero voxels are at most 1.05 and their median at least 0.05 (see above)."""
    values = np.asarray(volume.array, dtype=np.float64)
    nonzero = values[values != 0]
    if nonzero.size == 0:
        return False  # load_study refuses an all-zero image with a clear message
    upper = float(np.percentile(nonzero, 99))
    return upper <= EADC_UPPER_PERCENTILE_LIMIT and float(np.median(nonzero)) >= EADC_MEDIAN_LOWER_LIMIT


def build_study(dwi: Volume, second: Volume, *, kind: str = "auto", adc_unit: str = "auto", second_name: str = "") -> Any:
    """The ``Study`` of a DWI and an ADC or eADC (``kind``: auto, adc, eadc; ``adc_unit`` for an ADC)."""
    from LambdaSegmentLib.io import load_study

    if kind not in SECOND_IMAGE_KINDS:
        raise BadInputError("ADC kind", f"unknown kind {kind!r}; use one of {', '.join(SECOND_IMAGE_KINDS)}")
    if adc_unit not in ADC_UNITS:
        raise BadInputError("ADC unit", f"unknown unit {adc_unit!r}; use one of {', '.join(ADC_UNITS)}")
    resolved = guess_second_image_kind(second, second_name) if kind == "auto" else kind
    if kind == "adc" and values_look_like_eadc(second):
        # An eADC's brain median (~0.45) is also a plausible ADC in 10^-3 mm^2/s, so the unit
        # check alone would accept it and the model would see nonsense.
        raise BadInputError(
            second_name or "ADC",
            "was chosen as an ADC but its values look like an eADC (all within 0-1.05, no CSF-like values "
            "near 3); choose eADC or Auto-detect",
        )
    if resolved == "eadc":
        if adc_unit != "auto":
            raise BadInputError("ADC unit", f"an eADC is unitless but the unit {adc_unit!r} was chosen")
        return load_study(dwi=dwi, eadc=second)
    return load_study(dwi=dwi, adc=second, adc_unit=adc_unit)


def segment_volumes(
    dwi: Volume,
    second: Volume,
    *,
    kind: str = "auto",
    adc_unit: str = "auto",
    second_name: str = "",
    device: str = "auto",
    package_dir: str | Path | None = None,
    progress: Progress | None = None,
) -> tuple[Any, Any, Any]:
    """Segment the infarct: returns (``Study``, ``Segmentation``, ``ModelPackage``).

    Args:
        dwi: b~1000 trace DWI.
        second: ADC (any of the three units) or eADC, on the DWI grid.
        kind, adc_unit, second_name: see ``build_study``.
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        package_dir: a model package folder; None = the bundled model.
        progress: called with the fraction done and the stage.

    Raises:
        BadInputError: anything wrong with the images, the choices or the package.
    """
    from LambdaSegmentLib.inference import load_model_package, segment_study

    report = progress or (lambda fraction, stage: None)
    report(0.02, "Checking the images")
    study = build_study(dwi, second, kind=kind, adc_unit=adc_unit, second_name=second_name)
    report(0.10, "Loading the model")
    package = load_model_package(package_dir)
    report(0.15, "Segmenting")
    segmentation = segment_study(
        study, package, device=device, progress=lambda done, total: report(0.15 + 0.8 * done / max(total, 1), "Segmenting")
    )
    return study, segmentation, package


def result_info(study: Any, segmentation: Any, package: Any) -> dict[str, Any]:
    """What a run leaves beside its mask (JSON-ready): model, device, time, threshold, input facts."""
    return {
        "model": package.identity(),
        "device": segmentation.device,
        "seconds": float(segmentation.seconds),
        "threshold": float(segmentation.threshold),
        "adc_unit_detected": study.adc_unit_detected,
        "b_value": float(study.b_value),
        "low_confidence_mean_probability": package.low_confidence_below,
        "brain_volume_ml": float(segmentation.brain_volume_ml),
        "brain_mask_method": segmentation.brain_mask_method,
    }


def canonical_adc(second: Volume, adc_unit_detected: str, b_value: float) -> Volume:
    """The ADC in the library's 10^-3 mm^2/s from the image given beside the DWI, as ``load_study``
    read it (``adc_unit_detected`` and ``b_value`` from ``result_info``): for the lesion table
    after the segmentation, without re-checking the inputs."""
    from LambdaSegmentLib.io.units import ADC_UNIT_TO_CANONICAL, adc_from_eadc

    if adc_unit_detected == "eadc":
        return adc_from_eadc(second, b_value)
    if adc_unit_detected not in ADC_UNIT_TO_CANONICAL:
        raise BadInputError("ADC unit", f"cannot convert an ADC given as {adc_unit_detected!r}")
    factor = ADC_UNIT_TO_CANONICAL[adc_unit_detected]
    return second.with_array((np.asarray(second.array, dtype=np.float64) * factor).astype(np.float32))


# ---------------------------------------------------------------------------------------
# The child process


def _write_json_atomically(data: dict[str, Any], path: Path) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)  # readers never see half a file


def run_job(folder: str | Path) -> int:
    """Child side: segment the job in ``folder``; exit code 0, 2 (bad input) or 1."""
    import SimpleITK as sitk

    folder = Path(folder)
    request = json.loads((folder / "request.json").read_text(encoding="utf-8"))

    def progress(fraction: float, stage: str) -> None:
        _write_json_atomically({"fraction": fraction, "stage": stage}, folder / "progress.json")

    try:
        dwi = Volume.from_sitk(sitk.ReadImage(str(folder / "dwi.nrrd")))
        second = Volume.from_sitk(sitk.ReadImage(str(folder / "second.nrrd")))
        study, segmentation, package = segment_volumes(
            dwi,
            second,
            kind=request["kind"],
            adc_unit=request["adc_unit"],
            second_name=request.get("second_name", ""),
            device=request["device"],
            package_dir=request.get("package_dir"),
            progress=progress,
        )
        progress(0.97, "Writing the result")
        sitk.WriteImage(segmentation.mask.to_sitk(), str(folder / "mask.nrrd"), True)
        sitk.WriteImage(segmentation.probability.to_sitk(), str(folder / "probability.nrrd"), True)
        sitk.WriteImage(segmentation.brain.to_sitk(), str(folder / "brain.nrrd"), True)
        _write_json_atomically(result_info(study, segmentation, package), folder / "result.json")
        return 0
    except BadInputError as error:
        _write_json_atomically({"message": str(error), "bad_input": True}, folder / "error.json")
        return 2
    except Exception as error:  # reported to the parent, which shows it; the traceback goes to the log
        _write_json_atomically({"message": f"{type(error).__name__}: {error}", "bad_input": False}, folder / "error.json")
        raise


# ---------------------------------------------------------------------------------------
# The parent side


@dataclass(frozen=True)
class JobStatus:
    """Where a job stands: ``running``, the ``fraction`` done (0-1) and the current ``stage``."""

    running: bool
    fraction: float
    stage: str


class JobCancelled(RuntimeError):
    """The job was cancelled before it finished."""


class SegmentationJob:
    """A segmentation running in a child process; poll it, cancel it, collect its mask.

    Use ``SegmentationJob.start(...)``, then call ``poll()`` until ``running`` is False,
    then ``result()``. ``cancel()`` terminates the child at once. The job's private
    folder is deleted when the result is collected or the job is cancelled.
    """

    def __init__(self, folder: Path, process: subprocess.Popen) -> None:
        self.folder = folder
        self.process = process
        self.cancelled = False
        #: The brain mask (uint8, DWI grid) once ``result()`` has collected it.
        self.brain: Volume | None = None

    @classmethod
    def start(
        cls,
        dwi: Volume,
        second: Volume,
        *,
        kind: str = "auto",
        adc_unit: str = "auto",
        second_name: str = "",
        device: str = "auto",
        package_dir: str | Path | None = None,
        python: str | None = None,
    ) -> "SegmentationJob":
        """Write the inputs into a new private folder and start the child ``python`` (default: this one)."""
        import SimpleITK as sitk

        folder = Path(tempfile.mkdtemp(prefix="lambdasegment-job-"))
        try:
            sitk.WriteImage(dwi.to_sitk(), str(folder / "dwi.nrrd"))
            sitk.WriteImage(second.to_sitk(), str(folder / "second.nrrd"))
            request = {
                "kind": kind,
                "adc_unit": adc_unit,
                "second_name": second_name,
                "device": device,
                "package_dir": None if package_dir is None else str(package_dir),
            }
            (folder / "request.json").write_text(json.dumps(request))
            library_parent = str(Path(__file__).resolve().parents[1])
            environment = dict(os.environ)
            environment["PYTHONPATH"] = os.pathsep.join(p for p in (library_parent, environment.get("PYTHONPATH")) if p)
            with open(folder / "log.txt", "wb") as log:
                process = subprocess.Popen(
                    [python or sys.executable, "-m", "LambdaSegmentLib.slicer_job", str(folder)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=environment,
                )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return cls(folder, process)

    def poll(self) -> JobStatus:
        """The job's status now (never blocks)."""
        running = self.process.poll() is None
        try:
            progress = json.loads((self.folder / "progress.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            progress = {"fraction": 0.0, "stage": "Starting"}
        return JobStatus(running, float(progress["fraction"]), str(progress["stage"]))

    def cancel(self) -> None:
        """Terminate the child now and delete the job's folder."""
        self.cancelled = True
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def wait(self, poll_seconds: float = 0.2) -> JobStatus:
        """Block until the child ends (for scripts and tests; the GUI polls instead)."""
        while (status := self.poll()).running:
            time.sleep(poll_seconds)
        return status

    def result(self) -> tuple[Volume, Volume, dict[str, Any]]:
        """The mask (uint8, DWI grid), the probability (float32, DWI grid) and the run's
        ``result_info``; cleans up the folder. The brain mask (uint8, DWI grid) is left in ``self.brain``.

        Raises:
            JobCancelled: after ``cancel()``.
            BadInputError: the child refused the inputs (its message).
            RuntimeError: the child failed otherwise (message and log tail).
        """
        import SimpleITK as sitk

        if self.cancelled:
            raise JobCancelled("the segmentation was cancelled")
        if self.process.poll() is None:
            raise RuntimeError("the segmentation is still running")
        try:
            error_file = self.folder / "error.json"
            if error_file.exists():
                error = json.loads(error_file.read_text(encoding="utf-8"))
                if error.get("bad_input"):
                    raise BadInputError(None, error["message"])
                raise RuntimeError(f"segmentation failed: {error['message']}\n{self._log_tail()}")
            if self.process.returncode != 0 or not (self.folder / "mask.nrrd").exists():
                raise RuntimeError(f"segmentation process ended with code {self.process.returncode}\n{self._log_tail()}")
            mask = Volume.from_sitk(sitk.ReadImage(str(self.folder / "mask.nrrd")))
            probability = Volume.from_sitk(sitk.ReadImage(str(self.folder / "probability.nrrd")))
            self.brain = Volume.from_sitk(sitk.ReadImage(str(self.folder / "brain.nrrd")))
            info = json.loads((self.folder / "result.json").read_text(encoding="utf-8"))
            return mask, probability, info
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _log_tail(self, characters: int = 2000) -> str:
        try:
            return (self.folder / "log.txt").read_text(errors="replace")[-characters:]
        except OSError:
            return ""


def child_main(argv: list[str]) -> int:
    """The job process's entry (``python -m LambdaSegmentLib.slicer_job FOLDER``): the process
    ends with its job, so its heap keeps freed blocks for reuse (``heap.keep_freed_memory``:
    faster forward passes on wide grids, the same masks), then ``run_job(FOLDER)``."""
    from LambdaSegmentLib.heap import keep_freed_memory

    keep_freed_memory()
    return run_job(argv[1])


if __name__ == "__main__":
    sys.exit(child_main(sys.argv))
