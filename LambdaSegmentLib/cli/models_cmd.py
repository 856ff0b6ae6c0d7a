"""``lambdasegment models``: list the registered architectures and the bundled model packages."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models", help="list the registered model architectures and the bundled model packages",
        description="List the registered model architectures with their default parameter counts, then the "
                    "bundled model packages that `segment --model NAME` selects.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from LambdaSegmentLib.inference.package import BUNDLED_PACKAGE, bundled_packages, read_manifest
    from LambdaSegmentLib.models import available_models, create_model

    print("architectures (lambdasegment train --model NAME):")
    for name in available_models():
        model = create_model(name)
        print(f"  {name:16s} {sum(p.numel() for p in model.parameters()):>12,d} parameters")
    print("bundled model packages (lambdasegment segment --model NAME):")
    for directory in bundled_packages():
        manifest = read_manifest(directory)  # the manifest only: `segment` verifies the weights when it loads them
        attached = [role for role in ("partner", "seed") if f"{role}_network" in manifest]
        networks = f"{1 + len(attached)} network(s)" + (f": own + {' + '.join(attached)}" if attached else "")
        default = ", the default" if directory == BUNDLED_PACKAGE else ""
        print(f"  {directory.name:24s} {manifest['name']} {manifest['version']} ({networks}{default})")
    return 0
