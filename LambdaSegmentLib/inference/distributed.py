"""Batches spread over GPUs and nodes with Lightning's predict loop (DDP).

Lightning owns the processes, devices and the distributed sampler (in the predict loop
its ``UnrepeatedDistributedSamplerWrapper``: each case goes to exactly one rank, none is
repeated to even out the ranks, so no two ranks ever write the same case folder); a DataLoader with workers loads the next studies while one is
segmented. Every rank writes its own cases' folders; rank 0 writes the summary after all
ranks are done. Lightning is an optional dependency (the ``train`` extra), imported only here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from LambdaSegmentLib.errors import BadInputError

from .batch import Case, CaseStudies, keep_as_is, start_item
from .package import ModelPackage


def import_lightning() -> Any:
    try:
        import lightning
    except ImportError:
        raise BadInputError(
            "--devices", "needs PyTorch Lightning, which is not installed: pip install 'lambdasegment[train]'"
        ) from None
    return lightning


def predict_with_lightning(
    cases: list[Case],
    package: ModelPackage,
    output_dir: Path,
    *,
    devices: int,
    num_nodes: int,
    device: str,
    workers: int,
    memory_budget_gb: float | None,
    figure_format: str,
    overwrite: bool,
    precision: str = "auto",
    tta: bool | None = None,
) -> dict[str, dict[str, Any]] | None:
    """Segment ``cases`` through ``Trainer.predict``.

    Returns rank 0's summary rows by case on rank 0 after every rank has finished (the
    other ranks' cases are then read back from their folders and failure records by
    ``batch.summarise``), None on the other ranks.
    """
    lightning = import_lightning()
    from torch.utils.data import DataLoader

    class CaseSegmenter(lightning.LightningModule):
        """predict_step: one loaded case in, its summary row out (outputs written by this rank)."""

        def __init__(self) -> None:
            super().__init__()
            self.model = package.model

        def transfer_batch_to_device(self, item: dict[str, Any], device: Any, dataloader_idx: int) -> dict[str, Any]:
            return item  # a loaded Study on the CPU; segment_study moves the model's input itself

        def predict_step(self, item: dict[str, Any], batch_idx: int) -> dict[str, Any]:
            finish = start_item(item, package, output_dir, device=str(self.device), memory_budget_gb=memory_budget_gb,
                                figure_format=figure_format, overwrite=overwrite, precision=precision, tta=tta)
            return finish()  # no page helper here: the page is already drawn

    accelerator = "cpu" if device == "cpu" else "auto"
    trainer = lightning.Trainer(
        accelerator=accelerator,
        devices=devices,
        num_nodes=num_nodes,
        strategy="ddp" if devices * num_nodes > 1 else "auto",
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        inference_mode=True,
    )
    loader = DataLoader(CaseStudies(cases), batch_size=None, shuffle=False, num_workers=workers, collate_fn=keep_as_is)
    rows = trainer.predict(CaseSegmenter(), dataloaders=loader, return_predictions=True) or []
    trainer.strategy.barrier()
    if not trainer.is_global_zero:
        return None
    return {row["case"]: row for row in rows}
