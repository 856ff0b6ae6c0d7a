"""The paper's training recipe (Ou et al., MICCAI 2021, section 3), as defaults.

- windows of 8 consecutive slices, 12 windows per batch;
- RMSprop, momentum 0.9, weight decay 1e-8;
- learning rate 1e-4 for 20 epochs, then linear decay to 0 at epoch 100 (the paper's text;
  the authors' code hard-codes 1e-3 and a 200-epoch horizon, a bug we do not copy);
- BCE-with-logits loss; the best checkpoint chosen by validation Dice; threshold 0.5.
"""

from __future__ import annotations

WINDOW_SLICES = 8
WINDOWS_PER_BATCH = 12
LEARNING_RATE = 1e-4
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-8
CONSTANT_EPOCHS = 20
DECAY_END_EPOCH = 100
THRESHOLD = 0.5
MONITOR = "val_dice"


def paper_lr_factor(epoch: int, constant_epochs: int = CONSTANT_EPOCHS, decay_end_epoch: int = DECAY_END_EPOCH) -> float:
    """Multiplier of the base learning rate at ``epoch`` (0-based): 1 for the first
    ``constant_epochs`` epochs, then linear to 0 at ``decay_end_epoch`` and 0 after."""
    if decay_end_epoch <= constant_epochs:
        raise ValueError(f"decay_end_epoch ({decay_end_epoch}) must exceed constant_epochs ({constant_epochs})")
    if epoch < constant_epochs:
        return 1.0
    return max(0.0, (decay_end_epoch - epoch) / (decay_end_epoch - constant_epochs))
