"""A compact ResNet-50 (v1.5, as torchvision and NVIDIA's DeepLearningExamples build it).

No torchvision: the lab has no CPU build of it, and the model is forty lines. v1.5
puts the stride of a downsampling bottleneck on its 3×3 convolution; with 1000
classes it has 25,557,032 parameters, torchvision's count. `width` scales every
layer's channels (64: the real model; iolab.host.loader.models' tiny scale, 8, is
what a CPU trains in tests). Its training step is iolab.host.loader.models.Trainer's;
`features` gives RetinaNet (iolab.host.loader.retinanet) its C3–C5.
"""

from __future__ import annotations

import torch
from torch import nn

# ImageNet channel statistics, on the 0–255 scale of the loader's uint8 images.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        nn.init.zeros_(self.bn3.weight)  # each block starts as the identity (NVIDIA's recipe)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000, width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages, inplanes = [], width
        for scale, blocks, stride in ((1, 3, 1), (2, 4, 2), (4, 6, 2), (8, 3, 2)):
            stage = []
            for i in range(blocks):
                stage.append(Bottleneck(inplanes, width * scale, stride if i == 0 else 1))
                inplanes = width * scale * Bottleneck.expansion
            stages.append(nn.Sequential(*stage))
        self.layers = nn.Sequential(*stages)
        self.channels = [width * scale * Bottleneck.expansion for scale in (2, 4, 8)]  # C3, C4, C5
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """C3, C4, C5: the outputs of the last three stages (strides 8, 16, 32)."""
        out, x = [], self.stem(x)
        for index, stage in enumerate(self.layers):
            x = stage(x)
            if index >= 1:
                out.append(x)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
