"""A training run's wall-clock seconds, carried through its checkpoints.

A long stage is often trained in several processes (``--resume`` from ``last.ckpt`` after an
interruption, or across the calls of a time-limited machine), and the model card's training
time must be the whole run's. Lightning saves a callback's ``state_dict`` in every checkpoint
and hands it back on resume, so the seconds of the resumed-from epochs carry over.
"""

from __future__ import annotations

import time
from typing import Any

import lightning as L


class TrainingClock(L.Callback):
    """Seconds of training so far: this process's plus those recorded in the checkpoint it resumed from.

    Time spent after the last checkpoint of an interrupted process is not counted: those
    epochs are trained again by the resumed run, which counts them then.
    """

    def __init__(self) -> None:
        self.earlier = 0.0
        self.started = time.monotonic()

    def seconds(self) -> float:
        return round(self.earlier + time.monotonic() - self.started, 1)

    def state_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.earlier = float(state_dict.get("seconds", 0.0))
        self.started = time.monotonic()
