"""``lambdasegment synthesize OUT_DIR --n N [--seed S]``: write synthetic labelled studies.

Training-time tool: needs the JHU arterial-territory atlas (``../shared/data/arterial-atlas``
or ``$LAMBDASEGMENT_ARTERIAL_ATLAS``) and nilearn (``pip install lambdasegment[train]``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from LambdaSegmentLib.cli import json_object


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "synthesize", help="write synthetic stroke DWI studies (BIDS-style folder)",
        description="Write N synthetic studies (DWI, ADC, eADC, infarct mask) as "
        "OUT_DIR/sub-synthNNNN/ses-0001/dwi/sub-synthNNNN_ses-0001_{dwi,adc,eadc,msk}.nii.gz. "
        "Study i uses seed S + i, so the same command writes the same studies.",
    )
    parser.add_argument("output_dir", type=Path, metavar="OUT_DIR", help="folder to write into (created if needed)")
    parser.add_argument("--n", type=int, default=10, help="number of studies (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first study (default 0)")
    parser.add_argument("--in-plane-mm", type=float, nargs=2, metavar=("MIN", "MAX"), help="in-plane spacing range (default 0.9 2.0)")
    parser.add_argument("--slice-mm", type=float, nargs=2, metavar=("MIN", "MAX"), help="slice thickness range (default 2 7)")
    parser.add_argument("--volume-ml", type=float, nargs=2, metavar=("MIN", "MAX"), help="lesion volume range (default 0.01 300)")
    parser.add_argument("--kind", choices=["territorial", "lacunar", "embolic", "none"], help="lesion kind (default: random)")
    parser.add_argument("--adc-unit", choices=["mm2/s", "1e-3 mm2/s", "1e-6 mm2/s"], help="ADC unit (default: random)")
    parser.add_argument("--synthesis", type=json_object, default={}, metavar="JSON",
                        help="any other generator ranges, as train's --synthesis takes them, e.g. "
                             "'{\"relative_adc\": [0.4, 0.7]}'; the options above override the same keys here")
    parser.add_argument("--overwrite", action="store_true", help="replace existing study files")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from LambdaSegmentLib.errors import BadInputError
    from LambdaSegmentLib.synthesis import generate
    from LambdaSegmentLib.synthesis.bids import write_study

    if args.n < 1:
        raise BadInputError(None, f"--n must be at least 1, got {args.n}")
    if args.seed < 0:
        raise BadInputError(None, f"--seed must be non-negative, got {args.seed}")
    ranges = dict(args.synthesis)
    if args.in_plane_mm:
        ranges["in_plane_spacing_mm"] = tuple(args.in_plane_mm)
    if args.slice_mm:
        ranges["slice_thickness_mm"] = tuple(args.slice_mm)
    if args.volume_ml:
        ranges["lesion_volume_ml"] = tuple(args.volume_ml)
    if args.kind:
        ranges["lesion_kind"] = args.kind
    if args.adc_unit:
        ranges["adc_unit"] = args.adc_unit
    try:
        for index in range(args.n):
            start = time.perf_counter()
            study = generate(args.seed + index, **ranges)
            paths = write_study(study, args.output_dir, args.seed + index, overwrite=args.overwrite)
            lesion = study.params["lesion"]
            print(f"{paths[0].parent}: {lesion['kind']} {lesion['volume_ml']:.2f} mL, "
                  f"{study.dwi.size_ijk} voxels of {tuple(round(s, 2) for s in study.dwi.spacing_mm)} mm, "
                  f"ADC in {study.adc_unit} ({time.perf_counter() - start:.1f} s)")
    except ValueError as error:
        if isinstance(error, BadInputError):
            raise
        raise BadInputError(None, str(error)) from error
    return 0
