"""``lambdasegment models``: list the registered architectures and their sizes."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models", help="list the registered model architectures",
        description="List the registered model architectures with their default parameter counts.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from LambdaSegmentLib.models import available_models, create_model

    for name in available_models():
        model = create_model(name)
        print(f"{name:16s} {sum(p.numel() for p in model.parameters()):>12,d} parameters")
    return 0
