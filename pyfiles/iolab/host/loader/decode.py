"""How one sample is read and decoded: one read of exactly its size, a packed sample's pread, the decoders.

A file reader reads exactly the size the manifest records, in one read: open, read, close — no fstat, no
seek — so a reader's syscalls per sample are its own. Decoded images are cropped to the centre square and
resized to SIZE×SIZE (224, as ResNet-50 trains) by PIL or OpenCV (no torchvision). unet3d's NPZ sample is
what DLIO 2.0.0 hands the training loop (see load_npz). With `evict`, what was read is dropped from the
page cache right after the read (drop_cached), so each epoch reads the storage again.
"""

from __future__ import annotations

import math
import os

import numpy as np

from iolab.host.dataset.packed import PackedReader
from iolab.host.loader.common import drop_cached

SIZE = 224  # a decoded image's side, as ResNet-50 trains


# MLPerf Storage's unet3d sample as DLIO 2.0.0 hands it on: record_length_bytes_resize (2,097,152) as a square
# uint8 array of int(sqrt(it)) a side (DLIO's ConfigArguments.resized_image).
NPZ_SIDE = math.isqrt(2_097_152)


def read_exact(path: str, size: int, evict: bool = False) -> bytes:
    """The file's bytes with one open, one read (more only if the file system returns less), one close;
    with `evict`, dropped from the page cache after the read."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, size)
        if len(data) < size:
            parts = [data]
            got = len(data)
            while got < size:
                more = os.read(fd, size - got)
                if not more:
                    raise OSError(f"{path}: {got} bytes, the manifest says {size}")
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        if evict:
            drop_cached(fd)
        return data
    finally:
        os.close(fd)


def read_into(path: str, view: memoryview, evict: bool = False) -> None:
    """Read the file's len(view) bytes into `view`: one open, one read, one close, no allocation; with `evict`,
    dropped from the page cache after the read."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        got = os.readv(fd, [view])
        while got < len(view):
            more = os.readv(fd, [view[got:]])
            if not more:
                raise OSError(f"{path}: {got} bytes, the manifest says {len(view)}")
            got += more
        if evict:
            drop_cached(fd)
    finally:
        os.close(fd)


class PackedSamples(PackedReader):
    """A PackedReader that can also read a sample into a buffer it is given (one preadv), and with `evict` drops
    each sample's byte range from the page cache after reading it."""

    evict = False

    def length(self, i: int) -> int:
        return self._lengths[i]

    def read(self, i: int) -> bytes:
        data = super().read(i)
        self._dropped(i)
        return data

    def read_into(self, i: int, view: memoryview) -> None:
        got = os.preadv(self._fd, [view], self._offsets[i])
        if got != len(view):
            raise OSError(f"{self.directory / 'data.bin'}: short read of sample {i} ({got} of {len(view)} bytes)")
        self._dropped(i)

    def _dropped(self, i: int) -> None:
        if self.evict:
            drop_cached(self._fd, self._offsets[i], self._lengths[i])


def _square(width: int, height: int) -> tuple[int, int, int, int]:
    """The centred square box (left, top, right, bottom) of an image."""
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    return left, top, left + side, top + side


def _cv2_fit(image: np.ndarray | None, size: int) -> np.ndarray:
    import cv2

    if image is None:
        raise ValueError("OpenCV could not decode the image")
    left, top, right, bottom = _square(image.shape[1], image.shape[0])
    crop = image[top:bottom, left:right]
    return cv2.cvtColor(cv2.resize(crop, (size, size), interpolation=cv2.INTER_LINEAR), cv2.COLOR_BGR2RGB)


def decode_pil(path: str, size: int, evict: bool = False) -> np.ndarray:
    from PIL import Image

    with open(path, "rb") as f, Image.open(f) as image:  # the file object PIL would open itself
        rgb = image.convert("RGB")
        if evict:
            drop_cached(f.fileno())
    return np.array(rgb.resize((size, size), Image.Resampling.BILINEAR, box=_square(*rgb.size)))


def decode_cv2_file(path: str, size: int) -> np.ndarray:
    import cv2

    return _cv2_fit(cv2.imread(path, cv2.IMREAD_COLOR), size)


def decode_cv2_bytes(data: bytes, size: int) -> np.ndarray:
    import cv2

    return _cv2_fit(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), size)


def load_npz(path: str, evict: bool = False) -> np.ndarray:
    """unet3d's sample as DLIO 2.0.0's NPZ reader makes it: the file's x loaded as it loads it (np.load(file)['x'])
    and the sample handed on at record_length_bytes_resize: an NPZ_SIDE × NPZ_SIDE view of x's first bytes
    (zeros after a shorter x). The view keeps x alive: copy it where it goes and let it go."""
    with open(path, "rb") as f:
        x = np.load(f)["x"]
        if evict:
            drop_cached(f.fileno())
    flat = x.ravel(order="K").view(np.uint8)[: NPZ_SIDE * NPZ_SIDE]
    if flat.size < NPZ_SIDE * NPZ_SIDE:
        flat = np.concatenate([flat, np.zeros(NPZ_SIDE * NPZ_SIDE - flat.size, np.uint8)])
    return flat.reshape(NPZ_SIDE, NPZ_SIDE)
