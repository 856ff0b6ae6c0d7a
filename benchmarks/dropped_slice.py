"""Why a model leaves one whole slice of a large infarct nearly empty (model card, "A dropped slice").

The measurements behind the card's explanation, for model packages and studies
(the 226 mL synthetic whole-territory infarct of ``runaway_logits.py``, seed 31,100,003, the
other large synthetic infarcts of ``real_scan_cv.py``, and the two ISLES'22 cases natively
when ``../shared`` is present). All on the model grid, one plain eval-mode forward pass
(``package.model``), after checking that it is what the engine computes:

- ``survey``: per package and study, the mean probability over the infarct of every slice
  holding >= 100 infarct voxels, the slices under 0.2 ("dropped"), the weakest, and the
  volume Dice at 0.5;
- ``engine``: the engine's path (BatchNorms folded, Lambda+ slice chunks and halo, slabs)
  against one plain forward pass: largest probability difference;
- per diagnosed (package, study, slice):
  * ``inputs``: the normalised channels on the slice and its neighbours (DWI brain-median
    units clipped at 4, eADC clipped to [0, 1]);
  * ``layers``: per Lambda+ layer and slice, the input RMS, the key softmax (fewest effective
    pixels exp(entropy) and largest weight over the (u, k) columns; the slice has H W pixels),
    the content lambda's RMS, and the RMS of its term q^T lambda^G (the global term, the same
    context at every pixel of the slice) and of the whole output;
  * ``interventions``: the slice's mean probability when its content lambda is replaced at one
    layer by the mean of its neighbours' (or by zero); when every content lambda is scaled by s
    (the gain of the per-slice global path); with the first layer's keys softened; with the
    slice's DWI scaled; and on a training-shaped window (8 x 96 x 96 around the slice) with the
    BatchNorms in eval mode against batch statistics (what the training forward computes).

    R=runs/cv-rms; .venv/bin/python benchmarks/dropped_slice.py --packages bundled $R/foldA/pkg $R/pretrain/pkg \
        $R/foldA-content/pkg $R/pretrain-content/pkg $R/foldB/pkg $R/shipped/pkg $R/foldA-carve/pkg $R/foldB-carve/pkg \
        --diagnose $R/foldA/pkg:sub-strokecase0003:36 $R/foldA/pkg:synthetic-31100003:4 \
        $R/pretrain/pkg:sub-strokecase0003:36 bundled:synthetic-31100003:4 bundled:sub-strokecase0003:36 \
        $R/foldA-content/pkg:sub-strokecase0003:36 $R/foldA-content/pkg:synthetic-31100003:4 \
        --montage-packages bundled $R/foldA/pkg $R/foldA-content/pkg
        # -> benchmarks/results/dropped_slice.json, synthetic montages as PNG beside it; montages
        #    of the real cases go to benchmarks/results/real_scan_cv/montages/ (not committed)

(``foldA-content`` is ``pretrain-content`` below fine-tuned by fold A's stage 2 with
``CONTENT_NORM=rms``; the committed JSON was measured with the packages at those paths.)

``convert`` writes the starting point of the short fine-tune that tested the fix: a package's
weights in a LambdaUNet with ``content_norm="rms"``, each layer's content gain set to the
median content-lambda RMS of that layer over full slices of synthetic training studies (so
ordinary slices start as they were, and a runaway slice's context is held to that size):

    .venv/bin/python benchmarks/dropped_slice.py convert --source runs/cv-rms/pretrain/pkg --output runs/cv-rms/pretrain-content/pkg

(``dropped_slice_converted.json``: ``convert`` of fold A and of the bundled package, surveyed
with ``--packages`` alone.)
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import real_scan_cv  # noqa: E402  (its studies and packages, one definition)
from runaway_logits import MIN_SLICE_VOXELS, slice_means  # noqa: E402  (the weakest-slice measure, one definition)

from LambdaSegmentLib.inference import ModelPackage  # noqa: E402
from LambdaSegmentLib.inference.engine import inference_model, predict_probability  # noqa: E402
from LambdaSegmentLib.inference.package import save_model_package  # noqa: E402
from LambdaSegmentLib.inference.slabs import plan_slabs  # noqa: E402
from LambdaSegmentLib.io import Study  # noqa: E402
from LambdaSegmentLib.models import LambdaPlus, batch_norms, create_model  # noqa: E402
from LambdaSegmentLib.preprocessing import prepare_input  # noqa: E402
from LambdaSegmentLib.training.export import source_revision  # noqa: E402

DROPPED = 0.2  # a slice whose infarct gets a mean probability under this is "dropped"
CALIBRATION_SEEDS = range(50_000_000, 50_000_004)  # the pretrain's own training seeds
RESULTS = REPO / "benchmarks" / "results"
REAL_MONTAGES = RESULTS / "real_scan_cv" / "montages"  # gitignored: ISLES'22 images are not redistributed
ContentEdit = Callable[[int, torch.Tensor, int], torch.Tensor]


# --------------------------------------------------------------------------- studies, forward


class Case:
    """One study on a package's model grid: channels (c, t, h, w) and the infarct (t, h, w)."""

    def __init__(self, name: str, study: Study, truth: np.ndarray, package: ModelPackage) -> None:
        prepared = prepare_input(study, package.manifest["preprocessing"])
        self.name, self.real = name, name.startswith("sub-")
        self.channels = np.asarray(prepared.channels, dtype=np.float32)
        self.channel_names = prepared.channel_names
        self.truth = prepared.to_model_grid(study.dwi.with_array(truth.astype(np.uint8))) > 0

    def tensor(self) -> torch.Tensor:
        return torch.from_numpy(self.channels)[None]


