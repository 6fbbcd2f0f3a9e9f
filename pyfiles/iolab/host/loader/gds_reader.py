"""reader npz through GPUDirect Storage: kvikio (cuFile) reads each sample's array straight into GPU memory.

unet3d's NPZ files are zip archives whose members are stored, not compressed (numpy's
savez): the array `x` lies whole at one offset of the file. Its place is read on the CPU
(the zip's local header and the .npy header: a few hundred bytes, `npz_member`); then one
cuFile read (kvikio.CuFile.pread) brings x's bytes from the file into a buffer on the
rank's GPU, and the sample handed on is its first NPZ_SIDE² bytes, as the npz reader hands
on (iolab.host.loader.decode.load_npz): the same batch, read without a bounce through host
memory — when cuFile really reads that way.

kvikio falls back to POSIX reads where cuFile cannot run (no libcufile, no nvidia-fs, a file
system GDS does not serve): its compatibility mode, silent but for its settings. `facts`
records them — kvikio's compat mode as requested and as it resolved, and whether the cuFile
driver says GDS is available — and `gpu_direct` is true only when kvikio ran cuFile (compat
mode off) and the driver had GDS; else the run says "POSIX reads through kvikio's
compatibility mode", never GDS.

kvikio is optional (pyproject.toml's extra gds: kvikio-cu12 or -cu13 to match the host's CUDA);
a run that asks for it where it is missing, or where there is no GPU, stops before it starts
in one line (`missing`, which the loader's launch check calls). The zip parsing and that
refusal are tested without a GPU; the GPU read has not run in iolab's tests.
"""

from __future__ import annotations

import struct
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MEMBER = "x.npy"
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # a zip local file header's fixed part (30 bytes)


def missing(cuda: bool | None = None) -> str | None:
    """Why reader npz cannot read through GPUDirect Storage here, in one line; None when it can."""
    try:
        import kvikio  # noqa: F401
    except ImportError as error:
        return (
            f"gds: true needs kvikio, which {sys.executable} cannot import ({error}); install it there "
            "(pip install kvikio-cu12, or kvikio-cu13, to match the host's CUDA: pyproject.toml's extra gds) "
            "or drop gds"
        )
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    if not cuda:
        return "gds: true reads into GPU memory: torch sees no CUDA GPU on this host; drop gds"
    return None


def npz_member(path: str | Path, member: str = MEMBER) -> tuple[int, int, tuple[int, ...], str]:
    """(offset of the array's first byte in the file, its bytes, its shape, its dtype) of a stored member of an
    NPZ file; ValueError when the member is compressed or absent."""
    import numpy as np

    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError(f"{path}: {member} is compressed; cuFile can read only a stored (savez) member")
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        fields = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
        name_len, extra_len = fields[9], fields[10]
        start = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len
        f.seek(start)
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
        offset = f.tell()
    nbytes = int(np.prod(shape)) * dtype.itemsize
    return offset, nbytes, tuple(shape), dtype.str


def facts(kvikio: Any) -> dict[str, Any]:
    """kvikio's version, its compat mode (as set, and whether it resolves to POSIX), whether cuFile's driver says
    GDS is available, and `gpu_direct`: whether reads really went GPU-direct (both must hold)."""

    def attempt(*calls: Any) -> Any:
        for call in calls:
            try:
                return call()
            except Exception:  # noqa: BLE001 - kvikio's spelling changed between releases: try the next
                continue
        return None

    defaults = kvikio.defaults
    mode = attempt(lambda: defaults.get("compat_mode"), lambda: defaults.compat_mode())
    posix = attempt(lambda: defaults.is_compat_mode_preferred(), lambda: bool(defaults.compat_mode()))
    gds = attempt(
        lambda: kvikio.cufile_driver.properties.is_gds_available,
        lambda: kvikio.DriverProperties().is_gds_available,
    )
    return {
        "kvikio": getattr(kvikio, "__version__", None),
        "compat_mode": None if mode is None else str(getattr(mode, "name", mode)),
        "posix_fallback": posix,
        "gds_available": gds,
        "gpu_direct": posix is False and gds is True,
    }


class GdsBatches:
    """Rank `shard` of `shards`: the unet3d data set's samples read into GPU `device` by kvikio, batch by batch."""

    def __init__(
        self, root: str | Path, *, batch_size: int, device: Any, shard: int, shards: int, seed: int, side: int
    ):
        import kvikio

        from iolab.host.dataset.manifest import Manifest

        self.kvikio = kvikio
        self.root = Path(root)
        manifest = Manifest.load(self.root)
        self.manifest_hash = manifest.hash
        self.total_bytes = manifest.total_bytes
        self.entries = manifest.entries[shard::shards]
        self.samples = len(manifest.entries)
        self.batch_size, self.device, self.seed = batch_size, device, seed
        self.side = side  # a sample is x's first side² bytes (decode.NPZ_SIDE: what the npz reader hands on)
        self.delivered = 0
        self.facts = {"reader": "npz through kvikio (cuFile)", **facts(kvikio)}

    def __len__(self) -> int:
        return self.samples

    @property
    def samples_read(self) -> int:
        return self.delivered

    def read(self, path: str) -> Any:
        """One sample's x, read by cuFile into GPU memory: its first side² bytes as [side, side]."""
        import torch

        offset, nbytes, _, _ = npz_member(path)
        buffer = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        with self.kvikio.CuFile(path, "r") as f:
            f.pread(buffer, nbytes, file_offset=offset).get()
        flat = buffer[: self.side * self.side]
        if flat.numel() < self.side * self.side:
            flat = torch.nn.functional.pad(flat, (0, self.side * self.side - flat.numel()))
        return flat.view(self.side, self.side)

    def epoch(self, epoch: int) -> Iterator[dict[str, Any]]:
        import random

        import torch

        order = list(range(len(self.entries)))
        random.Random(self.seed + epoch).shuffle(order)
        for start in range(0, len(order), self.batch_size):
            chosen = [self.entries[i] for i in order[start : start + self.batch_size]]
            images = torch.stack([self.read(str(self.root / e.path)) for e in chosen])
            self.delivered += len(chosen)
            labels = torch.tensor([e.label for e in chosen])
            yield {"images": images, "labels": labels, "bytes": sum(e.size for e in chosen)}
