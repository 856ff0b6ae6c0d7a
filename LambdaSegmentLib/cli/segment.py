"""``lambdasegment segment``: segment one study (DWI with ADC, eADC or b0) into a mask file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from LambdaSegmentLib.reports.pages import PageWriter


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``segment`` and ``segment-dir``."""
    parser.add_argument("--model", type=Path, default=None, metavar="DIR|NAME",
                        help="model package directory (manifest.json + weights), or the name of a bundled package: "
                             "lambdaunet-dwi (the default), lambdaunet-dwi-ensemble (the default's network and a second "
                             "training draw's, averaged: more found held out, twice the network time) or "
                             "lambdaunet-dwi-pair (two networks averaged: fewer false positives, about twice the time); "
                             "docs/MODEL_CARD.md")
    parser.add_argument("--device", default="auto", help="auto (CUDA, then Apple MPS, then CPU), cpu, cuda, cuda:N or mps")
    parser.add_argument("--memory-budget-gb", type=float, default=None, metavar="GB",
                        help="bound the model's peak memory; bigger studies run in overlapping slabs with the same result "
                             "(default: half the GPU's free memory or half the RAM)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing output files (inputs are never replaced)")
    parser.add_argument("--resample-to-dwi", action="store_true",
                        help="resample an ADC/eADC/b0 on another grid onto the DWI grid instead of refusing it")
    parser.add_argument("--adc-unit", default="auto", choices=["auto", "mm2/s", "1e-3 mm2/s", "1e-6 mm2/s"],
                        help="unit of the ADC map (default: detected from the brain median)")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32"],
                        help="auto: bfloat16 autocast on CUDA, float32 elsewhere; fp32: float32 everywhere")
    parser.add_argument("--figure-format", default="png", choices=["png", "pdf"], help="format of the one-page report")
    parser.add_argument("--tta", action="store_true", default=None,
                        help="average the probability over left-right and in-plane flips (3 model passes; off by default "
                             "unless the model manifest turns it on)")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "segment", help="segment one study",
        description="Segment the infarct on one diffusion study and write the mask on the DWI grid. "
        "Give the DWI (b~1000 trace) with one of --adc, --eadc or --b0 (or --b0 with --b1000). Files may be "
        "NIfTI, NRRD, MHA or DICOM folders. Exit codes: 0 success, 2 bad input (the message names the file), "
        "1 unexpected error. Research use only, not a medical device.",
    )
    parser.add_argument("--dwi", type=Path, help="DWI b~1000 trace (or a 4D multi-b DWI with --bvalues)")
    parser.add_argument("--adc", type=Path, help="ADC map in mm2/s, 1e-3 mm2/s or 1e-6 mm2/s")
    parser.add_argument("--eadc", type=Path, help="exponential ADC (S_b/S_0, 0-1)")
    parser.add_argument("--b0", type=Path, help="b0 image (ADC is computed from b0 and the b1000)")
    parser.add_argument("--b1000", type=Path, help="b1000 image, in place of --dwi")
    parser.add_argument("--bvalues", default=None, help="b-values of a 4D DWI: an FSL .bval file or comma-separated numbers")
    parser.add_argument("--b-value", type=float, default=None, help="b-value of a 3D DWI in s/mm2 (default 1000)")
    parser.add_argument("--output", "-o", type=Path, required=True, help="mask file: .nii.gz, .nii, .nrrd or .seg.nrrd")
    parser.add_argument("--report", type=Path, default=None, metavar="REPORT.json",
                        help="also write REPORT.json, REPORT.csv and REPORT.png (or .pdf) beside each other")
    parser.add_argument("--probability", type=Path, default=None, help="also write the probability map (0-1) here")
    parser.add_argument("--uncertainty", type=Path, default=None, metavar="PATH",
                        help="also write the flips' disagreement (voxel-wise standard deviation of the flipped passes' "
                             "probabilities, 0-0.5) on the DWI grid here; runs the flips (the mask uses them only with --tta)")
    parser.add_argument("--brain-mask", type=Path, default=None, metavar="PATH",
                        help="also write the brain mask (1 = brain; no infarct is reported outside it) on the DWI grid here")
    parser.add_argument("--case", default=None, help="case name in the report (default: from the DWI file name)")
    add_model_options(parser)
    parser.set_defaults(func=run)


