"""Draws the extension icon (128 x 128 PNG): an axial brain outline with a red infarct and a lambda.

Run from the repository root: ``.venv/bin/python Resources/make_icon.py``; it writes
``Resources/LambdaSegment.png`` and the module's copy ``LambdaSegment/Resources/Icons/LambdaSegment.png``.
"""

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Ellipse

ROOT = Path(__file__).resolve().parents[1]


def draw(path: Path) -> None:
    figure = Figure(figsize=(1.28, 1.28), dpi=100)
    axes = figure.add_axes([0, 0, 1, 1])
    axes.set_xlim(-1, 1)
    axes.set_ylim(-1, 1)
    axes.set_aspect("equal")
    axes.axis("off")
    axes.add_patch(Ellipse((0, 0), 1.7, 1.95, facecolor="#3a3a3a", edgecolor="#d8d8d8", linewidth=3))
    axes.add_patch(Ellipse((0, 0), 1.45, 1.7, facecolor="#8c8c8c", edgecolor="none"))
    axes.plot([0, 0], [-0.85, 0.85], color="#3a3a3a", linewidth=2)  # interhemispheric fissure
    theta = np.linspace(0, 2 * np.pi, 60)
    radius = 0.28 + 0.05 * np.sin(5 * theta)
    axes.fill(0.35 + radius * np.cos(theta), 0.15 + 1.2 * radius * np.sin(theta), color="#d94040")  # infarct
    axes.text(-0.38, -0.2, "λ", fontsize=44, color="white", ha="center", va="center", weight="bold")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, transparent=True)


if __name__ == "__main__":
    for target in (ROOT / "Resources" / "LambdaSegment.png", ROOT / "LambdaSegment" / "Resources" / "Icons" / "LambdaSegment.png"):
        draw(target)
        print(target)