def load_studies(large_seeds: list[int]) -> list[tuple[str, Study, np.ndarray]]:
    found = [(f"synthetic-{seed}", *real_scan_cv.synthetic(seed, **real_scan_cv.SYNTHETIC_LARGE_RANGES)) for seed in large_seeds]
    if real_scan_cv.ISLES.is_dir():
        found += [(real_scan_cv.CASES[case], *real_scan_cv.load_real(case, thick=False)) for case in real_scan_cv.CASES]
    return found


def lambda_layers(model: nn.Module) -> list[LambdaPlus]:
    return [module for module in model.modules() if isinstance(module, LambdaPlus)]


def probability(model: nn.Module, x: torch.Tensor) -> np.ndarray:
    with torch.inference_mode():
        return model(x).sigmoid()[0, 0].numpy()


def summary(prob: np.ndarray, truth: np.ndarray, around: int | None = None) -> dict[str, Any]:
    means = slice_means(prob, truth)
    predicted = prob >= 0.5
    weakest = min(means, key=means.get) if means else None
    row = {"volume_dice": round(float(2 * (predicted & truth).sum() / max(1, predicted.sum() + truth.sum())), 3),
           "weakest_slice": weakest, "weakest_mean": means.get(weakest),
           "dropped_slices": [t for t, mean in means.items() if mean < DROPPED]}
    if around is not None:
        row["slices"] = {str(t): means[t] for t in range(around - 2, around + 3) if t in means}
    return row


# --------------------------------------------------------------------------- Lambda+ with a hook on its content lambda


