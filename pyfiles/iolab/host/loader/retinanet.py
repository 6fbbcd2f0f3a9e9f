"""A compact RetinaNet of torchvision's shape (retinanet_resnet50_fpn), for calibration.

iolab's own module rather than torchvision's: torchvision has no CPU build beside the
lab's torch (its PyPI wheel does not import there), and calibration must run, and be
tested, on every host iolab trains on. The network is torchvision's: a ResNet-50
backbone (iolab.host.loader.resnet), a feature pyramid over C3–C5 with P6 and P7 from
P5 (256 channels), and two heads of four 3×3 convolutions and ReLUs — class logits
and box deltas for 9 anchors per place; at MLPerf Training's 800×800 input and 264
classes. The loss is the sigmoid focal loss (α 0.25, γ 2) over every anchor and a
smooth-L1 box loss over the foreground ones (torchvision's initialisation and
foreground prior; with the 53,120 batch-norm parameters torchvision freezes, the same
37.6 M parameters), against targets given per anchor: the
anchor matcher (ground-truth boxes against ~120,000 anchors, per image, in Python in
torchvision) is left out, so a calibrated step is the network's compute, a little
under torchvision's whole step (docs/DESIGN.md, "Calibration").
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional

from iolab.host.loader.resnet import ResNet50

ANCHORS = 9  # 3 scales × 3 aspect ratios per place
ALPHA, GAMMA = 0.25, 2.0
PRIOR = 0.01


def _head(channels: int, out: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for _ in range(4):
        layers += [nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers, nn.Conv2d(channels, out, 3, padding=1))


class RetinaNet(nn.Module):
    def __init__(self, classes: int = 264, width: int = 64, pyramid: int = 256):
        super().__init__()
        self.classes = classes
        self.backbone = ResNet50(width=width)
        del self.backbone.fc  # the classifier is not RetinaNet's
        self.lateral = nn.ModuleList(nn.Conv2d(c, pyramid, 1) for c in self.backbone.channels)
        self.smooth = nn.ModuleList(nn.Conv2d(pyramid, pyramid, 3, padding=1) for _ in self.backbone.channels)
        self.p6 = nn.Conv2d(pyramid, pyramid, 3, stride=2, padding=1)
        self.p7 = nn.Conv2d(pyramid, pyramid, 3, stride=2, padding=1)
        self.cls = _head(pyramid, ANCHORS * classes)
        self.box = _head(pyramid, ANCHORS * 4)
        convs = [conv for head in (self.cls, self.box) for conv in head if isinstance(conv, nn.Conv2d)]
        for conv in convs:  # torchvision's initialisation: N(0, 0.01), zero biases
            nn.init.normal_(conv.weight, std=0.01)
            nn.init.zeros_(conv.bias)  # type: ignore[arg-type]  # every head convolution has one
        # a foreground prior of 1 %, so that the background's focal loss starts small (torchvision's)
        logits = [conv for conv in self.cls if isinstance(conv, nn.Conv2d)][-1]
        nn.init.constant_(logits.bias, -math.log((1 - PRIOR) / PRIOR))  # type: ignore[arg-type]

    def pyramid(self, x: torch.Tensor) -> list[torch.Tensor]:
        c3, c4, c5 = self.backbone.features(x)
        p5 = self.lateral[2](c5)
        p4 = self.lateral[1](c4) + functional.interpolate(p5, size=c4.shape[-2:], mode="nearest")
        p3 = self.lateral[0](c3) + functional.interpolate(p4, size=c3.shape[-2:], mode="nearest")
        p3, p4, p5 = (smooth(p) for smooth, p in zip(self.smooth, (p3, p4, p5), strict=True))
        p6 = self.p6(p5)
        return [p3, p4, p5, p6, self.p7(functional.relu(p6))]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(class logits [B, anchors, classes], box deltas [B, anchors, 4]) over every level's anchors."""
        levels = self.pyramid(x)
        batch = x.shape[0]

        def flat(head: nn.Module, per: int) -> torch.Tensor:
            # [B, A·per, H, W] → [B, H·W·A, per], as torchvision lays its anchors out
            return torch.cat([head(p).permute(0, 2, 3, 1).reshape(batch, -1, per) for p in levels], dim=1)

        return flat(self.cls, self.classes), flat(self.box, 4)

    def anchors(self, side: int) -> int:
        """How many anchors an image of side × side pixels has over the five levels (strides 8 … 128)."""
        total, size = 0, side
        for stride in (2, 2, 2):  # the stem's convolution, its pooling, then C3 at stride 8
            size = (size + stride - 1) // stride
        for _ in range(5):
            total += size * size
            size = (size + 1) // 2
        return total * ANCHORS

    def synthetic_targets(self, batch: int, side: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Per anchor: its class (-1 background; one anchor in a hundred foreground) and its box deltas."""
        generator = torch.Generator().manual_seed(0)
        count = self.anchors(side)
        labels = torch.randint(0, self.classes, (batch, count), generator=generator)
        background = torch.rand(batch, count, generator=generator) >= 0.01
        labels[background] = -1
        boxes = torch.randn(batch, count, 4, generator=generator)
        return labels.to(device), boxes.to(device)

    def loss(self, out: tuple[torch.Tensor, torch.Tensor], target: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        logits, deltas = out
        labels, boxes = target
        foreground = labels >= 0
        count = foreground.sum().clamp(min=1)
        wanted = torch.zeros_like(logits)
        wanted[foreground, labels[foreground]] = 1.0
        logits = logits.float()
        p = torch.sigmoid(logits)
        ce = functional.binary_cross_entropy_with_logits(logits, wanted, reduction="none")
        p_t = p * wanted + (1 - p) * (1 - wanted)
        alpha = ALPHA * wanted + (1 - ALPHA) * (1 - wanted)
        focal = (alpha * ce * (1 - p_t) ** GAMMA).sum() / count
        box = functional.smooth_l1_loss(deltas[foreground].float(), boxes[foreground], beta=1 / 9, reduction="sum")
        return focal + box / count
