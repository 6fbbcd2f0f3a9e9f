"""The samples of a generated data set as a torch Dataset, read the ways training scripts read them.

    pil           PIL.Image.open(path) → RGB                     PIL reads the file its own way
    cv2-imread    cv2.imread(path) → BGR → RGB                   OpenCV reads the file its own way
    cv2-imdecode  one read of the whole file → cv2.imdecode     the field report's fix for imread
    packed        one pread from the packed data file → imdecode no open, no stat per sample
    npz           numpy.load(file)['x'] → its first NPZ_SIDE²   unet3d's NPZ files, as DLIO 2.0.0's NPZ reader
    s3            one GET of the sample's object → imdecode    straight from an s3 backend's bucket (S3Objects)

Decoded samples are cropped to the centre square and resized to SIZE×SIZE (224, as
ResNet-50 trains) so that a batch stacks into one uint8 tensor [B, H, W, C]; its
NCHW view is channels-last, what the GPU training step wants. No torchvision: PIL
and OpenCV do the resize. With `decode=False` a sample is its raw bytes — pil and
cv2-imdecode then both read each file whole, packed preads it, cv2-imread is refused
(it cannot read without decoding) — and a batch is their concatenation plus their
lengths, so the bytes still travel from the loader's workers to the training loop.

How one sample is read and decoded is iolab.host.loader.decode's (one read of exactly its size); reader
s3 is iolab.host.loader.s3_objects'. A loader
worker builds each batch whole (`Samples.__getitems__`) in one of its slots of an
arena that the training process mapped before forking it (`Samples.prepare`, iolab.host.loader.arena):
each decoded image is written into its place, each bytes-only sample read straight into
its place, and the batch crosses to the training process as its slot's offset, its
labels and lengths as values; a slot is filled again only once the training process has
let go of the batch it held (see arena.Arena). On fast storage, fresh shared memory per batch
and a file descriptor passed per tensor cost more than the reads, and a good part of a decode.
`preprocess_time` sleeps that long per sample after reading (DLIO's reader.preprocess_time),
which gives the accelerator-emulation tests a loader of known speed.

A decoded npz sample is what DLIO 2.0.0 hands the training loop for unet3d: its NPZ reader
loads the file's `x` (`np.load(file)['x']`: the zip member read, CRC checked, one array) and
hands on record_length_bytes_resize (2 MiB) instead: a batch of 7 is 14.7 MB, not 1.1 GB. Here
the sample is x's first NPZ_SIDE² bytes, written into the arena slot; x is let go at once.

With `evict` a reader drops what it read from the page cache right after the read (drop_cached:
the file, or a packed sample's byte range), so each epoch reads storage again, as MLPerf's data
sets (5 × the host's memory) make it. tmpfs keeps its pages (its files live there).
"""

from __future__ import annotations

import heapq
import math
import mmap
import multiprocessing
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from iolab.host.dataset.manifest import Manifest
from iolab.host.loader.arena import SLOT_WAIT, Arena, Shipped, arena_tensor, shared_tensor, values
from iolab.host.loader.common import drop_file
from iolab.host.loader.decode import (
    NPZ_SIDE,
    SIZE,
    PackedSamples,
    decode_cv2_bytes,
    decode_cv2_file,
    decode_pil,
    load_npz,
    read_exact,
    read_into,
)
from iolab.host.loader.s3_objects import S3Objects

READERS = ("pil", "cv2-imread", "cv2-imdecode", "packed", "npz", "s3")
PACKED_DIR = "packed"


