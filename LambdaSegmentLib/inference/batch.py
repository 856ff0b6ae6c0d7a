"""Batches of cases: discovery (BIDS / ISLES'22 layout or a CSV listing), per-case output
folders written atomically, resumption, and the summary CSV.

Output layout: ``OUTPUT_DIR/<case>/<case>_mask.nii.gz`` and ``<case>_report.{json,csv,png}``;
``OUTPUT_DIR/summary.csv``. A case's folder is written under ``.<case>.partial`` and renamed
into place only when complete, so a case folder that exists is a finished case (that is
what resuming skips) and an interrupted run never leaves half a case behind. A failed
case leaves ``OUTPUT_DIR/.failed/<case>.json`` (retried on the next run).
"""

from __future__ import annotations

import csv
import json
import shutil
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from torch.utils.data import Dataset

from LambdaSegmentLib.errors import BadInputError

from .case import INPUT_ROLES, CaseInputs, CaseOutputs, write_case_outputs
from .engine import segment_study
from .package import ModelPackage

if TYPE_CHECKING:
    from LambdaSegmentLib.reports.pages import PageWriter

SUMMARY_FILE = "summary.csv"
FAILED_DIR = ".failed"
DWI_SUFFIXES = ("_dwi.nii.gz", "_dwi.nii")
PARTNER_ROLES = ("adc", "eadc", "b0")


@dataclass(frozen=True)
class Case:
    """One case of a batch: its name and input images (role -> path)."""

    name: str
    inputs: CaseInputs


