"""``lambdasegment train``: train a registry model with Lightning and export a model package.

Examples::

    lambdasegment train --model lambda_unet --synthetic 200 --val-data DIR --output PKG_DIR
    lambdasegment train --model lambda_unet --data ISLES22/ --synthetic 100 \\
        --devices 4 --num-nodes 2 --strategy ddp --precision bf16-mixed --output PKG_DIR

The Trainer owns devices, precision, distribution (DDP), checkpoints and logging. The
package (weights + manifest) is exported each time the validation Dice improves and at
the end (from the best checkpoint), so ``--output`` always holds the best model so far.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from LambdaSegmentLib.cli import json_object
from LambdaSegmentLib.errors import BadInputError

# training.losses.LOSSES' names, spelled out so that building the parser imports no torch (a test keeps them equal)
LOSS_NAMES = ("bce", "dice_bce", "tversky_bce", "blob_dice_bce")
SOFT_TARGET_LOSS_NAMES = ("bce", "dice_bce")  # training.losses.SOFT_TARGET_LOSSES, spelled out as LOSS_NAMES is


def register(subparsers: argparse._SubParsersAction) -> None:
    from LambdaSegmentLib.training import recipe

    parser = subparsers.add_parser(
        "train",
        help="train a model (Lightning) and export a model package",
        description="Train a registered model with the paper's recipe (defaults) on labelled folders, "
        "synthetic studies made on the fly, or both, and export it as a model package.",
    )
    model = parser.add_argument_group("model")
    model.add_argument("--model", default="lambda_unet", help="registered model name (see `lambdasegment models`)")
    model.add_argument("--model-config", type=json_object, default={}, metavar="JSON", help='model keyword arguments, e.g. \'{"widths": [16, 32, 64, 128, 256]}\'')
    model.add_argument("--preprocessing", type=json_object, default=None, metavar="JSON", help="manifest preprocessing block (default: [eADC, DWI], 2 mm in-plane)")
    model.add_argument("--loss", choices=LOSS_NAMES, default="bce",
                       help="bce (the paper's), dice_bce (+ soft Dice), tversky_bce (+ soft Tversky at alpha 0.3, beta 0.7: a missed voxel weighs more than a false one) or blob_dice_bce (+ a per-lesion term: every small lesion counts)")
    model.add_argument("--freeze-batchnorm", nargs="*", default=None, metavar="NAME",
                       help="train with BatchNorms in eval mode: every one, or with names (as --freeze-modules, e.g. inc downs.0) "
                            "those inside these submodules; their running statistics (e.g. of the --init-weights package) "
                            "normalise as at inference and are not updated; their scale and shift and every weight still learn")
    model.add_argument("--freeze-modules", nargs="+", default=[], metavar="NAME",
                       help="the model's submodules that do not train, top-level or dotted (e.g. LambdaUNet's encoder: inc downs; "
                            "its first two levels: inc downs.0): "
                            "no gradient, eval mode, so they keep the --init-weights package's weights and BatchNorm statistics")
    model.add_argument("--frozen-statistics", choices=("keep", "update"), default="keep",
                       help="the --freeze-modules BatchNorms' running statistics: keep (the --init-weights package's; default) "
                            "or update (re-estimated on this run's windows, the frozen weights unchanged)")
    model.add_argument("--precise-batchnorm", type=int, default=0, metavar="N",
                       help="after training, re-estimate the running statistics of every BatchNorm that trained as an equal-weight "
                            "average over N fresh batches of the training distribution (the epochs after the last; "
                            "training/precise_batchnorm.py); 0: keep the moving averages training left (default)")
    model.add_argument("--batchnorm-noise", type=float, default=0.0, metavar="SD",
                       help="while training, shift every training BatchNorm's statistics by fresh noise each pass (mean by "
                            "N(0, SD) standard deviations, standard deviation by a factor exp(N(0, SD))), so the network does not "
                            "hinge on the exact running statistics it ships with (training/batchnorm_noise.py); 0: none (default)")
    model.add_argument("--teacher", action="append", type=Path, default=[], metavar="PKG_DIR",
                       help="distillation: also learn this model package's lesion probability (with its partner network's, "
                            "averaged as inference does; repeatable: the mean over the packages); same preprocessing as the run "
                            "(training/distillation.py)")
    model.add_argument("--distill-weight", type=float, default=None, metavar="W",
                       help="with --teacher: the loss is (1 - W) x loss against the masks + W x loss against the teachers' "
                            "probability, W in (0, 1] (0.5)")
    model.add_argument("--init-weights", type=Path, default=None, metavar="PKG_DIR", help="start from this model package's weights instead of a random initialisation: the same architecture, "
                       "or the same with input channels appended to the package's (their stem weights start at zero)")
    model.add_argument("--activation-checkpointing", action="store_true", help="recompute block activations in backward (less memory)")

    data = parser.add_argument_group("data")
    data.add_argument("--data", action="append", default=[], metavar="DIR|CSV", help="labelled training folder (BIDS/ISLES'22) or CSV; repeatable")
    data.add_argument("--synthetic", type=int, default=0, metavar="N", help="synthetic studies per epoch, made on the fly (with --data: a mix)")
    data.add_argument("--windows-per-study", type=int, default=4, help="random windows cut from each synthetic study (4)")
    data.add_argument("--synthesis", type=json_object, default={}, metavar="JSON", help="ranges for the generator, e.g. '{\"in_plane_spacing_mm\": 2.0}'")
    data.add_argument("--real-backgrounds", action="append", default=[], metavar="DIR|CSV", help="labelled folder or CSV whose studies serve as backgrounds for injected synthetic infarcts (their lesions stay labelled); repeatable")
    data.add_argument("--real-background-studies", type=int, default=0, metavar="N", help="augmented real-background studies per epoch (0)")
    data.add_argument("--rim-windows", type=float, default=0.0, metavar="P", help="share of --real-backgrounds windows cut around one of the case's own bright edge rims (DWI >= 2x the brain median within 8 mm of the brain's edge, unlabelled), seen as negatives (0)")
    data.add_argument("--injected-faint", type=float, default=0.0, metavar="P", help="share of --real-backgrounds studies whose injected infarcts take the faint lesion signal (the --synthesis faint_* ranges: DWI 1.25-1.7x in the core), as real embolic dots often are (0)")
    data.add_argument("--injected-whole-territory", type=float, default=0.0, metavar="P", help="share of --real-backgrounds studies that get one whole-territory infarct (100-300 mL, one major artery's territories on one side) in place of their 0-3 injected infarcts (0)")
    data.add_argument("--injected-whole-territory-per-epoch", type=int, default=0, metavar="K", help="exactly K of each epoch's --real-background-studies get one whole-territory infarct (a quota in place of --injected-whole-territory's share: no seed goes without; 0)")
    data.add_argument("--bright-fields", type=float, default=0.0, metavar="P", help="share of --real-backgrounds windows brightened by one broad DWI gain field (up to 2x over 16-48 mm) with the ADC unchanged, as coil bias, bright cortex or T2 shine-through, seen as not infarct (training/augmentation.py; 0)")
    data.add_argument("--bright-cortex", type=float, default=0.0, metavar="P", help="share of --real-backgrounds studies whose grey matter's S0 is raised by 10-60 %% with the ADC unchanged (a bright cortical ribbon of normal diffusion), seen as not infarct (training/real_backgrounds.py; 0)")
    data.add_argument("--real-lesion-windows", type=float, default=0.0, metavar="P", help="share of --real-backgrounds windows cut around one of the case's own expert lesions, each lesion (connected component) as likely as any other whatever its size, so its small lesions are seen as positives more often (0)")
    data.add_argument("--real-lesion-dimming", type=float, default=0.0, metavar="P", help="share of --real-backgrounds studies whose own expert lesions of at most 0.5 mL are dimmed towards their ring (log DWI and ADC together, contrast x 0.4-0.9, never under 1.3x the ring on DWI), so they are also seen as faint as real emboli (0)")
    data.add_argument("--elastic", type=float, default=0.0, metavar="P", help="share of --real-backgrounds windows bent by one smooth in-plane displacement field (SD 1-4 mm, control points 32 mm apart, the same on every slice), so the case's rims and sulci take other shapes (training/window_augmentation.py; 0)")
    data.add_argument("--carve-probability", type=float, default=0.0, metavar="P", help="share of synthetic studies given 1-3 real lesions carved from the --real-backgrounds cases' expert masks and pasted in through S0 and ADC (CarveMix; 0)")
    data.add_argument("--val-data", action="append", default=[], metavar="DIR|CSV", help="labelled validation folder or CSV; repeatable")
    data.add_argument("--val-synthetic", type=int, default=0, metavar="N", help="fixed synthetic validation studies")
    data.add_argument("--window-slices", type=int, default=recipe.WINDOW_SLICES, help="slices per window (paper: 8)")
    data.add_argument("--batch-size", type=int, default=recipe.WINDOWS_PER_BATCH, help="windows per batch (paper: 12)")
    data.add_argument("--window-size", type=int, nargs=2, default=(128, 128), metavar=("H", "W"), help="in-plane window size (128 128)")
    data.add_argument("--lesion-probability", type=float, default=0.7, help="chance a synthetic window is centred on a lesion (0.7)")
    data.add_argument("--artefact-augmentation", type=float, default=0.0, metavar="P", help="share of synthetic windows given bright DWI artefacts with normal ADC (0)")
    data.add_argument("--workers", type=int, default=0, help="DataLoader workers (0)")
    data.add_argument("--seed", type=int, default=0, help="seed of synthetic studies, window order and initialisation (0)")

    optim = parser.add_argument_group("recipe")
    optim.add_argument("--optimizer", choices=("rmsprop", "adamw"), default="rmsprop", help="rmsprop (the paper's, momentum 0.9) or adamw")
    optim.add_argument("--weight-decay", type=float, default=recipe.WEIGHT_DECAY, help="weight decay (1e-8)")
    optim.add_argument("--lr", type=float, default=recipe.LEARNING_RATE, help="base learning rate (1e-4)")
    optim.add_argument("--constant-epochs", type=int, default=recipe.CONSTANT_EPOCHS, help="epochs at the base lr (20)")
    optim.add_argument("--decay-end-epoch", type=int, default=recipe.DECAY_END_EPOCH, help="epoch where the lr reaches 0 (100)")
    optim.add_argument("--threshold", type=float, default=recipe.THRESHOLD, help="probability threshold of the masks (0.5)")

    run_group = parser.add_argument_group("trainer")
    run_group.add_argument("--accelerator", default="auto", help="auto, cpu, gpu, mps (auto)")
    run_group.add_argument("--devices", default="auto", help="devices per node: N or auto")
    run_group.add_argument("--num-nodes", type=int, default=1)
    run_group.add_argument("--strategy", default="auto", help="auto, ddp, ddp_spawn, ... (Lightning strategies)")
    run_group.add_argument("--precision", default="32-true", help="32-true, 16-mixed, bf16-mixed (mixed precision on GPU)")
    run_group.add_argument("--max-epochs", type=int, default=recipe.DECAY_END_EPOCH)
    run_group.add_argument("--max-steps", type=int, default=-1)
    run_group.add_argument("--max-time", default=None, metavar="DD:HH:MM:SS", help="wall-clock budget; the best package so far stays exported")
    run_group.add_argument("--val-every-steps", type=int, default=None, help="validate every N training steps (default: every epoch)")
    run_group.add_argument("--log-every-steps", type=int, default=10)
    run_group.add_argument("--resume", type=Path, default=None, metavar="CKPT", help="resume from a Lightning checkpoint")

    out = parser.add_argument_group("output")
    out.add_argument("--output", type=Path, required=True, metavar="PKG_DIR", help="model package directory to write")
    out.add_argument("--work-dir", type=Path, default=None, help="checkpoints and logs (default: PKG_DIR.training)")
    out.add_argument("--name", default="lambdaunet-dwi", help="package name")
    out.add_argument("--version", default="0.1.0", help="package version")
    out.add_argument("--fp16", action="store_true", help="store the package weights in float16")
    out.add_argument("--overwrite", action="store_true", help="replace an existing package at PKG_DIR")
    parser.set_defaults(func=run)


def _devices(text: str) -> int | str:
    return text if text == "auto" else int(text)


def _frozen_batchnorms(names: list[str] | None) -> bool | tuple[str, ...]:
    """``--freeze-batchnorm``: absent, none frozen (the paper's); bare, every BatchNorm; with
    names, the BatchNorms inside those submodules."""
    if names is None:
        return False
    return tuple(names) if names else True


def _precise_batchnorm(module: Any, datamodule: Any, batches: int) -> dict[str, Any]:
    """Re-estimate ``module``'s training BatchNorms on ``batches`` batches of the windows of the
    epochs after every epoch training was served (the same distribution, never trained on);
    returns the manifest's record of it."""
    from LambdaSegmentLib.training.precise_batchnorm import reestimate_batchnorm

    first = max(1, datamodule.epochs_served)
    epochs: list[int] = []

    def images() -> Any:
        epoch = first
        while True:
            epochs.append(epoch)
            for batch in datamodule.windows_loader(epoch):
                yield batch["image"].to(module.device)
            epoch += 1

    started = time.monotonic()
    module.train()  # the train/eval state it trained in: frozen BatchNorms stay in eval mode
    count = reestimate_batchnorm(module, images(), batches)
    return {"batches": batches, "batch_norms": count, "epochs": [epochs[0], epochs[-1]],
            "seconds": round(time.monotonic() - started, 1),
            "how": "cumulative average over fresh training-distribution batches (training/precise_batchnorm.py)"}


def run(args: argparse.Namespace) -> int:
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    from LambdaSegmentLib.training import (
        DEFAULT_PREPROCESSING,
        ExportBestPackage,
        SegmentationDataModule,
        SegmentationModule,
        best_checkpoint,
        build_manifest,
        export_package,
        latest_checkpoint,
        recipe,
    )
    from LambdaSegmentLib.training.clock import TrainingClock
    from LambdaSegmentLib.training.distillation import load_teachers
    from LambdaSegmentLib.training.init_weights import initialise_from_package

    output: Path = args.output
    if output.exists() and any(output.iterdir()) and not args.overwrite and args.resume is None:
        raise BadInputError(output, "output package directory exists and is not empty; use --overwrite to replace it")
    if not args.data and args.synthetic <= 0 and args.real_background_studies <= 0:
        raise BadInputError(None, "no training data: give --data DIR, --synthetic N and/or --real-backgrounds DIR --real-background-studies N")
    if bool(args.real_backgrounds) != (args.real_background_studies > 0):
        raise BadInputError("--real-backgrounds", "give the folders and --real-background-studies N > 0 together")
    if not (math.isfinite(args.batchnorm_noise) and args.batchnorm_noise >= 0):
        raise BadInputError("--batchnorm-noise", f"must be a standard deviation >= 0, got {args.batchnorm_noise}")
    if args.precise_batchnorm < 0:
        raise BadInputError("--precise-batchnorm", f"must be a number of batches >= 0, got {args.precise_batchnorm}")
    if args.carve_probability > 0 and not args.real_backgrounds:
        raise BadInputError("--carve-probability", "needs --real-backgrounds DIR: the carved lesions are those cases' expert lesions")
    if args.carve_probability > 0 and args.synthetic <= 0:
        raise BadInputError("--carve-probability", "needs --synthetic N > 0: the carved lesions are pasted into synthetic studies")
    for flag, share, why in (("--rim-windows", args.rim_windows, "the rims are those cases' own"),
                             ("--bright-fields", args.bright_fields, "the fields brighten those cases' windows"),
                             ("--bright-cortex", args.bright_cortex, "their grey matter is brightened"),
                             ("--elastic", args.elastic, "those cases' windows are bent"),
                             ("--real-lesion-windows", args.real_lesion_windows, "the lesions are those cases' own"),
                             ("--real-lesion-dimming", args.real_lesion_dimming, "the lesions dimmed are those cases' own"),
                             ("--injected-faint", args.injected_faint, "the infarcts are injected into those cases"),
                             ("--injected-whole-territory", args.injected_whole_territory, "the infarcts are injected into those cases")):
        if share > 0 and not args.real_backgrounds:
            raise BadInputError(flag, f"needs --real-backgrounds DIR: {why}")
        if not 0.0 <= share <= 1.0:
            raise BadInputError(flag, f"must be in [0, 1], got {share}")
    if args.injected_whole_territory_per_epoch and not args.real_backgrounds:
        raise BadInputError("--injected-whole-territory-per-epoch", "needs --real-backgrounds DIR: the infarcts are injected into those cases")
    if not 0 <= args.injected_whole_territory_per_epoch <= max(args.real_background_studies, 0):
        raise BadInputError("--injected-whole-territory-per-epoch",
                            f"must be in [0, --real-background-studies = {args.real_background_studies}], got {args.injected_whole_territory_per_epoch}")
    if args.injected_whole_territory_per_epoch > 0 and args.injected_whole_territory > 0:
        raise BadInputError("--injected-whole-territory-per-epoch", "give it or --injected-whole-territory, not both")
    if not 0.0 <= args.carve_probability <= 1.0:
        raise BadInputError("--carve-probability", f"must be in [0, 1], got {args.carve_probability}")
    if args.distill_weight is not None and not args.teacher:
        raise BadInputError("--distill-weight", "needs --teacher PKG_DIR: the weight is that of the teachers' probability in the loss")
    if args.teacher and args.distill_weight is None:
        args.distill_weight = 0.5
    if args.teacher and not 0.0 < args.distill_weight <= 1.0:
        raise BadInputError("--distill-weight", f"must be in (0, 1] with --teacher, got {args.distill_weight}")
    if args.teacher and args.loss not in SOFT_TARGET_LOSS_NAMES:
        raise BadInputError("--teacher", f"distillation needs --loss {' or '.join(SOFT_TARGET_LOSS_NAMES)} (a loss defined for a probability as target), not {args.loss}")
    work_dir = args.work_dir or output.with_name(output.name + ".training")
    preprocessing = dict(args.preprocessing or DEFAULT_PREPROCESSING)
    teachers = load_teachers(args.teacher, preprocessing) if args.teacher else None

    L.seed_everything(args.seed, workers=True, verbose=False)
    datamodule = SegmentationDataModule(
        preprocessing,
        data=args.data,
        synthetic_studies=args.synthetic,
        windows_per_study=args.windows_per_study,
        val_data=args.val_data,
        val_synthetic_studies=args.val_synthetic,
        synthesis_ranges=args.synthesis,
        seed=args.seed,
        window_slices=args.window_slices,
        batch_size=args.batch_size,
        size_hw=tuple(args.window_size),
        lesion_probability=args.lesion_probability,
        artefact_probability=args.artefact_augmentation,
        num_workers=args.workers,
        real_backgrounds=args.real_backgrounds,
        real_background_studies=args.real_background_studies,
        carve_probability=args.carve_probability,
        rim_window_probability=args.rim_windows,
        injected_faint_probability=args.injected_faint,
        injected_whole_territory_probability=args.injected_whole_territory,
        injected_whole_territory_per_epoch=args.injected_whole_territory_per_epoch,
        bright_field_probability=args.bright_fields,
        bright_cortex_probability=args.bright_cortex,
        elastic_probability=args.elastic,
        real_lesion_window_probability=args.real_lesion_windows,
        real_lesion_dimming_probability=args.real_lesion_dimming,
    )
    try:
        module = SegmentationModule(
            args.model,
            args.model_config,
            loss=args.loss,
            learning_rate=args.lr,
            weight_decay=args.weight_decay,
            optimizer=args.optimizer,
            constant_epochs=args.constant_epochs,
            decay_end_epoch=args.decay_end_epoch,
            threshold=args.threshold,
            activation_checkpointing=args.activation_checkpointing,
            freeze_batchnorm=_frozen_batchnorms(args.freeze_batchnorm),
            frozen_modules=tuple(args.freeze_modules),
            frozen_statistics=args.frozen_statistics,
            batchnorm_noise=args.batchnorm_noise,
            teachers=teachers,
            distill_weight=args.distill_weight if teachers is not None else 0.0,
        )
    except ValueError as error:
        if str(error).startswith("cannot freeze the BatchNorms"):  # an unknown --freeze-batchnorm name; nothing written yet
            raise BadInputError("--freeze-batchnorm", str(error)) from None
        if str(error).startswith("cannot freeze"):  # an unknown --freeze-modules name; nothing written yet
            raise BadInputError("--freeze-modules", str(error)) from None
        raise
    if args.init_weights is not None:
        print(initialise_from_package(module.model, args.init_weights, args.model, args.model_config, preprocessing), file=sys.stderr, flush=True)
    clock = TrainingClock()

    def manifest(current: SegmentationModule, state: dict[str, Any]) -> dict[str, Any]:
        return build_manifest(
            current,
            preprocessing,
            name=args.name,
            version=args.version,
            training_data=datamodule.description(),
            training={
                "command": "lambdasegment " + " ".join(shlex.quote(part) for part in sys.argv[1:]),
                "devices": str(args.devices),
                "num_nodes": args.num_nodes,
                "strategy": args.strategy,
                "precision": args.precision,
                **state,
            },
        )

    has_validation = bool(args.val_data or args.val_synthetic)
    checkpoint = best_checkpoint(work_dir / "checkpoints")
    callbacks: list[L.Callback] = [clock, latest_checkpoint(work_dir / "checkpoints")]
    if has_validation:
        callbacks += [checkpoint, ExportBestPackage(output, manifest, fp16=args.fp16, clock=clock)]
    trainer = L.Trainer(
        accelerator=args.accelerator,
        devices=_devices(args.devices),
        num_nodes=args.num_nodes,
        strategy=args.strategy,
        precision=args.precision,
        max_epochs=args.max_epochs,
        max_steps=args.max_steps,
        max_time=args.max_time,
        val_check_interval=args.val_every_steps,
        check_val_every_n_epoch=None if args.val_every_steps else 1,
        log_every_n_steps=args.log_every_steps,
        reload_dataloaders_every_n_epochs=1,
        callbacks=callbacks,
        logger=CSVLogger(work_dir, name="logs"),
        default_root_dir=work_dir,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
    )
    trainer.fit(module, datamodule=datamodule, ckpt_path=args.resume)

    if trainer.is_global_zero:
        best_path = checkpoint.best_model_path if has_validation else ""
        state: dict[str, Any] = {"epochs": trainer.current_epoch, "global_step": trainer.global_step, "seconds": clock.seconds()}
        if best_path:
            best = SegmentationModule.load_from_checkpoint(best_path, map_location="cpu", weights_only=True)
            score = checkpoint.best_model_score
            state[recipe.MONITOR] = float(score) if score is not None else None
            state["checkpoint"] = Path(best_path).name
        else:
            best = module
        if args.batchnorm_noise > 0:
            state["batchnorm_noise"] = {"sd": args.batchnorm_noise, "how": "every training BatchNorm's mean shifted by N(0, sd) "
                                        "standard deviations and its standard deviation scaled by exp(N(0, sd)), per channel "
                                        "and pass, in training only (training/batchnorm_noise.py)"}
        if teachers is not None:
            state["distillation"] = {"weight": args.distill_weight, "teachers": list(teachers.packages),
                                     "how": "(1 - weight) x loss against the masks + weight x loss against the teachers' mean "
                                            "probability, teachers in eval mode (training/distillation.py)"}
        if args.precise_batchnorm > 0:
            state["precise_batchnorm"] = _precise_batchnorm(best, datamodule, args.precise_batchnorm)
            print(f"precise BatchNorm: {state['precise_batchnorm']['batch_norms']} BatchNorms re-estimated on "
                  f"{args.precise_batchnorm} batches", file=sys.stderr, flush=True)
        export_package(best, manifest(best, state), output, fp16=args.fp16)
        print(f"model package: {output}")
    return 0
