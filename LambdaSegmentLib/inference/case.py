"""One case from input files to output files: the work behind ``segment``, ``segment-dir`` and ``demo``.

Order matters for the user's data: every output path is checked *before* any work is
done (an existing file is refused unless ``overwrite``; an output may never be one of the
inputs, not even with ``overwrite``), and each file is written atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from LambdaSegmentLib.errors import BadInputError

from .engine import Progress, Segmentation, segment_study
from .package import ModelPackage

if TYPE_CHECKING:
    from LambdaSegmentLib.reports.pages import PageWriter, PendingPage

INPUT_ROLES = ("dwi", "adc", "eadc", "b0", "b1000")
MASK_SUFFIXES = (".nii", ".nii.gz", ".nrrd", ".seg.nrrd")


@dataclass(frozen=True)
class CaseInputs:
    """Paths of one case's images (role -> path) and how to read them."""

    images: dict[str, Path]
    bvalues: str | None = None
    b_value: float | None = None
    adc_unit: str = "auto"
    resample_to_dwi: bool = False


@dataclass(frozen=True)
class CaseOutputs:
    """Where one case's results go. ``report`` is a stem: STEM.json, STEM.csv and STEM.png/pdf.
    ``brain_mask``: the brain mask (1 = brain) on the DWI grid."""

    mask: Path
    report: Path | None = None
    probability: Path | None = None
    uncertainty: Path | None = None
    brain_mask: Path | None = None
    figure_format: str = "png"
    overwrite: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def report_paths(self) -> dict[str, Path]:
        if self.report is None:
            return {}
        stem = self.report.with_suffix("") if self.report.suffix.lower() in (".json", ".csv", ".png", ".pdf") else self.report
        return {kind: stem.with_name(stem.name + f".{kind}") for kind in ("json", "csv", self.figure_format)}

    def all_paths(self) -> list[Path]:
        paths = [self.mask, *self.report_paths().values()]
        return paths + [path for path in (self.probability, self.uncertainty, self.brain_mask) if path is not None]


def has_suffix(path: Path, suffixes: tuple[str, ...]) -> bool:
    return any(path.name.lower().endswith(suffix) for suffix in suffixes)


def check_outputs(inputs: CaseInputs, outputs: CaseOutputs) -> None:
    """Refuse outputs that exist (unless overwrite), collide with an input, or have a wrong suffix."""
    if not has_suffix(outputs.mask, MASK_SUFFIXES):
        raise BadInputError(outputs.mask, f"mask output must end in one of {', '.join(MASK_SUFFIXES)}")
    if outputs.probability is not None and not has_suffix(outputs.probability, MASK_SUFFIXES):
        raise BadInputError(outputs.probability, f"probability output must end in one of {', '.join(MASK_SUFFIXES)}")
    if outputs.uncertainty is not None and not has_suffix(outputs.uncertainty, MASK_SUFFIXES):
        raise BadInputError(outputs.uncertainty, f"uncertainty output must end in one of {', '.join(MASK_SUFFIXES)}")
    if outputs.brain_mask is not None and not has_suffix(outputs.brain_mask, MASK_SUFFIXES):
        raise BadInputError(outputs.brain_mask, f"brain mask output must end in one of {', '.join(MASK_SUFFIXES)}")
    if outputs.figure_format not in ("png", "pdf"):
        raise BadInputError("--figure-format", f"must be png or pdf, got {outputs.figure_format!r}")
    resolved_inputs = {Path(p).resolve() for p in inputs.images.values()}
    paths = outputs.all_paths()
    if len({p.resolve() for p in paths}) != len(paths):
        raise BadInputError(outputs.mask, "two outputs would be written to the same file")
    for path in paths:
        if path.resolve() in resolved_inputs:
            raise BadInputError(path, "is one of the inputs; refusing to write over an input")
        if path.exists() and not outputs.overwrite:
            raise BadInputError(path, "already exists; not overwriting it (use --overwrite)")


