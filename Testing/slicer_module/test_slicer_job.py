"""``LambdaSegmentLib.slicer_job``: what the Slicer module runs, without Slicer or MRML."""

from __future__ import annotations

import numpy as np
import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference.untrained import save_untrained_package
from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.slicer_job import SegmentationJob, build_study, guess_second_image_kind, segment_volumes


@pytest.fixture(scope="module")
def phantom() -> tuple[Volume, Volume]:
    """DWI + ADC (10^-3 mm^2/s): brain 0.8 inside a CSF rim 3.0, 0.9 x 0.9 x 6 mm voxels."""
    shape = (6, 64, 64)
    k, j, i = np.meshgrid(*(np.arange(n, dtype=float) for n in shape), indexing="ij")
    radius = ((k - 2.5) * 6 / 16) ** 2 + ((j - 31.5) * 0.9 / 27) ** 2 + ((i - 31.5) * 0.9 / 24) ** 2
    head, brain = radius <= 1.0, radius <= 0.75
    rng = np.random.default_rng(5)
    dwi = (np.where(head, 80.0, 0) + np.where(brain, 420.0, 0) + rng.normal(0, 10, shape) * head).clip(0)
    adc = np.where(head, 3.0, 0) - np.where(brain, 2.2, 0)
    grid = Volume(dwi.astype(np.float32), (0.9, 0.9, 6.0), (10.0, -20.0, 30.0))
    return grid, grid.with_array(adc.astype(np.float32))


@pytest.mark.parametrize(
    ("name", "kind"), [("ADC", "adc"), ("dwi_ADC_map", "adc"), ("eADC", "eadc"), ("Exponential ADC", "eadc")]
)
def test_a_telling_name_decides_the_kind(phantom, name, kind):
    _dwi, adc = phantom
    assert guess_second_image_kind(adc, name) == kind


def test_values_that_look_like_an_eadc_win_over_a_name_saying_adc(phantom):
    _dwi, adc = phantom
    eadc = adc.with_array(np.where(adc.array > 0, np.exp(-adc.array), 0).astype(np.float32))
    assert guess_second_image_kind(eadc, "ADC") == "eadc"


def test_without_a_telling_name_the_values_decide_the_kind(phantom):
    _dwi, adc = phantom
    eadc = adc.with_array(np.where(adc.array > 0, np.exp(-adc.array), 0).astype(np.float32))
    assert guess_second_image_kind(adc, "series 7") == "adc"  # CSF near 3
    assert guess_second_image_kind(adc.with_array(adc.array / 1000), "series 7") == "adc"  # mm^2/s, all < 0.005
    assert guess_second_image_kind(eadc, "series 8") == "eadc"


def test_an_eadc_forced_to_be_an_adc_is_refused(phantom):
    dwi, adc = phantom
    eadc = adc.with_array(np.where(adc.array > 0, np.exp(-adc.array), 0).astype(np.float32))
    assert build_study(dwi, eadc, kind="auto", second_name="x").adc_unit_detected == "eadc"
    with pytest.raises(BadInputError, match="look like an eADC"):
        build_study(dwi, eadc, kind="adc")
    with pytest.raises(BadInputError, match="unitless"):
        build_study(dwi, eadc, kind="eadc", adc_unit="mm2/s")


def test_progress_rises_to_the_end(phantom, tmp_path):
    dwi, adc = phantom
    seen = []
    segment_volumes(dwi, adc, package_dir=save_untrained_package(tmp_path / "p"), progress=lambda f, s: seen.append(f))
    assert seen == sorted(seen) and seen[0] < 0.1 and seen[-1] >= 0.95


def test_a_job_that_refuses_its_inputs_reports_the_reason(phantom, tmp_path):
    dwi, adc = phantom
    job = SegmentationJob.start(dwi, adc, package_dir=tmp_path / "no-such-package")
    status = job.wait()
    assert not status.running and job.process.returncode == 2
    with pytest.raises(ValueError, match="no-such-package"):
        job.result()
    assert not job.folder.exists()


def test_the_job_process_keeps_its_heap_then_runs_its_job(monkeypatch):
    """The child's entry sets the heap (it exits with its job, as the console script does)
    before it runs the job in the folder it is given; Slicer's own process is never touched:
    ``SegmentationJob.start`` only launches the child."""
    import LambdaSegmentLib.heap as heap
    import LambdaSegmentLib.slicer_job as slicer_job

    calls = []
    monkeypatch.setattr(heap, "keep_freed_memory", lambda: calls.append("keep_freed_memory") or True)
    monkeypatch.setattr(slicer_job, "run_job", lambda folder: calls.append(("run_job", folder)) or 0)
    assert slicer_job.child_main(["slicer_job.py", "/tmp/job-folder"]) == 0
    assert calls == ["keep_freed_memory", ("run_job", "/tmp/job-folder")]
