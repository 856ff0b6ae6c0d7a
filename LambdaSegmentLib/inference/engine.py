"""Running a model package on a study: probability map and mask on the DWI grid.

The stack is run in one pass when its estimated peak memory fits the budget, otherwise
in overlapping slabs along the slice axis (``slabs.py``) whose stitched output equals the
one-pass output, because each slab's halo covers the model's through-slice receptive
field. The network run is ``models.fusion.optimise_for_inference``'s copy of the package's
model (BatchNorms folded, channels-last, 2D parts and Lambda+ layers slice-chunked). An exact slab needs at least 2 x halo + 1 input slices (17 for the paper's
LambdaUNet), so a budget below that is exceeded, with a warning, rather than giving a
different result.

A manifest with ``"network_field_mm": W`` runs each of its networks on its field around the
brain (``field.brain_field``: the brain's box on the stack plus a margin, at least W mm wide)
instead of the whole stack; no bundled package does (issue 13's rules 121-122).

Inference runs under ``torch.inference_mode``. On CUDA it autocasts to bfloat16 (not yet
measured against float32 on a GPU in this project: ``benchmarks/inference_precision.py``
does that when run on a GPU machine); CPU and MPS run in float32. CPU inference is
deterministic: no sampling, the same kernels for the same shapes.

A package with a seed network (``package.py``) also runs that network, one plain pass, and
keeps only the components of its own thresholded map that the seed network detects
(``postprocess.keep_seeded_components``), before the manifest's post-processing.

Test-time flips (off by default; ``tta=True``, or a manifest whose ``postprocessing`` says
``"test_time_flips": true``): the stack is also run mirrored along each in-plane axis
(``tta_flips``), each output is mirrored back onto the unflipped stack, and the
probability is the mean of the passes. Flips are in-plane only: the slice axis is never
reversed (the model sees slices along the acquisition's slice axis). The model's stack is
already in display orientation (``preprocessing.slice_stack``), so the mirror of an axial or
coronal study's left-right axis is found from the DWI's direction matrix, not from the
array's storage order. ``uncertainty=True`` runs the same passes and returns their
disagreement (the voxel-wise standard deviation of the passes' probabilities).
"""

from __future__ import annotations

import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.io import Volume
from LambdaSegmentLib.preprocessing.prepare import PreparedInput

from .devices import describe_device, resolve_device
from .field import Field, brain_field, field_setting, whole_stack
from .memory import bytes_per_slice, default_memory_budget_bytes, max_slices_per_pass, parameter_bytes
from .package import ModelPackage, load_model_package
from .postprocess import PostProcessing, keep_seeded_components, postprocess
from .slabs import Slab, plan_slabs

