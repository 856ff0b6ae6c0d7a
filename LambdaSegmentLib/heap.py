"""A segmenting process's heap: freed blocks are kept for reuse, not handed back to the kernel.

Why: glibc's malloc serves each block above its mmap threshold (128 KiB, raised as blocks
are freed up to 32 MiB) with fresh ``mmap`` pages and unmaps them on ``free``. One
LambdaUNet forward pass allocates and frees hundreds of such blocks: every Lambda+ layer
zeroes a padded value grid per chunk of slices (17 MB in the first Lambda+ level for a 256² input), and
the convolutions' outputs are as large. Each comes back as new pages that the kernel must
fault in and zero again. With both thresholds at their maximum, large blocks come from the
heap and freed ones are reused: the same arithmetic on the same 64-byte-aligned tensors
(PyTorch aligns its CPU buffers itself), so the same probabilities. Measured
(``benchmarks/inference_speed.py --heaps``; ``docs/performance.md``): a third off the forward
pass on a 256² grid and a tenth off a stage-2 training fold; nothing on 112-128² grids, whose
tensors glibc's adaptive threshold already keeps on the heap, for 2-6 % more peak memory.

The cost: the process keeps its peak heap until it exits. That is right for a process that
exits after its studies, so only two call this: the console script (``cli.main`` with
``argv=None``) and the Slicer module's job process (``slicer_job.child_main``), which ends
with its job. Slicer itself, and code that imports the library, keep the allocator as their
host configured it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from collections.abc import Callable

M_TRIM_THRESHOLD = -1  # glibc malloc.h: free() returns heap top above this many bytes to the kernel
M_MMAP_THRESHOLD = -3  # glibc malloc.h: blocks above this many bytes get their own mmap
INT_MAX = 2**31 - 1  # mallopt takes an int


def glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt(param, value)`` (returns 1 when it took the value), or None where the
    C library is not glibc (macOS, Windows, musl) or cannot be loaded; nothing is set."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    path = ctypes.util.find_library("c")
    if path is None:
        return None
    try:
        mallopt = ctypes.CDLL(path).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds to their maximum for this process.

    Returns True when both took effect; False (and nothing changed) where the C library is
    not glibc or refuses the mmap threshold. The order matters: setting the trim threshold
    alone switches off glibc's adaptive mmap threshold and leaves it at 128 KiB, which
    makes every large block an mmap (measured 1.5-2x slower forward passes), so the trim
    threshold is set only once the mmap threshold has been accepted.
    """
    mallopt = glibc_mallopt()
    if mallopt is None or mallopt(M_MMAP_THRESHOLD, INT_MAX) != 1:
        return False
    return mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1
