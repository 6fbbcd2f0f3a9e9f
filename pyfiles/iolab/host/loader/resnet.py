"""A compact ResNet-50 (v1.5, as torchvision and NVIDIA's DeepLearningExamples build it) and its training step.

No torchvision: the lab has no CPU build of it, and the model is forty lines. v1.5
puts the stride of a downsampling bottleneck on its 3×3 convolution; with 1000
classes it has 25,557,032 parameters, torchvision's count. The training step is
the one of the reference figures: mixed precision (autocast + GradScaler on CUDA;
bfloat16 autocast and no scaler on CPU, where tests run it), channels-last
tensors, SGD with momentum.

>>> trainer = Trainer(torch.device("cpu"), classes=10)                         # doctest: +SKIP
>>> trainer.step(torch.zeros(2, 64, 64, 3, dtype=torch.uint8), torch.tensor([1, 2]))   # doctest: +SKIP
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
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        layers, inplanes = [], 64
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
                inplanes = planes * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class Trainer:
    """One optimizer step per batch of uint8 NHWC images, as mixed-precision ResNet-50 training does."""

    def __init__(self, device: torch.device, classes: int = 1000, lr: float = 0.1):
        self.device = device
        self.cuda = device.type == "cuda"
        # torch documents Module.to(..., memory_format=) and takes it; its overloads of Module.to leave it out
        self.model = ResNet50(classes).to(device, memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.model.train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.cuda)
        self.loss = nn.CrossEntropyLoss()
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
        self.dtype = torch.float16 if self.cuda else torch.bfloat16

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """images: uint8 [B, H, W, C]; its NCHW view is already channels-last. Returns the loss."""
        x = images.to(self.device, non_blocking=True).permute(0, 3, 1, 2).float()
        x = ((x - self.mean) / self.std).contiguous(memory_format=torch.channels_last)
        y = labels.to(self.device, non_blocking=True) % self.model.fc.out_features
        with torch.autocast(self.device.type, dtype=self.dtype):
            loss = self.loss(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.cuda:
            torch.cuda.synchronize(self.device)  # the step's time is the GPU's, not the launch's
        return loss.detach()


def parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