ANATOMICAL_AXES = ("left-right", "anterior-posterior", "superior-inferior")  # LPS x, y, z
# A logit beyond this is a runaway, not a confident answer: trained models here stay within a few
# hundred. Stacked Lambda+ layers with BatchNorm queries are quadratic in their input's scale, and
# on some studies (a whole-territory infarct of 226 mL) the 2.0.0 weights reached logits of -1e24
# whose sigmoid, 0, silently hid the infarct (models.lambda_plus.QueryRMSNorm).
RUNAWAY_LOGIT = 1e5

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each slab (``total`` slabs)."""


@dataclass(frozen=True)
class Segmentation:
    """Result of ``segment_study``.

    Attributes:
        probability: infarct probability in [0, 1], float32, on the DWI grid.
        mask: 1 = infarct, 0 = not, uint8, on the DWI grid (probability >= threshold).
        seconds: wall time of preprocessing, inference and resampling back.
        device: the device that ran the model, e.g. ``cpu`` or ``cuda:0 (NVIDIA H100)``.
        threshold: the package's threshold that made ``mask``.
        num_slabs: forward passes used per flip (1 = the whole stack at once).
        flips: the test-time flips run, by the anatomical axis each mirrors ("none" = as
            acquired); ``("none",)`` without flips.
        tta: whether ``probability`` is the mean over ``flips`` (else the unflipped pass).
        disagreement: with ``uncertainty=True``, the standard deviation over ``flips`` of the
            probability (0–0.5), float32 on the DWI grid; else None.
        brain: 1 = brain, uint8, on the DWI grid (``preprocessing.brain_mask``); ``probability``
            and ``mask`` are 0 outside it.
        brain_mask_method: the method that made ``brain``.
        seed: with a package that has a seed network, 1 where that network's probability
            reaches its threshold inside the brain, uint8 on the DWI grid; else None.
        unseeded_probability: with a seed network, the package network's probability before
            :func:`postprocess.keep_seeded_components` (``probability`` is after it); else None.
    """

    probability: Volume
    mask: Volume
    seconds: float
    device: str
    threshold: float
    num_slabs: int
    flips: tuple[str, ...] = ("none",)
    tta: bool = False
    disagreement: Volume | None = None
    brain: Volume | None = None
    brain_mask_method: str = "none"
    seed: Volume | None = None
    unseeded_probability: Volume | None = None

    @property
    def brain_volume_ml(self) -> float:
        """Volume of ``brain`` in mL."""
        return float(np.count_nonzero(self.brain.array)) * self.brain.voxel_volume_mm3 / 1000.0


@dataclass(frozen=True)
class NetworkRun:
    """One network's pass plan over a study: the network (a package, its partner or its seed),
    its prepared input, the in-plane field it runs on (``field.brain_field``), that field of
    the input's channels as float32 (c, t, h_field, w_field), and its slab plan."""

    network: ModelPackage
    prepared: PreparedInput
    field: Field
    channels: np.ndarray
    slabs: list[Slab]


@dataclass(frozen=True)
class StackFlip:
    """A test-time flip of the model's (t, h, w) stack.

    Attributes:
        name: the anatomical axis mirrored (one of ``ANATOMICAL_AXES``), or "none".
        axes: stack axes reversed (1 = h, 2 = w); () for "none".
    """

    name: str
    axes: tuple[int, ...]


def tta_flips(prepared: PreparedInput) -> list[StackFlip]:
    """No flip, then a mirror of each in-plane stack axis, named by the patient axis (LPS) it
    runs along most: for axial and coronal studies one of them is the left-right mirror, for
    a sagittal one (left-right is the slice axis, never flipped) neither is."""
    grid = prepared.grid
    flips = [StackFlip("none", ())]
    for position in (2, 1):  # w first: the left-right axis of axial and coronal stacks
        column = grid.dwi_grid.direction[:, grid.axes_thw[position]]
        flips.append(StackFlip(ANATOMICAL_AXES[int(np.argmax(np.abs(column)))], (position,)))
    return flips


def postprocessing_flips(manifest: dict) -> bool:
    """Whether the manifest turns test-time flips on by default (``postprocessing.test_time_flips``)."""
    return PostProcessing.from_manifest(manifest).test_time_flips


