"""Acceptance check of the synthetic generator: train a small model on synthetic studies
only, score it on the real ISLES'22 case, next to the ADC-threshold rule.

Three sub-commands (run niced; the CPU is shared):

    # 1. make a pool of prepared synthetic studies (model grid, 2 mm in-plane)
    nice -n 10 .venv/bin/python benchmarks/synthesis_model_check.py pool /tmp/synth-pool --first 0 --n 200
    # 2. train a small 2D UNet on random windows of the pool for a time budget
    nice -n 10 .venv/bin/python benchmarks/synthesis_model_check.py train /tmp/synth-pool /tmp/synth-unet.pt --minutes 10
    # 3. score it (and the rule) on the real case in ../shared; JSON to benchmarks/results/
    nice -n 10 .venv/bin/python benchmarks/synthesis_model_check.py score /tmp/synth-unet.pt

The real case is never used for training: it is the validation set.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from LambdaSegmentLib.io.foreground import brain_foreground  # noqa: E402
from LambdaSegmentLib.io.study import load_study  # noqa: E402
from LambdaSegmentLib.models import create_model  # noqa: E402
from LambdaSegmentLib.preprocessing import prepare_input  # noqa: E402
from LambdaSegmentLib.synthesis import generate  # noqa: E402
from LambdaSegmentLib.synthesis.dataset import crop_window, study_to_model_grid  # noqa: E402

PREPROCESSING = {
    "channels": ["eadc", "dwi"],
    "in_plane_spacing_mm": 2.0,
    "normalization": {"dwi": "brain_median", "eadc": "clip01"},
    "pad_multiple": 16,
}
CASE = REPO.parent / "shared" / "data" / "isles22" / "sub-strokecase0001"
WIDTHS = (16, 32, 64, 128, 256)
# the studies the bundled model trains on are at the model's in-plane spacing or finer
POOL_RANGES = {"in_plane_spacing_mm": (1.2, 2.0)}


def make_pool(args: argparse.Namespace) -> None:
    out = Path(args.pool)
    out.mkdir(parents=True, exist_ok=True)
    for seed in range(args.first, args.first + args.n):
        path = out / f"study-{seed:06d}.npz"
        if path.exists():
            continue
        start = time.perf_counter()
        study = generate(seed, **POOL_RANGES)
        channels, mask = study_to_model_grid(study, PREPROCESSING)
        tmp = out / f".tmp-{seed}.npz"
        np.savez_compressed(tmp, channels=channels.astype(np.float16), mask=mask.astype(np.uint8))
        tmp.rename(path)
        print(f"seed {seed}: {channels.shape} {study.params['lesion']['kind']} {study.params['lesion']['volume_ml']:.2f} mL "
              f"{time.perf_counter() - start:.1f} s", flush=True)


def dice_bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, target)
    prob = torch.sigmoid(logits)
    dice = 1 - (2 * (prob * target).sum() + 1) / (prob.sum() + target.sum() + 1)
    return bce + dice


def train(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = create_model("unet", widths=WIDTHS)
    if args.init:  # continue from an earlier run
        model.load_state_dict(torch.load(args.init, weights_only=True)["state_dict"])
    optimiser = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    pools = [Path(p) for p in args.pool.split(",")]
    cache: dict[Path, tuple[np.ndarray, np.ndarray]] = {}
    deadline = time.time() + 60 * args.minutes
    step, losses = 0, []
    while time.time() < deadline:
        files = sorted(f for pool in pools for f in pool.glob("study-*.npz"))
        batch_x, batch_y = [], []
        for _ in range(args.batch):
            path = files[rng.integers(len(files))]
            if path not in cache:
                data = np.load(path)
                cache[path] = (data["channels"].astype(np.float32), data["mask"].astype(np.float32))
            channels, mask = cache[path]
            x, y = crop_window(channels, mask, rng, args.window, (args.crop, args.crop))
            if rng.random() < 0.5:  # left-right flip
                x, y = x[..., ::-1].copy(), y[..., ::-1].copy()
            batch_x.append(x)
            batch_y.append(y[None])
        x = torch.from_numpy(np.stack(batch_x))
        y = torch.from_numpy(np.stack(batch_y))
        loss = dice_bce(model(x), y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
        step += 1
        if step % 25 == 0:
            print(f"step {step} loss {np.mean(losses[-25:]):.4f} pool {len(files)}", flush=True)
    torch.save({"state_dict": model.state_dict(), "widths": WIDTHS, "steps": step, "minutes": args.minutes}, args.checkpoint)
    print(f"saved {args.checkpoint} after {step} steps")


def lesion_f1(pred: np.ndarray, truth: np.ndarray) -> tuple[float, int, int, int]:
    """ISLES'22 lesion-wise F1: a true lesion is found if any predicted voxel overlaps it;
    a predicted component overlapping no true lesion is a false positive (26-connectivity)."""
    structure = np.ones((3, 3, 3), bool)
    truth_labels, n_truth = ndimage.label(truth, structure)
    pred_labels, n_pred = ndimage.label(pred, structure)
    tp = len(set(np.unique(truth_labels[pred & truth])) - {0})
    fp = n_pred - len(set(np.unique(pred_labels[pred & truth])) - {0})
    fn = n_truth - tp
    f1 = 2 * tp / (2 * tp + fp + fn) if (tp + fp + fn) else 1.0
    return f1, tp, fp, fn


def score_mask(pred: np.ndarray, truth: np.ndarray, voxel_ml: float) -> dict[str, float]:
    dice = 2 * (pred & truth).sum() / max(1, pred.sum() + truth.sum())
    f1, tp, fp, fn = lesion_f1(pred, truth)
    return {
        "volume_dice": round(float(dice), 4),
        "lesion_f1": round(float(f1), 4),
        "lesions_tp_fp_fn": [tp, fp, fn],
        "predicted_ml": round(float(pred.sum() * voxel_ml), 2),
        "true_ml": round(float(truth.sum() * voxel_ml), 2),
        "false_positive_ml": round(float((pred & ~truth).sum() * voxel_ml), 2),
    }


def real_case():
    prefix = CASE / "sub-strokecase0001_ses-0001_"
    study = load_study(dwi=prefix.with_name(prefix.name + "dwi.nii.gz"), adc=prefix.with_name(prefix.name + "adc.nii.gz"))
    from LambdaSegmentLib.io import read_volume

    truth = read_volume(prefix.with_name(prefix.name + "msk.nii.gz")).array > 0
    return study, truth


def adc_rule(study) -> np.ndarray:
    """ADC < 0.62e-3 mm^2/s and DWI > 1.2 x brain median (median over the DWI foreground)."""
    brain = brain_foreground(study.dwi)
    median = float(np.median(study.dwi.array[brain]))
    return (study.adc.array > 0) & (study.adc.array < 0.62) & (study.dwi.array > 1.2 * median)


def score(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    study, truth = real_case()
    voxel_ml = study.dwi.voxel_volume_mm3 / 1000
    results = {"case": CASE.name, "rule": score_mask(adc_rule(study), truth, voxel_ml)}
    for checkpoint in args.checkpoints:
        saved = torch.load(checkpoint, weights_only=True)
        model = create_model("unet", widths=tuple(saved["widths"]))
        model.load_state_dict(saved["state_dict"])
        model.eval()
        prepared = prepare_input(study, PREPROCESSING)
        with torch.inference_mode():
            prob = torch.sigmoid(model(torch.from_numpy(prepared.channels)[None]))[0, 0].numpy()
        prob_dwi = prepared.to_dwi_grid(prob).array
        for threshold in (0.5,):
            pred = prob_dwi >= threshold
            results[f"{Path(checkpoint).name}@{threshold}"] = {"steps": saved["steps"], **score_mask(pred, truth, voxel_ml)}
    print(json.dumps(results, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pool")
    p.add_argument("pool")
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--n", type=int, default=200)
    p.set_defaults(func=make_pool)
    t = sub.add_parser("train")
    t.add_argument("pool", help="pool folder(s), comma-separated")
    t.add_argument("checkpoint")
    t.add_argument("--minutes", type=float, default=10)
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--window", type=int, default=4)
    t.add_argument("--crop", type=int, default=96)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--init", default=None, help="checkpoint to continue from")
    t.set_defaults(func=train)
    s = sub.add_parser("score")
    s.add_argument("checkpoints", nargs="+")
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--out", default=None)
    s.set_defaults(func=score)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