def segment_case(
    case: str,
    inputs: CaseInputs,
    outputs: CaseOutputs,
    package: ModelPackage,
    *,
    device: str = "auto",
    memory_budget_gb: float | None = None,
    progress: Progress | None = None,
    precision: str = "auto",
    pages: PageWriter | None = None,
    tta: bool | None = None,
) -> tuple[dict[str, Any], Segmentation]:
    """Load, segment and write one case; returns its report and the segmentation.
    ``pages``: draw the report page there (see ``reports.pages``) instead of in this process.
    ``tta``: flip averaging (``engine.segment_study``); ``outputs.uncertainty`` asks for the flips' disagreement."""
    from LambdaSegmentLib.io import load_study

    check_outputs(inputs, outputs)
    study = load_study(
        **{role: str(path) for role, path in inputs.images.items()},
        bvalues=inputs.bvalues,
        b_value=inputs.b_value,
        adc_unit=inputs.adc_unit,
        resample_to_dwi=inputs.resample_to_dwi,
    )
    segmentation = segment_study(study, package, device=device, memory_budget_gb=memory_budget_gb, progress=progress,
                                 precision=precision, tta=tta, uncertainty=outputs.uncertainty is not None)
    report, page = write_case_outputs(case, study, segmentation, package, outputs, pages=pages)
    if page is not None:
        page.wait()
    return report, segmentation


def write_case_outputs(
    case: str,
    study: Any,
    segmentation: Segmentation,
    package: ModelPackage,
    outputs: CaseOutputs,
    pages: PageWriter | None = None,
) -> tuple[dict[str, Any], PendingPage | None]:
    """Write mask, probability and report files of a segmented study.

    Returns the report and, when ``pages`` is given, the report page handed to it (still
    being drawn: ``wait()`` for it); without ``pages`` the page is drawn here (None).
    """
    from LambdaSegmentLib.io import write_mask, write_volume
    from LambdaSegmentLib.reports import brain_summary, build_report, write_report_csv, write_report_figure, write_report_json

    report = build_report(
        case=case,
        mask=segmentation.mask,
        sources=study.sources,
        model=package.identity(),
        device=segmentation.device,
        seconds=segmentation.seconds,
        threshold=segmentation.threshold,
        study_info={"b_value": study.b_value, "adc_unit_detected": study.adc_unit_detected,
                    "warnings": list(getattr(study, "warnings", ())), **outputs.extra},
        probability=segmentation.probability,
        adc=study.adc,
        low_confidence_below=package.low_confidence_below,
    )
    report["test_time_flips"] = {"averaged": segmentation.tta, "flips": list(segmentation.flips)}
    report.update(brain_summary(segmentation.brain_volume_ml, segmentation.brain_mask_method))
    report["outputs"] = {"mask": str(outputs.mask)}
    for path in outputs.all_paths():
        path.parent.mkdir(parents=True, exist_ok=True)
    write_mask(segmentation.mask, outputs.mask, overwrite=outputs.overwrite)
    if outputs.probability is not None:
        write_volume(segmentation.probability, outputs.probability, overwrite=outputs.overwrite)
        report["outputs"]["probability"] = str(outputs.probability)
    if outputs.uncertainty is not None:
        if segmentation.disagreement is None:
            raise BadInputError(outputs.uncertainty, "no disagreement map: the segmentation ran without uncertainty=True")
        write_volume(segmentation.disagreement, outputs.uncertainty, overwrite=outputs.overwrite)
        report["outputs"]["uncertainty"] = str(outputs.uncertainty)
    if outputs.brain_mask is not None:
        write_mask(segmentation.brain, outputs.brain_mask, overwrite=outputs.overwrite)
        report["outputs"]["brain_mask"] = str(outputs.brain_mask)
    paths = outputs.report_paths()
    if paths:
        report["outputs"].update({kind: str(path) for kind, path in paths.items()})
        write_report_json(report, paths["json"], overwrite=outputs.overwrite)
        write_report_csv(report, paths["csv"], overwrite=outputs.overwrite)
        page_path = paths[outputs.figure_format]
        if pages is not None:
            return report, pages.submit(report, study.dwi, segmentation.mask, page_path, overwrite=outputs.overwrite)
        write_report_figure(report, study.dwi, segmentation.mask, page_path, overwrite=outputs.overwrite)
    return report, None