def predict_over_flips(
    model: nn.Module,
    channels: np.ndarray,
    flips: list[StackFlip],
    *,
    device: torch.device,
    slabs: list[Slab] | None = None,
    progress: Progress | None = None,
    precision: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each flip's probability, mirrored back onto the unflipped stack.

    Args:
        channels: float32 (c, t, h, w), as ``predict_probability``.
        flips: from ``tta_flips``; the first is normally "none".

    Returns:
        (first flip's probability, mean over the flips, standard deviation over the flips),
        each float32 (t, h, w) on the unflipped stack.
    """
    total = len(flips) * len(slabs or [None])
    running = np.zeros(channels.shape[1:], dtype=np.float64)
    squares = np.zeros(channels.shape[1:], dtype=np.float64)
    first = None
    for n, flip in enumerate(flips):
        done_before = n * (total // len(flips))
        step = None if progress is None else (lambda done, _total, before=done_before: progress(before + done, total))
        mirrored = np.flip(channels, axis=tuple(axis + 1 for axis in flip.axes)) if flip.axes else channels
        probability = predict_probability(model, np.ascontiguousarray(mirrored), device=device, slabs=slabs,
                                          progress=step, precision=precision)
        probability = np.flip(probability, axis=flip.axes) if flip.axes else probability  # back onto the stack
        first = probability if first is None else first
        running += probability
        squares += np.square(probability, dtype=np.float64)
    mean = running / len(flips)
    spread = np.sqrt(np.clip(squares / len(flips) - mean**2, 0.0, None))
    return np.ascontiguousarray(first), mean.astype(np.float32), spread.astype(np.float32)


def predict_probability(
    model: nn.Module,
    channels: np.ndarray,
    *,
    device: torch.device,
    slabs: list[Slab] | None = None,
    progress: Progress | None = None,
    precision: str = "auto",
) -> np.ndarray:
    """Infarct probability of a prepared stack.

    Args:
        model: network mapping (b, c, t, h, w) to logits (b, 1, t, h, w), in eval mode on ``device``.
        channels: float32 (c, t, h, w), the model's channel order, slice axis first.
        device: where to compute.
        slabs: slab plan over t; None = one pass.
        progress: called after each slab.
        precision: "auto" (bfloat16 autocast on CUDA, float32 elsewhere) or "fp32".

    Returns:
        float32 (t, h, w) probabilities; NaN where the logit is non-finite or a runaway
        (|logit| > ``RUNAWAY_LOGIT``), so that ``segment_study`` refuses it.
    """
    num_slices = channels.shape[1]
    slabs = slabs or [Slab(0, num_slices, 0, num_slices)]
    probability = np.empty(channels.shape[1:], dtype=np.float32)
    if precision not in ("auto", "fp32"):
        raise BadInputError("--precision", f"must be auto or fp32, got {precision!r}")
    mixed = precision == "auto" and device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if mixed else nullcontext()
    with torch.inference_mode(), autocast:
        for done, slab in enumerate(slabs, start=1):
            window = torch.from_numpy(np.ascontiguousarray(channels[:, slab.start : slab.stop]))
            logits = model(window.unsqueeze(0).to(device))  # (1, 1, t_window, h, w)
            core_logits = logits[0, 0, slab.core_in_window].float()  # (t_core, h, w)
            core = core_logits.sigmoid().masked_fill(~(core_logits.abs() <= RUNAWAY_LOGIT), float("nan"))
            probability[slab.core_start : slab.core_stop] = core.cpu().numpy()
            if progress is not None:
                progress(done, len(slabs))
    return probability


def inference_model(model: nn.Module, device: torch.device) -> nn.Module:
    """An inference copy of ``model`` on ``device``: BatchNorms folded, channels-last weights,
    and the 2D parts of the UNet family and its Lambda+ layers run
    ``models.fusion.INFERENCE_SLICE_CHUNK`` slices at a time (less peak memory, no halo
    recomputation: paper LambdaUNet, 24 x 256^2, fp32 CPU, 1.54 GiB peak RSS against
    2.58 GiB in one pass, ``benchmarks/results/inference_speed_cpu.md``). Same outputs up to float
    rounding (``LambdaSegmentLib.models.fusion``); the package's own model is left as it is."""
    from LambdaSegmentLib.models.fusion import INFERENCE_SLICE_CHUNK, optimise_for_inference

    return optimise_for_inference(model, slice_chunk=INFERENCE_SLICE_CHUNK).to(device)


def plan_for_budget(model: nn.Module, channels_shape: tuple[int, ...], halo: int, budget_bytes: int) -> list[Slab]:
    """Slab plan for a (c, t, h, w) stack under ``budget_bytes``."""
    _c, num_slices, height, width = channels_shape
    window = max_slices_per_pass(model, height, width, budget_bytes)
    if window < min(num_slices, 2 * halo + 1):
        needed = parameter_bytes(model) + min(num_slices, 2 * halo + 1) * bytes_per_slice(model, height, width)
        warnings.warn(
            f"memory budget {budget_bytes / 2**30:.2f} GB is below the {needed / 2**30:.2f} GB that an exact slab of "
            f"{2 * halo + 1} slices of {height}x{width} needs; using that instead",
            stacklevel=2,
        )
    return plan_slabs(num_slices, window, halo)


def segment_study(
    study: object,
    package: ModelPackage | None = None,
    *,
    device: str = "auto",
    memory_budget_gb: float | None = None,
    progress: Progress | None = None,
    precision: str = "auto",
    tta: bool | None = None,
    uncertainty: bool = False,
) -> Segmentation:
    """Segment a ``LambdaSegmentLib.io.Study``: probability and mask on its DWI grid, both 0
    outside the study's brain mask (the manifest's ``brain_mask`` method, default
    ``preprocessing.brain_mask.DEFAULT_BRAIN_MASK_METHOD``): an infarct is never reported
    outside the brain.

    Args:
        study: the loaded study (DWI b1000, ADC in 1e-3 mm^2/s, eADC).
        package: the model package; None loads the bundled one.
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        memory_budget_gb: bound on the model's estimated peak memory; None = half of the
            device's memory (GPU) or of the machine's RAM (CPU).
        progress: called as ``progress(done, total)`` after each slab.
        precision: "auto" (bfloat16 autocast on CUDA, float32 elsewhere) or "fp32".
        tta: average the probability over the test-time flips (``tta_flips``); None =
            the manifest's ``postprocessing.test_time_flips`` (default off).
        uncertainty: also return the flips' disagreement (runs the flips; the mask still
            comes from the unflipped pass unless ``tta``).

    A package with a partner network runs it over the same flips, and ``probability`` is the
    mean of the two networks' probabilities on the DWI grid (``disagreement``: the mean of their
    flip standard deviations). A package with a seed network runs it too (one plain pass,
    whatever ``tta``): only the components it detects are kept, and ``probability`` is 0
    outside them (``Segmentation.seed`` and ``unseeded_probability`` hold what that step saw).
    """
    from LambdaSegmentLib.preprocessing import prepare_input
    from LambdaSegmentLib.preprocessing.brain_mask import brain_mask

    start = time.perf_counter()
    package = package if package is not None else load_model_package()
    brain_mask_method = package.brain_mask_method
    brain = brain_mask(study.dwi, method=brain_mask_method, foreground=study.foreground)
    torch_device = resolve_device(device)
    budget = int(memory_budget_gb * 2**30) if memory_budget_gb else default_memory_budget_bytes(torch_device)
    prepared = prepare_input(study, package.manifest["preprocessing"])
    brain_volume = study.dwi.with_array(brain.astype(np.uint8))
    field_mm = field_setting(package.manifest)  # the package decides for every network it runs
    tta = postprocessing_flips(package.manifest) if tta is None else bool(tta)
    flips = tta_flips(prepared) if tta or uncertainty else [StackFlip("none", ())]

    def network_run(network: ModelPackage) -> NetworkRun:
        """A network's pass plan: the package's prepared input when the preprocessing is the
        same, its field (the whole stack unless the manifest asks for ``field.brain_field``),
        and slabs for that field under the budget."""
        same = network.manifest["preprocessing"] == package.manifest["preprocessing"]
        network_prepared = prepared if same else prepare_input(study, network.manifest["preprocessing"])
        field = whole_stack(network_prepared.channels.shape[2:]) if field_mm is None else brain_field(
            network_prepared.to_model_grid(brain_volume), network_prepared.spacing_thw_mm[1:],
            int(network.manifest["preprocessing"].get("pad_multiple", 16)), min_field_mm=field_mm)
        network_channels = field.crop(np.asarray(network_prepared.channels, dtype=np.float32))
        return NetworkRun(network, network_prepared, field, network_channels,
                          plan_for_budget(network.model, network_channels.shape, network.slice_receptive_radius, budget))

    runs = [network_run(package)] + ([network_run(package.partner)] if package.partner else [])
    slabs = runs[0].slabs
    seed_run = network_run(package.seed) if package.seed is not None else None
    # one progress count over every pass: each network over each flip, then the seed network
    passes = [len(flips) * len(run.slabs) for run in runs]
    total = sum(passes) + (len(seed_run.slabs) if seed_run else 0)
    probabilities, spreads = [], []
    for number, run in enumerate(runs):
        before = sum(passes[:number])
        run_progress = None if progress is None else (lambda done, _total, before=before: progress(before + done, total))
        model = inference_model(run.network.model, torch_device)
        if tta or uncertainty:
            first, mean, spread = predict_over_flips(model, run.channels, flips, device=torch_device, slabs=run.slabs,
                                                     progress=run_progress, precision=precision)
            stack_probability = mean if tta else first
            if uncertainty:
                spreads.append(run.prepared.to_dwi_grid(run.field.embed(spread)))
        else:
            stack_probability = predict_probability(model, run.channels, device=torch_device, slabs=run.slabs,
                                                    progress=run_progress, precision=precision)
        refuse_non_finite(stack_probability, run.network)
        probabilities.append(run.prepared.to_dwi_grid(run.field.embed(stack_probability)))
    # the networks' mean on the DWI grid (a partner may see another grid); one network: its own
    averaged = np.mean([np.asarray(volume.array, dtype=np.float32) for volume in probabilities], axis=0)
    values = np.where(brain, np.clip(averaged, 0.0, 1.0), np.float32(0.0)).astype(np.float32)
    probability_volume = probabilities[0].with_array(values)
    settings = PostProcessing.from_manifest(package.manifest)
    seed_volume = unseeded = None
    if seed_run is not None:
        seed_progress = None if progress is None else (lambda done, _total: progress(sum(passes) + done, total))
        seed_probability = predict_probability(inference_model(package.seed.model, torch_device), seed_run.channels,
                                               device=torch_device, slabs=seed_run.slabs, progress=seed_progress,
                                               precision=precision)
        refuse_non_finite(seed_probability, package.seed)
        seed_on_grid = seed_run.prepared.to_dwi_grid(seed_run.field.embed(seed_probability))
        seed = (np.asarray(seed_on_grid.array) >= package.seed_threshold) & brain
        seed_volume = study.dwi.with_array(seed.astype(np.uint8))
        unseeded = probability_volume
        probability_volume = unseeded.with_array(keep_seeded_components(values, settings.candidate_threshold, brain, seed))
    mask = postprocess(probability_volume, study.dwi, brain, settings, adc=study.adc)
    disagreement = None
    if uncertainty and spreads:
        spread_values = np.mean([np.asarray(volume.array, dtype=np.float32) for volume in spreads], axis=0)
        disagreement = spreads[0].with_array(np.clip(spread_values, 0.0, 0.5).astype(np.float32))
    return Segmentation(
        probability=probability_volume,
        mask=mask,
        seconds=time.perf_counter() - start,
        device=describe_device(torch_device),
        threshold=settings.threshold,
        num_slabs=len(slabs),
        flips=tuple(flip.name for flip in flips),
        tta=tta,
        disagreement=disagreement,
        brain=brain_volume,
        brain_mask_method=brain_mask_method,
        seed=seed_volume,
        unseeded_probability=unseeded,
    )


def refuse_non_finite(probability: np.ndarray, package: ModelPackage) -> None:
    """BadInputError naming ``package`` when its network left NaN (non-finite or runaway logits):
    never threshold NaN into a mask that looks like an answer."""
    non_finite = int(np.count_nonzero(~np.isfinite(probability)))
    if non_finite:
        raise BadInputError(
            package.directory,
            f"model {package.name} {package.version} produced {non_finite} non-finite or runaway outputs "
            f"(NaN, or |logit| > {RUNAWAY_LOGIT:g}) on this study; its weights are unusable here",
        )