def discover_cases(source: Path, *, resample_to_dwi: bool = False, adc_unit: str = "auto") -> list[Case]:
    """Cases in a BIDS/ISLES'22 folder (``*_dwi.nii[.gz]`` with ``*_adc``/``*_eadc``/``*_b0`` beside it)
    or a CSV listing (columns ``case``, ``dwi`` and one of ``adc``, ``eadc``, ``b0``; relative
    paths are relative to the CSV's folder). Sorted by case name."""
    if source.is_file() and source.suffix.lower() == ".csv":
        cases = cases_from_csv(source, resample_to_dwi=resample_to_dwi, adc_unit=adc_unit)
    elif source.is_dir():
        cases = cases_from_bids(source, resample_to_dwi=resample_to_dwi, adc_unit=adc_unit)
    else:
        raise BadInputError(source, "input must be a folder (BIDS / ISLES'22 layout) or a .csv listing of cases")
    if not cases:
        raise BadInputError(source, "no cases found (expected sub-*/[ses-*/]dwi/*_dwi.nii.gz with *_adc.nii.gz, or a CSV listing)")
    names = [case.name for case in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise BadInputError(source, f"case names are not unique: {', '.join(duplicates)}")
    return sorted(cases, key=lambda case: case.name)


def cases_from_bids(folder: Path, **options: Any) -> list[Case]:
    cases = []
    for dwi in sorted(p for suffix in DWI_SUFFIXES for p in folder.rglob(f"*{suffix}")):
        if "derivatives" in dwi.relative_to(folder).parts or dwi.name.startswith("."):
            continue
        suffix = next(s for s in DWI_SUFFIXES if dwi.name.endswith(s))
        name = dwi.name[: -len(suffix)]
        images: dict[str, Path] = {"dwi": dwi}
        for role in PARTNER_ROLES:
            partner = dwi.with_name(f"{name}_{role}{suffix[len('_dwi'):]}")
            if partner.exists():
                images[role] = partner
                break
        cases.append(Case(name, CaseInputs(images, **options)))
    return cases


def cases_from_csv(listing: Path, **options: Any) -> list[Case]:
    with open(listing, newline="", encoding="utf-8-sig") as stream:
        reader = csv.DictReader(stream)
        columns = {c.strip().lower() for c in (reader.fieldnames or [])}
        if "case" not in columns or not ({"dwi", "b1000"} & columns):
            raise BadInputError(listing, "CSV listing needs columns case, dwi and one of adc, eadc, b0")
        cases = []
        for line, row in enumerate(reader, start=2):
            row = {k.strip().lower(): (v or "").strip() for k, v in row.items() if k}
            if not row.get("case"):
                raise BadInputError(listing, f"line {line}: empty case name")
            images = {role: (listing.parent / row[role]) for role in INPUT_ROLES if row.get(role)}
            cases.append(Case(row["case"], CaseInputs(images, **options)))
    return cases


def case_outputs(output_dir: Path, case: str, *, figure_format: str = "png") -> CaseOutputs:
    """Outputs of ``case`` inside its (partial) folder ``output_dir``."""
    return CaseOutputs(
        mask=output_dir / f"{case}_mask.nii.gz",
        report=output_dir / f"{case}_report.json",
        figure_format=figure_format,
        overwrite=False,
    )


class CaseStudies(Dataset):
    """Loads the studies of cases (in DataLoader workers, overlapping I/O with compute).

    Item i is a dict: ``index``, ``case`` and either ``study`` (a ``Study``) or
    ``error`` (one line) with ``bad_input`` (True for BadInputError), plus ``seconds`` and
    ``warnings`` (one line each, naming the file): every warning raised while loading is
    kept here instead of being printed by the worker process, so that the batch can report
    it in its own words and in ``summary.csv``.
    """

    def __init__(self, cases: list[Case]) -> None:
        self.cases = cases

    def __len__(self) -> int:
        return len(self.cases)

    def __getitem__(self, index: int) -> dict[str, Any]:
        from LambdaSegmentLib.io import load_study

        case = self.cases[index]
        start = time.perf_counter()
        item: dict[str, Any] = {"index": index, "case": case.name}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                check_case_inputs(case)
                item["study"] = load_study(
                    **{role: str(path) for role, path in case.inputs.images.items()},
                    adc_unit=case.inputs.adc_unit,
                    resample_to_dwi=case.inputs.resample_to_dwi,
                )
            except BadInputError as error:
                item.update(error=str(error), bad_input=True)
            except Exception as error:  # noqa: BLE001 - reported per case, the batch goes on
                item.update(error=f"{type(error).__name__}: {error}", bad_input=False)
        item["warnings"] = list(dict.fromkeys(" ".join(str(w.message).split()) for w in caught))
        item["seconds"] = time.perf_counter() - start
        return item


def keep_as_is(item: dict[str, Any]) -> dict[str, Any]:
    """DataLoader per-item conversion that leaves studies untouched (module level: picklable)."""
    return item


def check_case_inputs(case: Case) -> None:
    images = case.inputs.images
    if "dwi" not in images and "b1000" not in images:
        raise BadInputError(case.name, "no DWI listed for this case")
    if not {"adc", "eadc", "b0"} & set(images):
        raise BadInputError(images.get("dwi", case.name), "no ADC, eADC or b0 found beside the DWI")
    for path in images.values():
        if not Path(path).exists():
            raise BadInputError(path, "file or folder not found")


def start_item(
    item: dict[str, Any],
    package: ModelPackage,
    output_dir: Path,
    *,
    device: str,
    memory_budget_gb: float | None,
    figure_format: str,
    overwrite: bool,
    precision: str = "auto",
    pages: PageWriter | None = None,
    tta: bool | None = None,
) -> Callable[[], dict[str, Any]]:
    """Segment one loaded case, in two steps so that its report page can be drawn by
    ``pages`` (``reports.pages``; None: this process) while the next case is segmented.

    Segments the case and writes its files into ``.<case>.partial``, handing the page to
    ``pages``; returns ``finish()``, which waits for the page, moves the finished folder into
    place and returns the case's summary row (seconds: the case's own work, not the time it
    waited for the next one). Failures are recorded in ``.failed/<case>.json`` and returned
    as a ``failed`` row.
    """
    case = item["case"]
    notes = item.get("warnings", [])
    started = time.perf_counter()
    busy = item.get("seconds", 0.0)  # loading, in a worker
    failure = output_dir / FAILED_DIR / f"{case}.json"
    partial = output_dir / f".{case}.partial"

    def failed(error: Exception) -> dict[str, Any]:
        shutil.rmtree(partial, ignore_errors=True)
        bad_input = isinstance(error, BadInputError) or (isinstance(error, _LoadFailure) and error.bad_input)
        message = str(error) if bad_input or isinstance(error, _LoadFailure) else f"{type(error).__name__}: {error}"
        message = " ".join(message.split())  # one line
        failure.parent.mkdir(parents=True, exist_ok=True)
        record = {"case": case, "error": message, "bad_input": bad_input, "seconds": busy, "warnings": notes}
        if not bad_input:
            record["traceback"] = "".join(traceback.format_exception(error))
        failure.write_text(json.dumps(record, indent=2), encoding="utf-8")
        return {"case": case, "volume_ml": "", "lesion_count": "", "seconds": f"{busy:.2f}",
                "status": "failed", "error": message, "warnings": _joined(notes), "bad_input": bad_input}

    try:
        if "error" in item:
            raise _LoadFailure(item["error"], item["bad_input"])
        if partial.exists():
            shutil.rmtree(partial)  # our own leftovers from an interrupted run
        partial.mkdir(parents=True)
        segmentation = segment_study(item["study"], package, device=device, memory_budget_gb=memory_budget_gb,
                                     precision=precision, tta=tta)
        outputs = case_outputs(partial, case, figure_format=figure_format)
        report, page = write_case_outputs(case, item["study"], segmentation, package, outputs, pages=pages)
    except Exception as error:  # noqa: BLE001 - reported per case, the batch goes on
        busy += time.perf_counter() - started
        row = failed(error)
        return lambda: row
    busy += time.perf_counter() - started

    def finish() -> dict[str, Any]:
        nonlocal busy
        waited = time.perf_counter()
        try:
            if page is not None:
                try:
                    page.wait()
                finally:
                    busy += time.perf_counter() - waited
            final = output_dir / case
            if final.exists() and overwrite:
                shutil.rmtree(final)
            partial.rename(final)
            failure.unlink(missing_ok=True)
            return summary_row(case, report, busy, "ok", warnings_seen=notes)
        except Exception as error:  # noqa: BLE001 - reported per case, the batch goes on
            return failed(error)

    return finish


class _LoadFailure(Exception):
    def __init__(self, message: str, bad_input: bool) -> None:
        super().__init__(message)
        self.bad_input = bad_input


def summary_row(case: str, report: dict[str, Any], seconds: float, status: str,
                warnings_seen: list[str] | None = None) -> dict[str, Any]:
    """The summary row of a finished case; its warnings: ``warnings_seen`` (all those raised
    while loading it this run), else the input warnings its report recorded, then the
    report's own (e.g. an implausible brain volume)."""
    if warnings_seen is None:
        warnings_seen = report.get("input", {}).get("warnings", [])
    warnings_seen = list(warnings_seen) + [note for note in report.get("warnings", []) if note not in warnings_seen]
    return {
        "case": case,
        "volume_ml": f"{report['infarct_volume_ml']:.4f}",
        "lesion_count": str(report["lesion_count"]),
        "adc_core_ml": "" if report.get("adc_core_ml") is None else f"{report['adc_core_ml']:.4f}",
        "seconds": f"{seconds:.2f}",
        "status": status,
        "error": "",
        "warnings": _joined(warnings_seen),
    }


def _joined(notes: list[str]) -> str:
    from LambdaSegmentLib.reports.tables import WARNINGS_SEPARATOR

    return WARNINGS_SEPARATOR.join(notes)


def finished_report(output_dir: Path, case: str) -> dict[str, Any] | None:
    """The report of a case finished in an earlier run, or None."""
    path = output_dir / case / f"{case}_report.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def summarise(
    output_dir: Path, cases: list[Case], rows_this_run: dict[str, dict[str, Any]], done_before: set[str]
) -> list[dict[str, Any]]:
    """Summary rows of all cases: this run's, else a finished folder (``skipped`` when it was
    there before the run, ``ok`` when another rank wrote it), else the failure record."""
    rows = []
    for case in cases:
        if case.name in rows_this_run:
            rows.append(rows_this_run[case.name])
            continue
        report = finished_report(output_dir, case.name)
        if report is not None:
            status = "skipped (done earlier)" if case.name in done_before else "ok"
            rows.append(summary_row(case.name, report, report.get("seconds", 0.0), status))
            continue
        failure = output_dir / FAILED_DIR / f"{case.name}.json"
        if failure.is_file():
            record = json.loads(failure.read_text(encoding="utf-8"))
            rows.append({"case": case.name, "volume_ml": "", "lesion_count": "", "seconds": f"{record['seconds']:.2f}",
                         "status": "failed", "error": record["error"], "warnings": _joined(record.get("warnings", []))})
        else:
            rows.append({"case": case.name, "volume_ml": "", "lesion_count": "", "seconds": "", "status": "pending", "error": ""})
    return rows


def write_summary(output_dir: Path, rows: list[dict[str, Any]]) -> Path:
    from LambdaSegmentLib.reports import SUMMARY_COLUMNS, csv_text, write_text_atomically

    return write_text_atomically(csv_text(rows, list(SUMMARY_COLUMNS)), output_dir / SUMMARY_FILE, overwrite=True)


def iterate_loaded(cases: list[Case], workers: int) -> Iterator[dict[str, Any]]:
    """Loaded studies in order; ``workers`` > 0 loads the next cases while one is segmented."""
    from torch.utils.data import DataLoader

    loader = DataLoader(CaseStudies(cases), batch_size=None, shuffle=False, num_workers=workers,
                        collate_fn=keep_as_is, prefetch_factor=1 if workers else None)
    yield from loader
