"""Why Lambda+ gathers neighbourhoods before its per-pixel matmul: the positional product of
one Lambda+ layer, kernel row by kernel row against one batched matmul over a gathered
buffer, at the bundled model's first Lambda+ level (24 slices of 128 x 128, 4 heads,
|u| = 4, |v| = 8, R = T = 3: three local rows of 3 offsets and two inter-slice rows of 1).

Row by row, each pixel's product is (heads x span u) @ (span u x v), e.g. 4 x 12 x 8: under
ATen's small-matrix threshold (rows x cols x depth < 400) ``bmm`` runs a scalar loop.
Gathered, it is one (4 x 44) @ (44 x 8) product per pixel through BLAS, plus the copy.

    .venv/bin/python benchmarks/small_matmuls.py            # writes results/small_matmuls_cpu.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, invocation, machine_header, write_tables  # noqa: E402

HEADS, INTRA, VALUE = 4, 4, 8
SPANS = (3, 3, 3, 1, 1)  # the kernel rows of R = 3 local + T = 3 inter-slice offsets


def timed(function, repeats: int) -> float:
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pixels", type=int, default=24 * 128 * 128)
    parser.add_argument("--chunk", type=int, default=2**22 // (sum(SPANS) * INTRA * VALUE), help="pixels per gathered block")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=str(RESULTS / "small_matmuls_cpu"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    columns = sum(SPANS) * INTRA
    margin = 200
    # A flat value grid (pixels, u, v) and per-pixel weights (pixels, heads, offsets u).
    grid = torch.randn(args.pixels + 2 * margin, INTRA, VALUE, generator=generator)
    weights = torch.randn(args.pixels, HEADS, columns, generator=generator)
    shifts = (-130, 0, 130, -margin, margin - 3)  # any distinct row starts; the cost does not depend on them

    def row_view(start: int, count: int, span: int) -> torch.Tensor:
        return grid.as_strided((count, span * INTRA, VALUE), (INTRA * VALUE, VALUE, 1), (margin + start) * INTRA * VALUE)

    def row_by_row() -> torch.Tensor:
        out, column = None, 0
        for shift, span in zip(shifts, SPANS):
            block = weights[:, :, column : column + span * INTRA]
            neighbours = row_view(shift, args.pixels, span)
            out = torch.bmm(block, neighbours) if out is None else out.baddbmm_(block, neighbours)
            column += span * INTRA
        return out

    buffer = torch.empty(args.chunk, columns, VALUE)

    def gathered() -> torch.Tensor:
        out = torch.empty(args.pixels, HEADS, VALUE)
        for start in range(0, args.pixels, args.chunk):
            stop = min(args.pixels, start + args.chunk)
            column = 0
            for shift, span in zip(shifts, SPANS):
                buffer[: stop - start, column : column + span * INTRA] = row_view(start + shift, stop - start, span)
                column += span * INTRA
            torch.bmm(weights[start:stop], buffer[: stop - start], out=out[start:stop])
        return out

    difference = (row_by_row() - gathered()).abs().max().item()
    rows = [
        {"method": "row by row (5 bmm/baddbmm over strided views)", "seconds": timed(row_by_row, args.repeats)},
        {"method": f"gathered ({args.chunk} pixels a block, one bmm each)", "seconds": timed(gathered, args.repeats)},
    ]
    for row in rows:
        row["ns_per_pixel"] = row["seconds"] / args.pixels * 1e9
        row["max_abs_difference"] = difference
    header = machine_header("Lambda+ positional product: row by row vs gathered", invocation(),
                            {"threads": args.threads, "pixels": args.pixels,
                             "shapes": f"heads {HEADS}, |u| {INTRA}, |v| {VALUE}, kernel rows {SPANS}",
                             "note": f"median of {args.repeats} runs after a warm-up"})
    write_tables(rows, [("method", "method"), ("seconds", "seconds"), ("ns_per_pixel", "ns per pixel"),
                        ("max_abs_difference", "max abs difference")], Path(args.output), header)
    for row in rows:
        print(f"{row['method']}: {row['seconds'] * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
