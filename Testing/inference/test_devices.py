"""Device choice: auto falls back to the CPU; asking for hardware that is absent is bad input."""

from __future__ import annotations

import pytest
import torch

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import resolve_device
from LambdaSegmentLib.inference.devices import mps_available


def test_auto_prefers_cuda_then_mps_then_cpu() -> None:
    expected = "cuda" if torch.cuda.is_available() else "mps" if mps_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("CPU") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
@pytest.mark.parametrize("spec", ["cuda", "cuda:0"])
def test_cuda_without_a_gpu_is_bad_input(spec: str) -> None:
    with pytest.raises(BadInputError, match="no CUDA GPU"):
        resolve_device(spec)


@pytest.mark.parametrize("spec", ["tpu", "gpu0", "cuda:x"])
def test_unknown_device_is_bad_input(spec: str) -> None:
    with pytest.raises(BadInputError) as error:
        resolve_device(spec)
    assert error.value.source == "--device"


def test_missing_lightning_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from LambdaSegmentLib.inference.distributed import import_lightning

    monkeypatch.setitem(sys.modules, "lightning", None)  # what an install without the train extra looks like
    with pytest.raises(BadInputError, match=r"pip install 'lambdasegment\[train\]'"):
        import_lightning()
