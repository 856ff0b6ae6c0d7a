"""Knowledge distillation from teacher packages (``lambdasegment train --teacher PKG_DIR``).

Why: issue 13's second package (``lambdaunet-dwi-pair``) averages two networks and is the most
specific model on the real folds, but two networks cost about 1.6 times the default's time. A
single student network trained toward the pair's probabilities could keep that specificity
within the default's budget (Hinton et al. 2015, "Distilling the knowledge in a neural network").

The student's loss on each training window is

    (1 - w) · loss(logits, expert mask) + w · loss(logits, teacher probability)

with the run's own loss (BCE or BCE + soft Dice, both defined for a probability as target) and
``w`` the distillation weight. The teacher probability is what inference would average: the
mean of ``sigmoid(logits)`` over the teacher packages and, for a package with a partner network,
over its two networks (:mod:`LambdaSegmentLib.inference.engine`). Teachers run in eval mode
(their BatchNorms normalise with their running statistics, as at inference), without gradient,
and are no part of the student: not in its state dict, checkpoints or exported package. A seed
network of a teacher package is not used: it gates components after thresholding, it has no
probability to teach.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from LambdaSegmentLib.errors import BadInputError


@dataclass(frozen=True)
class Teachers:
    """The loaded teacher networks of a run.

    Attributes:
        networks: every network whose probability is averaged (a package's own and its partner).
        packages: per teacher package, what the manifest records: directory, name, version,
            SHA-256 of its weights and of its partner's.
    """

    networks: tuple[nn.Module, ...]
    packages: tuple[dict[str, Any], ...]

    @torch.no_grad()
    def probability(self, image: torch.Tensor) -> torch.Tensor:
        """image (b, c, t, h, w) → the teachers' mean lesion probability (b, 1, t, h, w), float32."""
        total = None
        for network in self.networks:
            network.to(image.device).eval()
            probability = network(image).float().sigmoid()
            total = probability if total is None else total + probability
        assert total is not None  # load_teachers never returns an empty set
        return total / len(self.networks)


def load_teachers(directories: Sequence[str | Path], preprocessing: Mapping[str, Any]) -> Teachers:
    """Load and verify the teacher packages (SHA-256, ``weights_only``) for a run with ``preprocessing``.

    Raises:
        BadInputError: naming the package, when it cannot be loaded or its preprocessing block
            (or its partner's) differs from the run's: the teacher must see the student's inputs.
    """
    from LambdaSegmentLib.inference import load_model_package

    if not directories:
        raise ValueError("load_teachers needs at least one package directory")
    networks: list[nn.Module] = []
    packages: list[dict[str, Any]] = []
    for directory in directories:
        package = load_model_package(directory)
        record: dict[str, Any] = {"directory": str(directory), "name": package.name, "version": package.version,
                                  "weights_sha256": package.sha256}
        for network in [package] + ([package.partner] if package.partner is not None else []):
            if dict(network.manifest["preprocessing"]) != dict(preprocessing):
                raise BadInputError(network.directory, "--teacher: the package's preprocessing differs from this run's "
                                    f"({network.manifest['preprocessing']} against {dict(preprocessing)}); a teacher must see the student's inputs")
            networks.append(network.model)
        if package.partner is not None:
            record["partner_weights_sha256"] = package.partner.sha256
        packages.append(record)
    return Teachers(networks=tuple(networks), packages=tuple(packages))