class Samples(Dataset):
    """Sample i of the data set at `root` as (uint8 tensor, label, bytes read)."""

    def __init__(
        self,
        root: str | Path,
        reader: str,
        decode: bool = True,
        size: int = SIZE,
        preprocess_time: float = 0.0,
        evict: bool = False,
    ):
        if reader not in READERS:
            raise ValueError(f"unknown reader {reader!r}: choose one of {', '.join(READERS)}")
        if reader == "cv2-imread" and not decode:
            raise ValueError("cv2-imread always decodes; use decode with it, or another reader for bytes only")
        self.root = Path(root)
        self.reader = reader
        self.decode = decode
        self.size = size
        self.preprocess_time = preprocess_time
        # Drop what was read from the page cache (see drop_cached); an s3 bucket's objects never were in it.
        self.evict = evict and reader != "s3"
        self.arena: Arena | None = None  # where workers build batches (see prepare)
        self._next = 0  # a worker's next slot of its ring in the arena: each worker's copy
        # Import the decoders here, in the parent: forked workers inherit them instead of each
        # importing them (thousands of syscalls) inside a traced or timed window.
        import cv2  # noqa: F401
        import PIL.Image  # noqa: F401

        # Samples read, one slot per loader worker (slot 0: the main process), in memory shared with
        # the workers the DataLoader forks later (256 workers at most, as campaigns allow).
        self.reads = multiprocessing.RawArray("q", 257)
        # Batches copied into fresh shared memory because the training loop held every slot of the worker's
        # ring (see _slot), counted the same way.
        self.copies = multiprocessing.RawArray("q", 257)
        manifest = Manifest.load(self.root)
        self.manifest_hash = manifest.hash
        self.total_bytes = manifest.total_bytes
        if reader == "packed":
            self.objects = None
            self.packed: PackedSamples | None = PackedSamples(self.root / PACKED_DIR)
            self.packed.evict = self.evict
            if len(self.packed) != manifest.files:
                raise ValueError(
                    f"{self.root / PACKED_DIR} holds {len(self.packed)} samples, the manifest "
                    f"{manifest.files}: pack the data set again"
                )
            self.paths: list[str] = []
            self.sizes: list[int] = []
            self.labels = [self.packed.label(i) for i in range(len(self.packed))]
        else:
            self.packed = None
            self.objects = S3Objects.from_env(manifest) if reader == "s3" else None
            self.paths = [str(self.root / e.path) for e in manifest.entries]
            self.sizes = [e.size for e in manifest.entries]
            self.labels = [e.label for e in manifest.entries]

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def samples_read(self) -> int:
        """Samples read so far by every process of the loader, prefetched ones included."""
        return sum(self.reads)

    @property
    def batches_copied(self) -> int:
        """Batches that went through fresh shared memory because the consumer held every slot (see _slot)."""
        return sum(self.copies)

    def prepare(self, workers: int, batch_size: int, prefetch_factor: int) -> None:
        """Before the DataLoader forks its `workers`: map the arena their batches are built in (see Arena).

        Without workers, or where the arena would take more than a quarter of the host's
        memory, there is none: a worker then builds its batches in fresh shared memory, which
        crosses to the training process as file descriptors (torch's way).
        """
        self.arena = None
        if workers < 1:
            return
        if self._shape:
            slot = batch_size * math.prod(self._shape)
        else:
            lengths = [self.packed.length(i) for i in range(len(self))] if self.packed is not None else self.sizes
            slot = sum(heapq.nlargest(batch_size, lengths))  # no batch of the data set holds more
        ring = prefetch_factor + 2  # slots per worker (see _slot)
        total = slot * ring * workers
        if total > os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4:
            return
        self.arena = Arena(mmap.mmap(-1, total), slot, workers, ring)

    @property
    def _shape(self) -> tuple[int, ...] | None:
        """A decoded sample's shape: a SIZE×SIZE×3 image, or unet3d's NPZ_SIDE² sample; None for bytes."""
        if not self.decode:
            return None
        return (NPZ_SIDE, NPZ_SIDE) if self.reader == "npz" else (self.size, self.size, 3)

    def _load(self, i: int) -> tuple[np.ndarray | bytes, int]:
        """Sample i, read (and decoded): (image, npz sample or bytes; bytes read)."""
        if self.packed is not None:
            data = self.packed.read(i)
            return (decode_cv2_bytes(data, self.size) if self.decode else data), len(data)
        if self.reader == "npz" and self.decode:
            return load_npz(self.paths[i], self.evict), self.sizes[i]
        if self.reader == "pil" and self.decode:
            return decode_pil(self.paths[i], self.size, self.evict), self.sizes[i]
        if self.reader == "cv2-imread":
            image = decode_cv2_file(self.paths[i], self.size)
            if self.evict:
                drop_file(self.paths[i])
            return image, self.sizes[i]
        data = self.objects.read(i) if self.objects else read_exact(self.paths[i], self.sizes[i], self.evict)
        return (decode_cv2_bytes(data, self.size) if self.decode else data), len(data)

    def _count(self, samples: int) -> None:
        worker = get_worker_info()
        self.reads[worker.id + 1 if worker else 0] += samples

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int]:
        out, nbytes = self._load(i)
        if self.preprocess_time:
            time.sleep(self.preprocess_time)
        self._count(1)
        if isinstance(out, bytes):
            with warnings.catch_warnings():  # a read-only view of the bytes read, never written to
                warnings.filterwarnings("ignore", message="The given buffer is not writable")
                tensor = torch.frombuffer(out, dtype=torch.uint8)
        else:
            tensor = torch.from_numpy(out.copy() if self.reader == "npz" else out)  # not a view keeping all of x
        return tensor, self.labels[i], nbytes

    def __getitems__(self, indices: list[int]) -> dict[str, Any] | list[tuple[torch.Tensor, int, int]]:
        """A batch (the DataLoader asks for one at a time when a dataset has this method).

        In a worker, the batch is built in this worker's next slot of the arena: each decoded
        image (npz sample) written into its place, each bytes-only sample read straight into its
        place (a byte copied once, by the read itself). It crosses to the training process as
        where it lies, its labels and lengths as values (see Arena). Decoded batches without a
        slot go one sample at a time through __getitem__ (collate stacks them); bytes-only
        batches without one are read into fresh shared memory (see _buffer).
        """
        n = len(indices)
        labels = [self.labels[i] for i in indices]
        if self._shape:
            shape = (n, *self._shape)
            offset = self._slot(math.prod(shape))
            if offset is None:
                return [self[i] for i in indices]
            images = np.frombuffer(self._memory, np.uint8, count=math.prod(shape), offset=offset).reshape(shape)
            total = 0
            for j, i in enumerate(indices):
                image, nbytes = self._load(i)
                images[j] = image
                del image  # an npz sample's view: its x goes before the next file is loaded
                total += nbytes
                if self.preprocess_time:
                    time.sleep(self.preprocess_time)
            self._count(n)
            return {"images": self._ship(offset, shape), "labels": values(labels), "bytes": total}
        lengths = [self.packed.length(i) if self.packed is not None else self.sizes[i] for i in indices]
        total = sum(lengths)
        offset = self._slot(total)
        data = None
        if offset is None:
            data = self._buffer(total)
            view = data.numpy().data
        else:
            view = memoryview(self._memory)[offset : offset + total]
        at = 0
        for i, length in zip(indices, lengths, strict=False):
            part = view[at : at + length]
            if self.packed is not None:
                self.packed.read_into(i, part)
            elif self.objects:
                self.objects.read_into(i, part)
            else:
                read_into(self.paths[i], part, self.evict)
            at += length
            if self.preprocess_time:
                time.sleep(self.preprocess_time)
        self._count(n)
        return {
            "data": data if offset is None else self._ship(offset, (total,)),
            "lengths": values(lengths),
            "labels": values(labels),
            "bytes": total,
        }

    def _slot(self, size: int) -> int | None:
        """In a worker with an arena, the offset of a free slot of its ring there; None if there is no arena,
        the slot is too small, or the training process holds every slot of the ring.

        A worker has at most prefetch_factor batches in flight (the DataLoader sends it a new
        index only after the training loop took one of its batches), so with ring =
        prefetch_factor + 2 slots a training loop that holds one batch at a time always
        leaves a slot free. One that holds more (a queue of batches on their way to the GPU)
        may hold them all: the worker waits for one up to SLOT_WAIT seconds, then builds the
        batch in fresh shared memory instead, and counts it (batches_copied).
        """
        worker = get_worker_info()
        arena = self.arena
        if worker is None or arena is None or worker.id >= arena.workers or size > arena.slot:
            return None
        deadline = time.monotonic() + SLOT_WAIT
        while True:
            for _ in range(arena.ring):
                index = worker.id * arena.ring + self._next
                self._next = (self._next + 1) % arena.ring
                if arena.take(index):
                    return index * arena.slot
            if time.monotonic() > deadline:
                self.copies[worker.id + 1] += 1
                return None
            time.sleep(0.001)

    @property
    def _memory(self) -> mmap.mmap:
        assert self.arena is not None
        return self.arena.memory

    def _ship(self, offset: int, shape: tuple[int, ...]) -> Shipped:
        """The uint8 tensor `shape` at `offset` in the arena, as the training process will rebuild it there."""
        assert self.arena is not None
        return Shipped(arena_tensor, (self.arena.key, offset, shape))

    def _buffer(self, size: int) -> torch.Tensor:
        """A buffer of `size` bytes for a bytes-only batch without an arena slot: fresh shared memory in a worker
        (as torch's default_collate makes it)."""
        shared = shared_tensor(size, torch.empty(0, dtype=torch.uint8))
        return shared if shared is not None else torch.empty(size, dtype=torch.uint8)


def collate(batch: list[tuple[torch.Tensor, int, int]]) -> dict[str, Any]:
    """Decoded images stack into [B, H, W, C] (npz samples into [B, NPZ_SIDE, NPZ_SIDE]); raw bytes are
    concatenated, with their lengths."""
    if isinstance(batch, dict):
        return batch  # made whole by Samples.__getitems__
    tensors = [t for t, _, _ in batch]
    labels = values([label for _, label, _ in batch])
    nbytes = sum(n for _, _, n in batch)
    if tensors[0].dim() > 1:
        out = shared_tensor(len(tensors) * tensors[0].numel(), tensors[0])
        if out is not None:
            out = out.resize_(len(tensors), *tensors[0].shape)
        return {"images": torch.stack(tensors, out=out), "labels": labels, "bytes": nbytes}
    lengths = [t.numel() for t in tensors]
    return {
        "data": torch.cat(tensors, out=shared_tensor(sum(lengths), tensors[0])),
        "lengths": values(lengths),
        "labels": labels,
        "bytes": nbytes,
    }


def worker_init(_: int) -> None:
    """One OpenCV thread per loader worker: the workers are the parallelism (as torch does for itself)."""
    try:
        import cv2

        cv2.setNumThreads(1)
    except ImportError:
        pass
