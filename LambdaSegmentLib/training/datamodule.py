"""``SegmentationDataModule``: real labelled folders, synthetic studies on the fly, or a mix."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Mapping, Sequence

import lightning as L
from torch.utils.data import DataLoader, Dataset

from . import recipe
from .cases import find_labelled_cases
from .prepared import PreparedCase, load_labelled_case, prepare_synthetic
from .carved_lesions import CarvedLesion, carve_lesions
from .real_backgrounds import RealBackground, RealBackgroundWindows, load_background
from .window_augmentation import augment_window
from .windows import VALIDATION_SEED_OFFSET, Interleaved, RealWindows, SyntheticWindows, WholeStudies

DEFAULT_PREPROCESSING: dict[str, Any] = {
    "channels": ["eadc", "dwi"],  # the paper's order
    "in_plane_spacing_mm": 2.0,
    "normalization": {"dwi": "brain_median_clip4", "eadc": "clip01"},
    "pad_multiple": 16,
}


class SegmentationDataModule(L.LightningDataModule):
    """Training windows and whole validation studies, all through the inference preprocessing.

    Args:
        preprocessing: the model manifest's preprocessing block (channels, in-plane spacing,
            normalisation, pad multiple).
        data: labelled folders (BIDS / ISLES'22) or CSV listings for training.
        synthetic_studies: synthetic studies per epoch (fresh seeds every epoch); 0 = none.
            With ``data`` as well, the two are interleaved (a mix).
        windows_per_study: random windows cut from each synthetic study.
        val_data: labelled folders / CSVs validated on whole (never trained on).
        val_synthetic_studies: fixed synthetic validation studies (seeds offset by 10^7).
        synthesis_ranges: keyword ranges for ``LambdaSegmentLib.synthesis.generate``.
        seed: base seed of synthetic studies and of the real-window order.
        window_slices: slices per training window (the paper's 8).
        batch_size: windows per batch (the paper's 12).
        size_hw: in-plane size of training windows (crop or zero pad; divisible by 16).
        lesion_probability: chance that a synthetic window is centred on a lesion voxel.
        artefact_probability: share of synthetic windows given bright DWI artefacts with a
            normal ADC (``augmentation.add_bright_artefacts``); 0 = none (the paper had none).
        num_workers: DataLoader workers (synthesis runs in them).
        real_backgrounds: labelled folders / CSVs whose studies become injection backgrounds
            (``real_backgrounds.py``): synthetic infarcts written into their signals, heavy
            window augmentation; their expert lesions stay labelled.
        real_background_studies: augmented background studies per epoch (each cut into
            ``windows_per_study`` windows); 0 = none.
        carve_probability: share of synthetic studies given 1-3 of the real backgrounds'
            expert lesions, carved out and pasted in (CarveMix, ``carved_lesions.py``); needs
            ``real_backgrounds`` (the same cases are the sources); 0 = none.
        rim_window_probability: share of real-background windows cut around one of the
            background's own bright edge rims (``real_backgrounds.bright_rim_voxels``), seen
            as negatives; needs ``real_backgrounds``; 0 = none (the windows as before).
        injected_faint_probability: share of real-background studies whose injected infarcts
            take the faint lesion signal (``synthesis_ranges``' ``faint_*`` ranges,
            ``synthesis.generator.faint_signal_ranges``); needs ``real_backgrounds``; 0 = none
            (the studies as before).
        injected_whole_territory_probability: share of real-background studies that get one
            whole-territory infarct (100-300 mL) in place of their 0-3 injected infarcts;
            needs ``real_backgrounds``; 0 = none (the studies as before).
        injected_whole_territory_per_epoch: exactly that many of each epoch's real-background
            studies get one whole-territory infarct (a quota in place of the share above: no
            seed goes without); at most ``real_background_studies``; 0 = none.
        bright_field_probability: share of real-background windows brightened by one broad
            DWI gain field with the ADC unchanged (``augmentation.add_bright_field``), seen as
            not infarct; needs ``real_backgrounds``; 0 = none (the windows as before).
        bright_cortex_probability: share of real-background studies whose grey matter's S0 is
            raised by 10-60 % with the ADC unchanged (``real_backgrounds.brighten_grey_matter``);
            needs ``real_backgrounds``; 0 = none (the studies as before).
        elastic_probability: share of real-background windows bent by one smooth in-plane
            displacement field (``window_augmentation.elastic_warp``); needs
            ``real_backgrounds``; 0 = none (the windows as before).
        real_lesion_window_probability: share of real-background windows cut around one of the
            background's own expert lesions, each connected component as likely as any other
            (``RealBackgroundWindows``' ``real_lesion_probability``); needs ``real_backgrounds``;
            0 = none (the windows as before).
        real_lesion_dimming_probability: share of real-background studies whose own small expert
            lesions are dimmed towards their ring, no fainter than 1.3 x it on DWI
            (``real_backgrounds.dim_real_lesions``); needs ``real_backgrounds``; 0 = none (the
            studies as before).
    """

    def __init__(
        self,
        preprocessing: Mapping[str, Any] | None = None,
        *,
        data: Sequence[str | Path] = (),
        synthetic_studies: int = 0,
        windows_per_study: int = 4,
        val_data: Sequence[str | Path] = (),
        val_synthetic_studies: int = 0,
        synthesis_ranges: Mapping[str, Any] | None = None,
        seed: int = 0,
        window_slices: int = recipe.WINDOW_SLICES,
        batch_size: int = recipe.WINDOWS_PER_BATCH,
        size_hw: tuple[int, int] = (128, 128),
        lesion_probability: float = 0.7,
        artefact_probability: float = 0.0,
        num_workers: int = 0,
        real_backgrounds: Sequence[str | Path] = (),
        real_background_studies: int = 0,
        carve_probability: float = 0.0,
        rim_window_probability: float = 0.0,
        injected_faint_probability: float = 0.0,
        injected_whole_territory_probability: float = 0.0,
        injected_whole_territory_per_epoch: int = 0,
        bright_field_probability: float = 0.0,
        bright_cortex_probability: float = 0.0,
        elastic_probability: float = 0.0,
        real_lesion_window_probability: float = 0.0,
        real_lesion_dimming_probability: float = 0.0,
    ) -> None:
        super().__init__()
        for name, share, why in (("rim_window_probability", rim_window_probability, "the rims are those cases' own"),
                                 ("injected_faint_probability", injected_faint_probability, "the infarcts are injected into them"),
                                 ("injected_whole_territory_probability", injected_whole_territory_probability,
                                  "the infarcts are injected into them"),
                                 ("bright_field_probability", bright_field_probability, "the fields brighten those cases' windows"),
                                 ("bright_cortex_probability", bright_cortex_probability, "their grey matter is brightened"),
                                 ("elastic_probability", elastic_probability, "those cases' windows are bent"),
                                 ("real_lesion_window_probability", real_lesion_window_probability,
                                  "the lesions are those cases' own"),
                                 ("real_lesion_dimming_probability", real_lesion_dimming_probability,
                                  "the lesions dimmed are those cases' own")):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {share}")
            if share > 0 and not real_backgrounds:
                raise ValueError(f"{name} > 0 needs real_backgrounds: {why}")
        if injected_whole_territory_per_epoch and not real_backgrounds:
            raise ValueError("injected_whole_territory_per_epoch > 0 needs real_backgrounds: the infarcts are injected into them")
        if not 0 <= injected_whole_territory_per_epoch <= max(real_background_studies, 0):
            raise ValueError(f"injected_whole_territory_per_epoch must be in [0, real_background_studies = "
                             f"{real_background_studies}], got {injected_whole_territory_per_epoch}")
        if injected_whole_territory_per_epoch > 0 and injected_whole_territory_probability > 0:
            raise ValueError("give injected_whole_territory_probability or injected_whole_territory_per_epoch, not both")
        if not data and synthetic_studies <= 0 and real_background_studies <= 0:
            raise ValueError("no training data: give labelled folders (data), synthetic_studies > 0 and/or real backgrounds")
        if bool(real_backgrounds) != (real_background_studies > 0):
            raise ValueError("real backgrounds need both the folders and real_background_studies > 0")
        if not 0.0 <= carve_probability <= 1.0:
            raise ValueError(f"carve_probability must be in [0, 1], got {carve_probability}")
        if carve_probability > 0 and not real_backgrounds:
            raise ValueError("carve_probability > 0 needs real_backgrounds: their expert lesions are the ones carved")
        if carve_probability > 0 and synthetic_studies <= 0:
            raise ValueError("carve_probability > 0 needs synthetic_studies > 0: carved lesions are pasted into synthetic studies")
        if size_hw[0] % 16 or size_hw[1] % 16:
            raise ValueError(f"size_hw must be divisible by 16, got {size_hw}")
        self.preprocessing = dict(preprocessing or DEFAULT_PREPROCESSING)
        self.data = [Path(p) for p in data]
        self.synthetic_studies, self.windows_per_study = int(synthetic_studies), int(windows_per_study)
        self.val_data = [Path(p) for p in val_data]
        self.val_synthetic_studies = int(val_synthetic_studies)
        self.synthesis_ranges = dict(synthesis_ranges or {})
        self.seed, self.window_slices, self.batch_size = int(seed), int(window_slices), int(batch_size)
        self.size_hw = (int(size_hw[0]), int(size_hw[1]))
        self.lesion_probability, self.num_workers = float(lesion_probability), int(num_workers)
        self.artefact_probability = float(artefact_probability)
        self.real_background_paths = [Path(p) for p in real_backgrounds]
        self.real_background_studies = int(real_background_studies)
        self.carve_probability = float(carve_probability)
        self.rim_window_probability = float(rim_window_probability)
        self.injected_faint_probability = float(injected_faint_probability)
        self.injected_whole_territory_probability = float(injected_whole_territory_probability)
        self.injected_whole_territory_per_epoch = int(injected_whole_territory_per_epoch)
        self.bright_field_probability = float(bright_field_probability)
        self.bright_cortex_probability = float(bright_cortex_probability)
        self.elastic_probability = float(elastic_probability)
        self.real_lesion_window_probability = float(real_lesion_window_probability)
        self.real_lesion_dimming_probability = float(real_lesion_dimming_probability)
        self.backgrounds: list[RealBackground] = []
        self.carved: list[CarvedLesion] = []
        self.train_cases: list[PreparedCase] = []
        self.val_cases: list[PreparedCase] = []
        self.epochs_served = 0

    def setup(self, stage: str | None = None) -> None:
        """Read and prepare the real cases (training and validation) once."""
        if self.data and not self.train_cases:
            self.train_cases = [load_labelled_case(c, self.preprocessing) for root in self.data for c in find_labelled_cases(root)]
        if self.real_background_paths and not self.backgrounds:
            self.backgrounds = [load_background(c) for root in self.real_background_paths for c in find_labelled_cases(root)]
        if self.carve_probability > 0 and not self.carved:
            self.carved = [lesion for background in self.backgrounds for lesion in carve_lesions(background)]
        if not self.val_cases:
            self.val_cases = [load_labelled_case(c, self.preprocessing) for root in self.val_data for c in find_labelled_cases(root)]
            self.val_cases += [
                prepare_synthetic(self.seed + VALIDATION_SEED_OFFSET + i, self.preprocessing, self.synthesis_ranges)
                for i in range(self.val_synthetic_studies)
            ]
        overlap = ({c.name for c in self.train_cases} | {b.name for b in self.backgrounds}) & {c.name for c in self.val_cases}
        if overlap:
            raise ValueError(f"cases both in training and validation data: {sorted(overlap)}")

    def _epoch(self) -> int:
        trainer = getattr(self, "trainer", None)
        return int(trainer.current_epoch) if trainer is not None else 0

    def train_dataset(self, epoch: int = 0) -> Dataset:
        """The training windows of ``epoch`` (fresh synthetic studies every epoch)."""
        parts: list[Dataset] = []
        # what synthetic and real-background studies share: per-epoch seeds, windows, preprocessing
        studies = dict(preprocessing=self.preprocessing, windows_per_study=self.windows_per_study,
                       window_slices=self.window_slices, size_hw=self.size_hw, base_seed=self.seed, epoch=epoch,
                       lesion_probability=self.lesion_probability)
        if self.train_cases:
            parts.append(RealWindows(self.train_cases, window_slices=self.window_slices, size_hw=self.size_hw, seed=self.seed, epoch=epoch))
        if self.synthetic_studies:
            parts.append(
                SyntheticWindows(
                    self.synthetic_studies,
                    **studies,
                    ranges=self.synthesis_ranges,
                    artefact_probability=self.artefact_probability,
                    carved=self.carved,
                    carve_probability=self.carve_probability if self.carved else 0.0,
                )
            )
        if self.backgrounds:
            from LambdaSegmentLib.synthesis.generator import DEFAULT_RANGES, faint_signal_ranges  # training-time only, as the generator

            channels = list(SyntheticWindows.preprocessing_channels(self.preprocessing))
            parts.append(
                RealBackgroundWindows(
                    self.backgrounds,
                    studies=self.real_background_studies,
                    **studies,
                    augment=functools.partial(augment_window, dwi_channel=channels.index("dwi"), eadc_channel=channels.index("eadc")),
                    rim_probability=self.rim_window_probability,
                    dwi_channel=channels.index("dwi"),
                    faint_probability=self.injected_faint_probability,
                    faint_signal=faint_signal_ranges(self.synthesis_ranges) if self.injected_faint_probability > 0 else None,
                    whole_territory_probability=self.injected_whole_territory_probability,
                    whole_territory_per_epoch=self.injected_whole_territory_per_epoch,
                    bright_field_probability=self.bright_field_probability,
                    bright_cortex_probability=self.bright_cortex_probability,
                    elastic_probability=self.elastic_probability,
                    real_lesion_probability=self.real_lesion_window_probability,
                    dimming_probability=self.real_lesion_dimming_probability,
                    label_fraction=float(self.synthesis_ranges.get("label_fraction", DEFAULT_RANGES["label_fraction"])),  # as the generator labels
                    surface_pull=float(self.synthesis_ranges.get("lesion_surface_pull", DEFAULT_RANGES["lesion_surface_pull"])),  # as it draws
                )
            )
        merged = parts[0]
        for part in parts[1:]:
            merged = Interleaved(merged, part)
        return merged

    def train_dataloader(self) -> DataLoader:
        """Windows of the current epoch; reloaded every epoch (Trainer(reload_dataloaders_every_n_epochs=1))."""
        epoch = self._epoch()
        self.epochs_served = max(self.epochs_served, epoch + 1)
        return self.windows_loader(epoch)

    def windows_loader(self, epoch: int) -> DataLoader:
        """The batches of ``epoch``'s training windows, in training order (also for epochs
        training never served, e.g. ``--precise-batchnorm``'s fresh batches)."""
        # Unshuffled: RealWindows shuffles itself per epoch, and synthetic windows of one
        # study must stay consecutive for the per-worker study cache.
        return DataLoader(
            self.train_dataset(epoch),
            batch_size=self.batch_size,
            shuffle=False,
            num_workers=self.num_workers,
            persistent_workers=False,
            drop_last=False,
        )

    def val_dataloader(self) -> DataLoader | list:
        if not self.val_cases:
            return []
        return DataLoader(WholeStudies(self.val_cases), batch_size=1, shuffle=False, num_workers=0)

    def description(self) -> dict[str, Any]:
        """What the model was trained and validated on, for the model manifest."""
        from LambdaSegmentLib import __version__

        described: dict[str, Any] = {
            "real_training_cases": [c.name for c in self.train_cases],
            "validation_cases": [c.name for c in self.val_cases],
            "window_slices": self.window_slices,
            "windows_per_batch": self.batch_size,
            "window_size_hw": list(self.size_hw),
        }
        if self.backgrounds:
            described["real_backgrounds"] = {
                "cases": [b.name for b in self.backgrounds],
                "studies_per_epoch": self.real_background_studies,
                "method": "synthetic infarcts injected through S0 and ADC (training/real_backgrounds.py), "
                "0-3 per study, 25 % as 6 mm slabs, window augmentation (training/window_augmentation.py)",
            }
            if self.rim_window_probability > 0:
                described["real_backgrounds"]["rim_window_probability"] = self.rim_window_probability
            if self.injected_faint_probability > 0:
                described["real_backgrounds"]["injected_faint_probability"] = self.injected_faint_probability
            if self.injected_whole_territory_probability > 0:
                described["real_backgrounds"]["injected_whole_territory_probability"] = self.injected_whole_territory_probability
            if self.injected_whole_territory_per_epoch > 0:
                described["real_backgrounds"]["injected_whole_territory_per_epoch"] = self.injected_whole_territory_per_epoch
            if self.bright_field_probability > 0:
                described["real_backgrounds"]["bright_field_probability"] = self.bright_field_probability
            if self.bright_cortex_probability > 0:
                described["real_backgrounds"]["bright_cortex_probability"] = self.bright_cortex_probability
            if self.elastic_probability > 0:
                described["real_backgrounds"]["elastic_probability"] = self.elastic_probability
            if self.real_lesion_window_probability > 0:
                described["real_backgrounds"]["real_lesion_window_probability"] = self.real_lesion_window_probability
            if self.real_lesion_dimming_probability > 0:
                described["real_backgrounds"]["real_lesion_dimming_probability"] = self.real_lesion_dimming_probability
        if self.carved:
            described["carved_lesions"] = {
                "cases": sorted({lesion.source for lesion in self.carved}),
                "components": len(self.carved),
                "probability": self.carve_probability,
                "method": "CarveMix: expert-mask components carved with their ADC and S0 ratios to normal tissue "
                "and pasted, 1-3 per study, into that share of synthetic studies through S0 and ADC "
                "(training/carved_lesions.py): random mirror, rotation ±20°, scale 0.8-1.25, 1-4 mm ramp",
            }
        if self.synthetic_studies:
            epochs = max(1, self.epochs_served)
            described["synthetic"] = {
                "generator": "LambdaSegmentLib.synthesis.generate",
                "generator_version": __version__,
                "studies_per_epoch": self.synthetic_studies,
                "windows_per_study": self.windows_per_study,
                "seeds": [self.seed, self.seed + epochs * self.synthetic_studies - 1],
                "validation_seeds": (
                    [self.seed + VALIDATION_SEED_OFFSET, self.seed + VALIDATION_SEED_OFFSET + self.val_synthetic_studies - 1]
                    if self.val_synthetic_studies
                    else []
                ),
                "ranges": {k: list(v) if isinstance(v, tuple) else v for k, v in self.synthesis_ranges.items()},
                "lesion_window_probability": self.lesion_probability,
                "bright_artefact_augmentation_probability": self.artefact_probability,
            }
        return described
