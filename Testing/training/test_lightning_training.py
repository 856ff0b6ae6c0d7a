"""Real Lightning runs on tiny studies: the loss falls, checkpoints and packages reload exactly."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import pytest
import torch

from LambdaSegmentLib.inference import load_model_package, sha256_of_file
from LambdaSegmentLib.training import (
    ExportBestPackage,
    SegmentationDataModule,
    SegmentationModule,
    best_checkpoint,
    build_manifest,
    export_package,
    latest_checkpoint,
)

from lambdasegment_training_helpers import TINY_MODEL, TINY_PREPROCESSING


class LossHistory(L.Callback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_index) -> None:  # noqa: ANN001
        self.losses.append(float(outputs["loss"]))


@pytest.mark.needs_atlas
def test_training_loss_falls_and_the_exported_package_reloads_bit_exactly(labelled_folders: tuple[Path, Path], tmp_path: Path) -> None:
    train, val = labelled_folders
    L.seed_everything(0, verbose=False)
    datamodule = SegmentationDataModule(TINY_PREPROCESSING, data=[train], val_data=[val], size_hw=(32, 32), batch_size=1)
    module = SegmentationModule("lambda_unet", TINY_MODEL, loss="dice_bce", learning_rate=3e-3)
    history = LossHistory()
    checkpoint, latest = best_checkpoint(tmp_path / "ckpt"), latest_checkpoint(tmp_path / "ckpt")
    exporter = ExportBestPackage(
        tmp_path / "live-package",
        lambda current, state: build_manifest(current, TINY_PREPROCESSING, name="tiny", version="0.0.1", training_data={}, training=state),
    )
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_epochs=12, callbacks=[history, latest, checkpoint, exporter], logger=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, reload_dataloaders_every_n_epochs=1,
    )
    trainer.fit(module, datamodule=datamodule)

    first, last = history.losses[:3], history.losses[-3:]
    assert len(history.losses) >= 12
    assert sum(last) / 3 < 0.8 * sum(first) / 3, history.losses
    assert Path(checkpoint.best_model_path).is_file()

    # The live export holds the best epoch, and its best score travels in the checkpoints, so a
    # resumed run (``lambdasegment train --resume``) never replaces it with a worse model.
    assert exporter.best == float(checkpoint.best_model_score)
    assert json.loads((tmp_path / "live-package" / "manifest.json").read_text(encoding="utf-8"))["training"]["val_dice"] == exporter.best
    last = torch.load(tmp_path / "ckpt" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["global_step"] == trainer.global_step  # the latest epoch, best or not: --resume loses nothing
    resumed = ExportBestPackage(tmp_path / "live-package", exporter.manifest_factory)
    resumed.load_state_dict(last["callbacks"][exporter.state_key])
    assert resumed.best == exporter.best

    best = SegmentationModule.load_from_checkpoint(checkpoint.best_model_path, map_location="cpu", weights_only=True)
    manifest = build_manifest(best, TINY_PREPROCESSING, name="tiny", version="0.0.1", training_data=datamodule.description())
    package_dir = export_package(best, manifest, tmp_path / "package")
    package = load_model_package(package_dir)

    written = json.loads((package_dir / "manifest.json").read_text(encoding="utf-8"))
    assert written["weights_sha256"] == sha256_of_file(package_dir / written["weights_file"]) == package.sha256
    assert written["architecture"] == {"name": "lambda_unet", "config": TINY_MODEL}
    assert written["preprocessing"] == TINY_PREPROCESSING
    assert written["training_data"]["validation_cases"] == ["sub-val01_ses-0001"]
    saved = best.plain_state_dict()
    loaded = package.model.state_dict()
    assert list(saved) == list(loaded)
    assert all(torch.equal(saved[key], loaded[key]) for key in saved)
    x = torch.randn(1, 2, 5, 32, 32)
    with torch.no_grad():
        assert torch.equal(best.eval()(x), package.model(x))


def shifted_noise_batches() -> list[dict[str, torch.Tensor]]:
    """Seeds everything (call it before building the module), then 4 windows of noise far from
    the initial BatchNorm statistics (0, 1), each with a mask, for a real one-epoch fit."""
    L.seed_everything(0, verbose=False)
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(4, 2, 4, 32, 32, generator=generator) + 3.0
    return [{"image": image, "mask": (image[:1] > 3.5).float()} for image in images]


def fit_one_epoch(module: SegmentationModule, batches: list[dict[str, torch.Tensor]]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The model's state dict before and after a real Lightning epoch on ``batches`` (batch size 2)."""
    from torch.utils.data import DataLoader

    before = {name: tensor.clone() for name, tensor in module.model.state_dict().items()}
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(module, train_dataloaders=DataLoader(batches, batch_size=2))
    return before, module.model.state_dict()


