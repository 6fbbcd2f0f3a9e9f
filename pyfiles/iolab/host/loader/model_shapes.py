"""The models iolab trains and their sizes, without torch (a launcher checks its flags before importing it).

`full` is the real model at its real input; `tiny` divides every width by 8 and shrinks the input: what a CPU
trains in CI (iolab.host.loader.models builds them).
"""

from __future__ import annotations

import dataclasses

SCALES = ("full", "tiny")


@dataclasses.dataclass(frozen=True)
class Shape:
    """A model at a scale: its channel width and the input of one sample (C, H, W) or (C, D, H, W)."""

    width: int
    sample: tuple[int, ...]


SHAPES: dict[str, dict[str, Shape]] = {
    "resnet50": {"full": Shape(64, (3, 224, 224)), "tiny": Shape(8, (3, 64, 64))},
    "retinanet": {"full": Shape(64, (3, 800, 800)), "tiny": Shape(8, (3, 128, 128))},
    "unet3d": {"full": Shape(32, (1, 128, 128, 128)), "tiny": Shape(4, (1, 64, 64, 64))},
}
MODELS = tuple(SHAPES)
