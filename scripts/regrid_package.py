"""Copy a model package with another inference grid: the same network (weights file and
SHA-256 unchanged), run on a model grid of a different in-plane spacing.

    .venv/bin/python scripts/regrid_package.py SRC_PKG DST_PKG --in-plane-mm 1.5

Issue 13's rule 148 asks whether the fold networks, trained on a 2 mm grid, find more of a
real case's small emboli on a finer one (a 1.5 mm grid shows a 3-voxel embolus as about 5
voxels). Only ``preprocessing.in_plane_spacing_mm`` changes; the slice axis is never resampled
(``preprocessing.slice_stack``). A seed or partner network attached to SRC_PKG is copied as it
is and keeps its own grid (``engine.segment_study`` prepares each network's input by its own
manifest). DST_PKG must not exist; SRC_PKG is verified first (its
weights' SHA-256), and the copy is loaded back to check it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.errors import BadInputError  # noqa: E402
from LambdaSegmentLib.inference.package import MANIFEST_FILE, load_model_package  # noqa: E402


def regrid_package(source: Path, destination: Path, in_plane_mm: float) -> dict:
    """Copy ``source`` to ``destination`` with ``in_plane_spacing_mm`` set to ``in_plane_mm`` (mm).

    Returns the new manifest. Raises BadInputError naming the package on any problem."""
    if not 0.5 <= in_plane_mm <= 5.0:
        raise BadInputError(str(destination), f"--in-plane-mm {in_plane_mm} is not a plausible model grid (0.5-5 mm)")
    if destination.exists():
        raise BadInputError(str(destination), "already exists; nothing was overwritten")
    manifest = load_model_package(source).manifest  # verified (its weights' SHA-256) before anything is copied
    manifest = {**manifest, "preprocessing": {**manifest["preprocessing"], "in_plane_spacing_mm": float(in_plane_mm)}}
    shutil.copytree(source, destination)
    (destination / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    load_model_package(destination)  # the copy loads and verifies
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="the package to copy")
    parser.add_argument("destination", type=Path, help="the new package's directory (must not exist)")
    parser.add_argument("--in-plane-mm", type=float, required=True, help="the copy's model-grid in-plane spacing (mm)")
    args = parser.parse_args(argv)
    try:
        regrid_package(args.source, args.destination, args.in_plane_mm)
    except (BadInputError, ValueError, OSError) as error:
        print(f"regrid_package.py: {error}", file=sys.stderr)
        return 2
    print(f"{args.destination}: {args.source} on a {args.in_plane_mm:g} mm in-plane grid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