@pytest.mark.parametrize("freeze", [False, True], ids=["paper", "frozen"])
def test_frozen_batchnorms_train_with_the_statistics_inference_uses(freeze: bool) -> None:
    """``freeze_batchnorm``: a real fit leaves every BatchNorm's running statistics as they
    were (training normalised with them, as inference does) while its scale and shift and
    the convolutions still learn; the paper's default updates them."""
    from torch import nn

    batches = shifted_noise_batches()
    module = SegmentationModule("lambda_unet", TINY_MODEL, loss="dice_bce", learning_rate=1e-2, freeze_batchnorm=freeze)
    norms = [m for m in module.model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert norms
    before, after = fit_one_epoch(module, batches)
    statistics = [name for name in before if name.endswith(("running_mean", "running_var"))]
    moved = [name for name in statistics if not torch.equal(before[name], after[name])]
    assert bool(moved) != freeze, moved
    assert any(not torch.equal(before[name], after[name]) for name in before if name.endswith(".weight"))
    module.train()
    assert all(norm.training != freeze for norm in norms)


def test_frozen_modules_keep_the_starting_weights_and_statistics_while_the_rest_trains() -> None:
    """``frozen_modules`` (``--freeze-modules inc downs``: LambdaUNet's encoder): a real fit leaves
    every tensor of the frozen submodules, BatchNorm statistics included, exactly as it was and
    keeps them out of the optimiser, while the decoder learns; an unknown name is refused."""
    batches = shifted_noise_batches()
    module = SegmentationModule("lambda_unet", TINY_MODEL, loss="dice_bce", learning_rate=1e-2, optimizer="adamw",
                                frozen_modules=("inc", "downs"))
    before, after = fit_one_epoch(module, batches)
    frozen = [name for name in before if name.startswith(("inc.", "downs."))]
    assert frozen and all(torch.equal(before[name], after[name]) for name in frozen)
    assert any(not torch.equal(before[name], after[name]) for name in before if name.startswith("ups."))
    trainable = {id(parameter) for parameter in module.trainable_parameters()}
    assert not any(id(parameter) in trainable for parameter in module.model.downs.parameters())
    module.train()
    assert not module.model.downs.training and module.model.ups.training
    with pytest.raises(ValueError, match=r"cannot freeze \['encoder'\]"):
        SegmentationModule("lambda_unet", TINY_MODEL, frozen_modules=("encoder",))
    with pytest.raises(ValueError, match=r"cannot freeze \['downs.9'\]"):
        SegmentationModule("lambda_unet", TINY_MODEL, frozen_modules=("downs.9",))


def test_a_dotted_path_freezes_one_encoder_level_and_leaves_the_deeper_ones_training() -> None:
    """``--freeze-modules inc downs.0``: only the stem and the first down level keep their
    tensors; the deeper down levels, inside the same top-level ModuleList, still learn."""
    module = SegmentationModule("lambda_unet", TINY_MODEL, loss="dice_bce", learning_rate=1e-2, optimizer="adamw",
                                frozen_modules=("inc", "downs.0"))
    before, after = fit_one_epoch(module, shifted_noise_batches())
    frozen = [name for name in before if name.startswith(("inc.", "downs.0."))]
    deeper = [name for name in before if name.startswith("downs.") and not name.startswith("downs.0.")]
    assert frozen and all(torch.equal(before[name], after[name]) for name in frozen)
    assert any(not torch.equal(before[name], after[name]) for name in deeper if name.endswith(".weight"))
    module.train()
    assert not module.model.downs[0].training and module.model.downs[1].training


def test_frozen_modules_may_update_their_statistics_while_their_weights_stay() -> None:
    """``frozen_statistics="update"``: the frozen encoder's weights stay bit-identical, but its
    BatchNorms are in train mode and re-estimate their running statistics on the fit's windows."""
    module = SegmentationModule("lambda_unet", TINY_MODEL, loss="dice_bce", learning_rate=1e-2, optimizer="adamw",
                                frozen_modules=("inc", "downs"), frozen_statistics="update")
    before, after = fit_one_epoch(module, shifted_noise_batches())
    frozen = [name for name in before if name.startswith(("inc.", "downs."))]
    statistics = [name for name in frozen if name.endswith(("running_mean", "running_var"))]
    weights = [name for name in frozen if name not in statistics and not name.endswith("num_batches_tracked")]
    assert weights and all(torch.equal(before[name], after[name]) for name in weights)
    assert statistics and all(not torch.equal(before[name], after[name]) for name in statistics)
    module.train()
    assert module.model.downs.training
    with pytest.raises(ValueError, match="frozen_statistics must be keep or update"):
        SegmentationModule("lambda_unet", TINY_MODEL, frozen_modules=("inc",), frozen_statistics="adapt")


def test_batchnorms_frozen_in_named_submodules_only() -> None:
    """``freeze_batchnorm=("inc", "downs.0")`` (``--freeze-batchnorm inc downs.0``): a real fit
    leaves the running statistics of the stem's and first down level's BatchNorms as they were
    while every other BatchNorm updates its own and every weight learns; an unknown name is refused."""
    batches = shifted_noise_batches()
    module = SegmentationModule("lambda_unet", TINY_MODEL, loss="dice_bce", learning_rate=1e-2, freeze_batchnorm=("inc", "downs.0"))
    before, after = fit_one_epoch(module, batches)
    statistics = [name for name in before if name.endswith(("running_mean", "running_var"))]
    frozen = [name for name in statistics if name.startswith(("inc.", "downs.0."))]
    assert frozen and all(torch.equal(before[name], after[name]) for name in frozen)
    assert all(not torch.equal(before[name], after[name]) for name in statistics if name not in frozen)
    assert any(not torch.equal(before[name], after[name]) for name in before if name.startswith("inc.") and name.endswith(".weight"))
    with pytest.raises(ValueError, match="cannot freeze the BatchNorms of \\['stem'\\]"):
        SegmentationModule("lambda_unet", TINY_MODEL, freeze_batchnorm=("stem",))
