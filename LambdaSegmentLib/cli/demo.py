"""``lambdasegment demo``: segment the embedded demo study and write mask, report and overlay.

The study is the one shipped in ``LambdaSegmentLib/resources/demo/`` (``*_dwi.nii.gz`` with
``*_adc.nii.gz`` beside it); when that folder holds none, a geometric phantom is written
into ``OUTPUT_DIR/inputs/`` and used instead. The model is the bundled package; when it
is not installed the demo builds a small *untrained* model and says so everywhere
(console, report JSON, report page): "UNTRAINED, for plumbing only".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from LambdaSegmentLib.inference import ModelPackage

DEMO_STUDY_DIR = Path(__file__).resolve().parents[1] / "resources" / "demo"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="segment the embedded demo study",
        description="Segment the embedded synthetic demo study with the bundled model and write OUTPUT_DIR/demo_mask.nii.gz "
        "and OUTPUT_DIR/demo_report.{json,csv,png}. Research use only, not a medical device.",
    )
    parser.add_argument("output_dir", nargs="?", type=Path, default=Path("demo-output"),
                        help="where results go (default: demo-output)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--overwrite", action="store_true", help="replace the results of an earlier demo run")
    parser.set_defaults(func=run)


def demo_study(output_dir: Path, overwrite: bool) -> tuple[dict[str, Path], str, Path | None]:
    """(input images by role, description, true mask or None) of the demo study."""
    from LambdaSegmentLib.inference.batch import cases_from_bids

    shipped = cases_from_bids(DEMO_STUDY_DIR) if DEMO_STUDY_DIR.is_dir() else []
    if shipped:
        case = sorted(shipped, key=lambda c: c.name)[0]
        truth = next(iter(sorted(DEMO_STUDY_DIR.rglob(f"{case.name}_msk.nii*"))), None)
        return dict(case.inputs.images), f"embedded synthetic study {case.name}", truth

    from LambdaSegmentLib.inference.phantom import make_phantom
    from LambdaSegmentLib.io import write_mask, write_volume

    phantom = make_phantom(tilt_deg=(8.0, 0.0, 5.0))
    inputs = output_dir / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    images = {"dwi": inputs / "phantom_dwi.nii.gz", "adc": inputs / "phantom_adc.nii.gz"}
    write_volume(phantom.dwi, images["dwi"], overwrite=overwrite)
    write_volume(phantom.adc, images["adc"], overwrite=overwrite)
    truth = write_mask(phantom.mask, inputs / "phantom_msk.nii.gz", overwrite=overwrite)
    return images, "geometric phantom (no demo study is installed)", truth


def demo_package(output_dir: Path) -> "ModelPackage":
    from LambdaSegmentLib.inference import BUNDLED_PACKAGE, load_model_package
    from LambdaSegmentLib.inference.untrained import UNTRAINED_LABEL, save_untrained_package

    if BUNDLED_PACKAGE.is_dir():
        return load_model_package()
    print(f"demo: no bundled model at {BUNDLED_PACKAGE}; using a small model {UNTRAINED_LABEL}", file=sys.stderr)
    return load_model_package(save_untrained_package(output_dir / "untrained-model"))


def run(args: argparse.Namespace) -> int:
    from LambdaSegmentLib.inference.case import CaseInputs, CaseOutputs, check_outputs, segment_case
    from LambdaSegmentLib.inference.untrained import UNTRAINED_LABEL
    from LambdaSegmentLib.io import read_volume
    from LambdaSegmentLib.lesions import lesion_volume_ml

    output_dir: Path = args.output_dir
    outputs = CaseOutputs(mask=output_dir / "demo_mask.nii.gz", report=output_dir / "demo_report.json", overwrite=args.overwrite)
    check_outputs(CaseInputs({}), outputs)  # refuse an earlier run's results before any work
    images, description, truth = demo_study(output_dir, args.overwrite)
    package = demo_package(output_dir)
    untrained = UNTRAINED_LABEL.split(",")[0] in str(package.manifest.get("training_data", ""))
    report, segmentation = segment_case("demo", CaseInputs(images), outputs, package, device=args.device)

    print(f"demo: {description}")
    print(f"model: {package.name} {package.version}" + (f"  [{UNTRAINED_LABEL}]" if untrained else ""))
    print(f"infarct volume {report['infarct_volume_ml']:.2f} mL in {report['lesion_count']} lesion(s); "
          f"{segmentation.seconds:.1f} s on {segmentation.device}")
    if truth is not None:
        print(f"true infarct volume of the demo study: {lesion_volume_ml(read_volume(truth)):.2f} mL ({truth})")
    for kind in ("mask", "json", "csv", "png"):
        print(f"{kind:>4}: {report['outputs'][kind]}")
    if untrained:
        print(f"demo: the model is {UNTRAINED_LABEL}; its mask means nothing", file=sys.stderr)
    print("Research use only - not a medical device.")  # ASCII: stdout may not be UTF-8
    return 0
