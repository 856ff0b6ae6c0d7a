"""``lambdasegment demo``: the embedded demonstration.

Until the inference engine and bundled checkpoint land, the demo runs the paper's
LambdaUNet on a small synthetic two-channel study and prints the model summary.
"""

from __future__ import annotations

import argparse
import time


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the embedded demo study",
        description="Run LambdaUNet on the embedded demo study and print what it did.",
    )
    parser.add_argument("output_dir", nargs="?", default="demo-output", help="where results go (default: demo-output)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from LambdaSegmentLib.models import create_model

    torch.manual_seed(0)
    model = create_model("lambda_unet").eval()
    study = torch.randn(1, 2, 8, 64, 64)  # (batch, [eADC, DWI], slices, height, width)
    start = time.perf_counter()
    with torch.inference_mode():
        logits = model(study)
    seconds = time.perf_counter() - start
    n_params = sum(p.numel() for p in model.parameters())
    print(f"LambdaUNet (paper configuration): {n_params:,d} parameters")
    print(f"input {tuple(study.shape)} -> logits {tuple(logits.shape)} in {seconds:.2f} s on CPU")
    return 0