def lambda_plus_forward(
    layer: LambdaPlus, x: torch.Tensor, num_slices: int, *, index: int,
    edit: ContentEdit | None = None, key_temperature: float = 1.0, record: dict | None = None,
) -> torch.Tensor:
    """``LambdaPlus.forward``'s one-pass path written out, with the content lambda exposed:
    ``edit(index, content (B, k, v), num_slices)`` may replace it (before the positional
    biases), the keys may be divided by ``key_temperature`` before their softmax, and
    ``record`` receives per-slice statistics. Equal to the layer's forward when nothing is
    changed (checked in ``main``)."""
    folded, _, height, width = x.shape
    heads, kd, ud, vd = layer.heads, layer.key_dim, layer.intra_depth, layer.value_dim
    q, keys, values = layer._project(x)  # (B H W h k), (B H W u k), (B H W u v)
    positional = layer.positional_kernel()
    weights = (keys.reshape(folded, height * width, ud, kd) / key_temperature).softmax(dim=1)  # B (H W) u k
    content = torch.bmm(weights.reshape(folded, -1, kd).transpose(1, 2), values.reshape(folded, -1, vd))  # B k v
    if layer.norm_content is not None:
        content = layer.norm_content(content)
    if edit is not None:
        content = edit(index, content, num_slices)
    global_term = torch.bmm(q.reshape(folded, height * width * heads, kd), content)  # B (H W h) v
    lam = content + positional[1][:, None] if positional is not None else content
    y = torch.bmm(q.reshape(folded, height * width * heads, kd), lam).view(folded, height, width, heads * vd)
    if positional is not None:
        y = layer._add_positional(y, q, values, positional[0], positional[2], num_slices, height, width)
    if record is not None:
        entropy = -(weights * weights.clamp_min(1e-30).log()).sum(dim=1)  # B u k

        def rms(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.reshape(folded, -1).square().mean(dim=1).sqrt()

        record.update(input_rms=rms(x), key_effective_pixels_min=entropy.exp().reshape(folded, -1).min(dim=1).values,
                      key_weight_max=weights.amax(dim=1).reshape(folded, -1).max(dim=1).values,
                      content_rms=rms(content), global_term_rms=rms(global_term), output_rms=rms(y), pixels=height * width)
    return y.permute(0, 3, 1, 2)


@contextmanager
def exposed_content(model: nn.Module, edit: ContentEdit | None = None, key_temperature: dict[int, float] | None = None,
                    records: dict[int, dict] | None = None) -> Iterator[None]:
    """Run every Lambda+ layer of ``model`` through ``lambda_plus_forward`` (layer i: index i)."""
    layers = lambda_layers(model)
    for index, layer in enumerate(layers):
        record = None
        if records is not None:
            record = records.setdefault(index, {})

        def forward(x, num_slices, layer=layer, index=index, record=record):
            return lambda_plus_forward(layer, x, num_slices, index=index, edit=edit,
                                       key_temperature=(key_temperature or {}).get(index, 1.0), record=record)
        layer.forward = forward
    try:
        yield
    finally:
        for layer in layers:
            del layer.forward


def with_content(model: nn.Module, x: torch.Tensor, edit: ContentEdit | None = None,
                 key_temperature: dict[int, float] | None = None) -> np.ndarray:
    with exposed_content(model, edit, key_temperature):
        return probability(model, x)


# --------------------------------------------------------------------------- measurements


def engine_difference(package: ModelPackage, case: Case) -> dict[str, float]:
    """Largest |probability difference| of the engine's paths against one plain forward."""
    plain = probability(package.model.eval(), case.tensor())
    model = inference_model(package.model, torch.device("cpu"))
    one_pass = predict_probability(model, case.channels, device=torch.device("cpu"))
    halo = package.slice_receptive_radius
    slabs = plan_slabs(case.channels.shape[1], 2 * halo + 1, halo)
    in_slabs = predict_probability(model, case.channels, device=torch.device("cpu"), slabs=slabs)
    return {"one_pass_chunked_max_abs": float(np.abs(one_pass - plain).max()),
            "slabs": len(slabs), "slabs_max_abs": float(np.abs(in_slabs - plain).max())}


def input_statistics(case: Case, k: int) -> dict[str, dict[str, Any]]:
    rows = {}
    for t in range(k - 2, k + 3):
        row = {"infarct_voxels": int(case.truth[t].sum())}
        for c, name in enumerate(case.channel_names):
            values, inside = case.channels[c, t], case.truth[t]
            tissue = values[case.channels[1, t] > 0.2]  # roughly the head (normalised DWI)
            row[name] = {"infarct_mean": round(float(values[inside].mean()), 3) if inside.any() else None,
                         "infarct_p95": round(float(np.percentile(values[inside], 95)), 3) if inside.any() else None,
                         "head_mean": round(float(tissue.mean()), 3), "max": round(float(values.max()), 3),
                         "voxels_at_clip": int((values >= (4.0 if name == "dwi" else 1.0) - 1e-6).sum())}
        rows[str(t)] = row
    return rows


def layer_table(model: nn.Module, case: Case, k: int) -> list[dict[str, Any]]:
    records: dict[int, dict] = {}
    with exposed_content(model, records=records):
        probability(model, case.tensor())
    table = []
    for index in sorted(records):
        record = records[index]
        row: dict[str, Any] = {"layer": index, "pixels_per_slice": record.pop("pixels")}
        for name, values in record.items():
            row[name] = {str(t): round(float(values[t]), 4) for t in range(k - 2, k + 3)}
        table.append(row)
    return table


def interventions(model: nn.Module, case: Case, k: int) -> dict[str, Any]:
    x = case.tensor()
    layers = range(len(lambda_layers(model)))
    found: dict[str, Any] = {"baseline": summary(probability(model, x), case.truth, k)}

    def at_slice(layer: int, replacement: str) -> ContentEdit:
        def edit(index: int, content: torch.Tensor, num_slices: int) -> torch.Tensor:
            if index != layer:
                return content
            content = content.clone()
            content[k] = 0.5 * (content[k - 1] + content[k + 1]) if replacement == "neighbours" else 0.0
            return content
        return edit

    for replacement in ("neighbours", "zero"):
        found[f"slice_content_from_{replacement}"] = {
            str(layer): slice_means(with_content(model, x, at_slice(layer, replacement)), case.truth).get(k) for layer in layers}
    found["all_content_scaled"] = {
        str(s): summary(with_content(model, x, lambda _i, content, _n, s=s: s * content), case.truth, k)
        for s in (0.5, 0.8, 0.9, 1.1)}
    found["first_layer_key_temperature"] = {
        str(t): summary(with_content(model, x, key_temperature={0: t}), case.truth, k) for t in (1.5, 2.0, 3.0)}
    dwi = case.channel_names.index("dwi")
    scaled = {}
    for s in (0.9, 0.95, 1.05, 1.1):
        perturbed = x.clone()
        perturbed[0, dwi, k] *= s
        scaled[str(s)] = slice_means(probability(model, perturbed), case.truth).get(k)
    found["slice_dwi_scaled"] = scaled
    found["training_window"] = training_window(model, case, k)
    return found


def training_window(model: nn.Module, case: Case, k: int) -> dict[str, Any]:
    """The slice inside an 8 x 96 x 96 window centred on its infarct, as training sees it:
    eval-mode BatchNorms (running statistics) against batch statistics (the training forward)."""
    _, slices, height, width = case.channels.shape
    rows, columns = np.nonzero(case.truth[k])
    t0 = int(np.clip(k - 4, 0, slices - 8))
    i0 = int(np.clip(int(rows.mean()) - 48, 0, height - 96))
    j0 = int(np.clip(int(columns.mean()) - 48, 0, width - 96))
    window = case.tensor()[:, :, t0 : t0 + 8, i0 : i0 + 96, j0 : j0 + 96].contiguous()
    truth = case.truth[t0 : t0 + 8, i0 : i0 + 96, j0 : j0 + 96]

    def means(prob: np.ndarray) -> dict[str, float]:
        return {str(t0 + t): round(float(prob[t][truth[t]].mean()), 3) for t in range(8) if truth[t].sum() >= 50}

    batch_statistics = copy.deepcopy(model)
    for norm in batch_norms(batch_statistics):
        norm.train()
        norm.momentum = 0.0
    return {"window": [t0, i0, j0], "eval_batch_norm": means(probability(model, window)),
            "batch_statistics": means(probability(batch_statistics, window))}


# --------------------------------------------------------------------------- montage


def montage(cases: list[tuple[str, np.ndarray]], case: Case, k: int, path: Path) -> None:
    """DWI of slices k-1..k+1 with each package's probability >= 0.5 (red) and the infarct outline (cyan)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy import ndimage

    dwi = case.channels[case.channel_names.index("dwi")]
    fig, axes = plt.subplots(len(cases), 3, figsize=(7.5, 2.6 * len(cases)), squeeze=False)
    for row, (label, prob) in enumerate(cases):
        for column, t in enumerate((k - 1, k, k + 1)):
            axis = axes[row][column]
            axis.imshow(dwi[t], cmap="gray", vmin=0, vmax=3)
            overlay = np.zeros((*dwi[t].shape, 4))
            overlay[prob[t] >= 0.5] = (1, 0, 0, 0.45)
            edge = case.truth[t] & ~ndimage.binary_erosion(case.truth[t])
            overlay[edge] = (0, 1, 1, 1)
            axis.imshow(overlay)
            mean = prob[t][case.truth[t]].mean() if case.truth[t].any() else float("nan")
            axis.set_title(f"{label}\nslice {t}: mean p {mean:.2f}", fontsize=7)
            axis.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- convert


def content_rms_medians(model: nn.Module, channels: list[np.ndarray]) -> list[float]:
    """Per Lambda+ layer, the median over head-holding slices of the content lambda's RMS."""
    per_layer: dict[int, list[np.ndarray]] = {}
    for stack in channels:
        records: dict[int, dict] = {}
        with exposed_content(model, records=records):
            probability(model, torch.from_numpy(stack)[None])
        head = (stack[1] > 0.2).mean(axis=(1, 2)) > 0.05  # slices holding some head (normalised DWI)
        for index, record in records.items():
            per_layer.setdefault(index, []).append(record["content_rms"].numpy()[head])
    return [float(np.median(np.concatenate(per_layer[index]))) for index in sorted(per_layer)]


def calibration_stacks(package: ModelPackage, seeds: range) -> list[np.ndarray]:
    """Whole synthetic studies of the training distribution (default ranges), each as the
    package's model input: float32 (c, t, h, w)."""
    return [np.asarray(prepare_input(real_scan_cv.synthetic(seed)[0], package.manifest["preprocessing"]).channels,
                       dtype=np.float32) for seed in seeds]


def derived_manifest(package: ModelPackage, suffix: str, origin_key: str, source: str, **provenance: Any) -> dict[str, Any]:
    """``package``'s manifest for a package made from its weights: named ``<name>-<suffix>``,
    the weights' own fields left for ``save_model_package`` to fill in, and where it came from
    under ``origin_key`` (the source package and ``provenance``)."""
    manifest = copy.deepcopy(package.manifest)
    for key in ("weights_file", "weights_sha256", "weights_dtype", "created"):
        manifest.pop(key, None)
    manifest["name"] = f"{package.name}-{suffix}"
    manifest[origin_key] = {"package": f"{package.name} {package.version}", "source": str(source), **provenance}
    return manifest


def convert(source: str, output: Path) -> None:
    package = real_scan_cv.fold_package(source)
    architecture = package.manifest["architecture"]
    config = {**architecture.get("config", {}), "content_norm": "rms"}
    model = create_model(architecture["name"], **config)
    missing, unexpected = model.load_state_dict(package.model.state_dict(), strict=False)
    if unexpected or any(not key.endswith("norm_content.weight") for key in missing):
        raise SystemExit(f"convert: unexpected tensors (missing {missing[:3]}, unexpected {unexpected[:3]})")
    gains = content_rms_medians(package.model.eval(), calibration_stacks(package, CALIBRATION_SEEDS))
    with torch.no_grad():
        for layer, gain in zip(lambda_layers(model), gains):
            layer.norm_content.weight.fill_(gain)
    manifest = derived_manifest(package, "content", "converted_from", source, content_gains=[round(gain, 4) for gain in gains],
                                calibration_seeds=[CALIBRATION_SEEDS.start, CALIBRATION_SEEDS.stop - 1],
                                how="benchmarks/dropped_slice.py convert")
    manifest["architecture"] = {**architecture, "config": config}
    save_model_package(model.eval(), manifest, output)
    print(f"written {output} (content gains {[round(g, 2) for g in gains]})")


def recalibrate(source: str, output: Path, seeds: range) -> None:
    """``source``'s weights with every BatchNorm's running statistics re-estimated on whole
    synthetic studies of the training distribution (``seeds``; "precise BN", Wu & Johnson 2021):
    one study per batch, the studies averaged with equal weight (momentum None). Training
    estimated them as a moving average over 8 x 96 x 96 windows, most of them around a lesion;
    inference normalises whole studies with them. The learned weights are untouched."""
    package = real_scan_cv.fold_package(source)
    model = copy.deepcopy(package.model).eval()
    norms = batch_norms(model)
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average over the calibration batches
        norm.train()
    with torch.no_grad():
        for stack in calibration_stacks(package, seeds):
            model(torch.from_numpy(stack)[None])
    model.eval()
    manifest = derived_manifest(package, "recalibrated", "recalibrated_from", source, batch_norms=len(norms),
                                calibration_seeds=[seeds.start, seeds.stop - 1], how="benchmarks/dropped_slice.py recalibrate")
    save_model_package(model, manifest, output)
    print(f"written {output} ({len(norms)} BatchNorms re-estimated on {len(seeds)} whole studies)")


# --------------------------------------------------------------------------- main


def diagnose(spec: str, package: ModelPackage, case: Case, k: int) -> dict[str, Any]:
    model = package.model.eval()
    with exposed_content(model):  # the exposed path is the layer's own forward
        exposed = probability(model, case.tensor())
    plain = probability(model, case.tensor())
    print(f"  diagnosing {spec} on {case.name} slice {k}", flush=True)
    return {"package": spec, "study": case.name, "slice": k,
            "exposed_forward_max_abs_difference": float(np.abs(exposed - plain).max()),
            "engine": engine_difference(package, case), "inputs": input_statistics(case, k),
            "layers": layer_table(model, case, k), "interventions": interventions(model, case, k)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    converter = sub.add_parser("convert", help="a package's weights with content_norm='rms', calibrated gains")
    converter.add_argument("--source", required=True)
    converter.add_argument("--output", type=Path, required=True)
    recalibrator = sub.add_parser("recalibrate", help="a package with its BatchNorm statistics re-estimated on whole studies")
    recalibrator.add_argument("--source", required=True)
    recalibrator.add_argument("--output", type=Path, required=True)
    recalibrator.add_argument("--studies", type=int, default=16, help="synthetic training-distribution studies (seeds 50,000,000+)")
    parser.add_argument("--packages", nargs="+", default=["bundled"], metavar="PKG", help="package folders, or bundled")
    parser.add_argument("--diagnose", nargs="*", default=[], metavar="PKG:STUDY:SLICE",
                        help="e.g. runs/cv-rms/foldA/pkg:sub-strokecase0003:36 (a package of --packages)")
    parser.add_argument("--montage-packages", nargs="*", metavar="PKG", help="rows of the montages (default: --packages)")
    parser.add_argument("--large-seeds", nargs="*", type=int, default=list(real_scan_cv.SYNTHETIC_LARGE_SEEDS))
    parser.add_argument("--output", type=Path, default=RESULTS / "dropped_slice.json")
    args = parser.parse_args()
    if args.command == "convert":
        convert(args.source, args.output)
        return
    if args.command == "recalibrate":
        recalibrate(args.source, args.output, range(CALIBRATION_SEEDS.start, CALIBRATION_SEEDS.start + args.studies))
        return
    torch.manual_seed(0)
    studies = load_studies(args.large_seeds)
    survey, diagnoses, probabilities = [], [], {}
    targets = [spec.rsplit(":", 2) for spec in args.diagnose]
    for spec in args.packages:
        package = real_scan_cv.fold_package(spec)
        for name, study, truth in studies:
            case = Case(name, study, truth, package)
            prob = probability(package.model.eval(), case.tensor())
            probabilities[(spec, name)] = (case, prob)
            row = {"package": spec, "model": f"{package.name} {package.version}",
                   "content_norm": package.manifest["architecture"]["config"].get("content_norm", "none"),
                   "study": name, **summary(prob, case.truth)}
            print(json.dumps(row), flush=True)
            survey.append(row)
            for target_package, target_study, target_slice in targets:
                if target_package == spec and target_study == name:
                    diagnoses.append(diagnose(spec, package, case, int(target_slice)))
    for _package, name, k in {(None, study, int(k)) for _p, study, k in targets}:
        shown = [(f"{spec.rstrip('/').split('/')[-2] if '/' in spec else spec}", probabilities[(spec, name)][1])
                 for spec in args.montage_packages or args.packages if (spec, name) in probabilities]
        if not shown:
            continue
        case = probabilities[(args.packages[0], name)][0]
        folder = REAL_MONTAGES if case.real else RESULTS
        montage(shown, case, k, folder / f"dropped_slice_{name}_{k}.png")
    args.output.write_text(json.dumps({"command": " ".join(sys.argv), "revision": source_revision(),
                                       "min_slice_voxels": MIN_SLICE_VOXELS, "dropped_below": DROPPED,
                                       "survey": survey, "diagnoses": diagnoses}, indent=1) + "\n")
    print(f"written {args.output}")


if __name__ == "__main__":
    main()
