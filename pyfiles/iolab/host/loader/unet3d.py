"""A compact 3D U-Net of MLPerf's shape (MLPerf Training's image segmentation, KiTS19), for calibration.

As MLPerf's reference builds it: one input channel, five resolutions of 32, 64, 128,
256 and 320 channels below the input block and a bottleneck of 320, each block two
3×3×3 convolutions with instance norm and ReLU (the first strided by 2 going down), a
2×2×2 transposed convolution going up, the skip concatenated, three output classes;
128³ patches. The loss is cross-entropy plus one minus the soft Dice score, MLPerf's.
`width` scales every channel count (32: the real model).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

CLASSES = 3


def _block(inputs: int, outputs: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv3d(inputs, outputs, 3, stride=stride, padding=1, bias=False),
        nn.InstanceNorm3d(outputs, affine=True),
        nn.ReLU(inplace=True),
        nn.Conv3d(outputs, outputs, 3, padding=1, bias=False),
        nn.InstanceNorm3d(outputs, affine=True),
        nn.ReLU(inplace=True),
    )


class UNet3D(nn.Module):
    def __init__(self, width: int = 32, classes: int = CLASSES):
        super().__init__()
        filters = [width * m for m in (1, 2, 4, 8)] + [width * 10]  # 32, 64, 128, 256, 320
        self.input = _block(1, filters[0])
        self.down = nn.ModuleList(
            _block(a, b, stride=2) for a, b in zip(filters, [*filters[1:], filters[-1]], strict=True)
        )
        ups = list(reversed(filters))  # 320, 256, 128, 64, 32
        self.up = nn.ModuleList(
            nn.ConvTranspose3d(a, b, 2, stride=2) for a, b in zip([ups[0], *ups], ups, strict=False)
        )
        self.merge = nn.ModuleList(_block(2 * b, b) for b in ups)
        self.output = nn.Conv3d(filters[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = [self.input(x)]
        for down in self.down:
            skips.append(down(skips[-1]))
        x = skips.pop()
        for up, merge in zip(self.up, self.merge, strict=True):
            x = merge(torch.cat([up(x), skips.pop()], dim=1))
        return self.output(x)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        ce = functional.cross_entropy(logits, labels)
        probs = torch.softmax(logits, dim=1)
        wanted = functional.one_hot(labels, logits.shape[1]).movedim(-1, 1).float()
        dims = tuple(range(2, logits.dim()))
        dice = (2 * (probs * wanted).sum(dims) + 1e-6) / (probs.sum(dims) + wanted.sum(dims) + 1e-6)
        return ce + (1 - dice.mean())
