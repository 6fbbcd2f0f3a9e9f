"""The models iolab trains for real, and their one training step: ResNet-50, RetinaNet, 3D U-Net.

    trainer = Trainer("resnet50", torch.device("cuda", 0), scale="full", compile=True, ddp=True)
    x, y = trainer.synthetic(400)          # a batch made on the device: the synthetic ceiling
    trainer.train(x, y)                    # one optimizer step; returns the loss
    trainer.step(images, labels)           # ResNet-50 from the loader's uint8 NHWC images

Each model at two scales: `full`, the real model at its real input (ResNet-50 at
224×224, RetinaNet at 800×800 with 264 classes, the 3D U-Net on 128³ patches), and
`tiny` (every channel count divided by 8, a small input): what a CPU trains in CI,
where only the code path, not the figure, is wanted. The step is the reference
figures' recipe: mixed precision (autocast and a GradScaler on CUDA; bfloat16 autocast
and no scaler on the CPU), channels-last images, SGD with momentum; torch.compile when
asked; DistributedDataParallel when the rank is one of several (gradients all-reduced
in the backward pass: NCCL between GPUs, gloo on CPUs). On CUDA a step ends with a
synchronize, so its time is the GPU's, not the launch's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from iolab.host.loader.model_shapes import MODELS, SCALES, SHAPES
from iolab.host.loader.resnet import MEAN, STD, ResNet50
from iolab.host.loader.retinanet import RetinaNet
from iolab.host.loader.unet3d import UNet3D


def build(model: str, scale: str = "full", classes: int | None = None) -> nn.Module:
    """The model `model` at `scale` (ValueError naming the choices for an unknown one)."""
    if model not in SHAPES or scale not in SCALES:
        raise ValueError(f"unknown model {model!r} or scale {scale!r}: models {', '.join(MODELS)}; scales full, tiny")
    width = SHAPES[model][scale].width
    if model == "resnet50":
        return ResNet50(classes or 1000, width=width)
    if model == "retinanet":
        return RetinaNet(classes or 264, width=width, pyramid=256 if scale == "full" else 32)
    return UNet3D(width=width)


class Trainer:
    """One optimizer step of a model on one device (see the module): `train` on any batch, `synthetic` makes one."""

    def __init__(
        self,
        model: str,
        device: torch.device,
        scale: str = "full",
        *,
        compile: bool = False,
        ddp: bool = False,
        classes: int | None = None,
        lr: float = 0.1,
    ):
        self.name, self.scale, self.device = model, scale, device
        self.shape = SHAPES[model][scale] if model in SHAPES and scale in SCALES else None
        self.cuda = device.type == "cuda"
        self.images = model != "unet3d"  # 2D images: channels-last
        self.model: Any = build(model, scale, classes)  # its own methods (loss, synthetic_targets, fc) are used
        fmt = torch.channels_last if self.images else torch.contiguous_format
        # torch documents Module.to(..., memory_format=) and takes it; its overloads of Module.to leave it out
        self.model = self.model.to(device, memory_format=fmt)  # type: ignore[call-overload]
        self.model.train()
        net: Any = self.model
        if ddp:
            from torch.nn.parallel import DistributedDataParallel

            net = DistributedDataParallel(net, device_ids=[device.index] if self.cuda else None)
        self.net = torch.compile(net) if compile else net
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.cuda)
        self.dtype = torch.float16 if self.cuda else torch.bfloat16
        self.cross_entropy = nn.CrossEntropyLoss()
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def synthetic(self, batch: int, seed: int = 0) -> tuple[torch.Tensor, Any]:
        """A batch of `batch` random samples and their targets, made on the device once (the synthetic ceiling:
        no loader, no copy from the host)."""
        assert self.shape is not None
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(batch, *self.shape.sample, generator=generator)
        if self.images:
            x = x.contiguous(memory_format=torch.channels_last)
        y: Any
        if self.name == "resnet50":
            y = torch.randint(0, self.model.fc.out_features, (batch,), generator=generator).to(self.device)
        elif self.name == "retinanet":
            y = self.model.synthetic_targets(batch, self.shape.sample[-1], self.device)
        else:
            y = torch.randint(0, 3, (batch, *self.shape.sample[1:]), generator=generator).to(self.device)
        return x.to(self.device), y

    def loss(self, out: Any, y: Any) -> torch.Tensor:
        if self.name == "resnet50":
            return self.cross_entropy(out, y)
        return self.model.loss(out, y)

    def train(self, x: torch.Tensor, y: Any) -> torch.Tensor:
        """One step on a batch already prepared (on the device or not): forward under autocast, backward (DDP
        all-reduces the gradients), the optimizer's step. Returns the loss."""
        with torch.autocast(self.device.type, dtype=self.dtype):
            loss = self.loss(self.net(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.cuda:
            torch.cuda.synchronize(self.device)
        return loss.detach()

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """ResNet-50 on the loader's batch: uint8 [B, H, W, C] (its NCHW view is already channels-last), labels."""
        x = images.to(self.device, non_blocking=True).permute(0, 3, 1, 2).float()
        x = ((x - self.mean) / self.std).contiguous(memory_format=torch.channels_last)
        y = labels.to(self.device, non_blocking=True) % self.model.fc.out_features
        return self.train(x, y)

    def checksum(self) -> float:
        """The sum of every parameter: equal on every rank of a data-parallel job whose gradients were all-reduced."""
        with torch.no_grad():
            return float(sum(p.double().sum() for p in self.model.parameters()))