def case_name_from(path: Path) -> str:
    name = path.name
    for suffix in (".nii.gz", ".seg.nrrd", ".nii", ".nrrd", ".mha", ".mhd"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def parse_bvalues(text: str | None) -> str | list[float] | None:
    """A .bval path stays a path; "0,1000" becomes numbers."""
    if text is None or Path(text).exists():
        return text
    try:
        return [float(v) for v in text.replace(",", " ").split()]
    except ValueError:
        from LambdaSegmentLib.errors import BadInputError

        raise BadInputError(text, "--bvalues is neither a file nor comma-separated numbers") from None


def run(args: argparse.Namespace) -> int:
    if args.report is None:
        return segment(args, None)
    from LambdaSegmentLib.reports.pages import PageWriter

    # Started before torch is imported: the page helper imports matplotlib meanwhile.
    with PageWriter() as pages:
        return segment(args, pages)


def segment(args: argparse.Namespace, pages: PageWriter | None) -> int:
    from LambdaSegmentLib.errors import BadInputError
    from LambdaSegmentLib.inference import load_model_package
    from LambdaSegmentLib.inference.case import CaseInputs, CaseOutputs, segment_case

    images = {role: getattr(args, role) for role in ("dwi", "adc", "eadc", "b0", "b1000") if getattr(args, role) is not None}
    if "dwi" not in images and "b1000" not in images:
        raise BadInputError("--dwi", "a DWI is required (--dwi, or --b1000 with --b0)")
    if not {"adc", "eadc", "b0"} & set(images) and args.bvalues is None:
        raise BadInputError("--adc", "give one of --adc, --eadc or --b0 with the DWI")
    for role, path in images.items():
        if not path.exists():
            raise BadInputError(path, f"--{role} file or folder not found")
    if args.memory_budget_gb is not None and args.memory_budget_gb <= 0:
        raise BadInputError("--memory-budget-gb", f"must be positive, got {args.memory_budget_gb:g}")
    inputs = CaseInputs(images, bvalues=parse_bvalues(args.bvalues), b_value=args.b_value,
                        adc_unit=args.adc_unit, resample_to_dwi=args.resample_to_dwi)
    outputs = CaseOutputs(mask=args.output, report=args.report, probability=args.probability, uncertainty=args.uncertainty,
                          brain_mask=args.brain_mask, figure_format=args.figure_format, overwrite=args.overwrite)
    from LambdaSegmentLib.inference.case import check_outputs

    check_outputs(inputs, outputs)  # before the model is even loaded
    package = load_model_package(args.model)
    case = args.case or case_name_from(images.get("dwi", images.get("b1000")))
    report, segmentation = segment_case(case, inputs, outputs, package, device=args.device,
                                        memory_budget_gb=args.memory_budget_gb, precision=args.precision,
                                        pages=pages, tta=args.tta)
    for message in report["warnings"]:
        print(f"lambdasegment: warning: {message}", file=sys.stderr)
    core = "n/a" if report["adc_core_ml"] is None else f"{report['adc_core_ml']:.2f} mL"
    doubtful = sum(1 for lesion in report["lesions"] if lesion["low_confidence"])
    flips = f", averaged over {len(segmentation.flips)} flips" if segmentation.tta else ""
    if package.partner is not None:
        flips += f", averaged with partner network {package.partner.name} {package.partner.version}"
    if package.seed is not None:
        flips += f", lesions kept where seed network {package.seed.name} {package.seed.version} detects one"
    print(
        f"{case}: infarct {report['infarct_volume_ml']:.2f} mL in {report['lesion_count']} lesion(s), "
        f"{doubtful} low-confidence; ADC core (ADC < 620e-6 mm2/s inside the infarct) {core} "
        f"-> {args.output} ({segmentation.seconds:.1f} s on {segmentation.device}, {segmentation.num_slabs} pass(es){flips}); "
        f"brain {report['brain_volume_ml']:.0f} mL"
    )
    if report["outputs"].get("json"):
        print(f"report: {report['outputs']['json']}, {report['outputs']['csv']}, {report['outputs'][args.figure_format]}")
    if "UNTRAINED" in str(package.manifest.get("training_data", "")).upper():
        print("warning: the model is UNTRAINED, for plumbing only; the mask means nothing", file=sys.stderr)
    return 0
