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

A file reader reads exactly the size the manifest records, in one read: open, read,
close — no fstat, no seek — so a reader's syscalls per sample are its own. A loader
worker builds each batch whole (`Samples.__getitems__`) in one of its slots of an
arena that the training process mapped before forking it (`Samples.prepare`, `_Arena`):
each decoded image is written into its place, each bytes-only sample read straight into
its place, and the batch crosses to the training process as its slot's offset, its
labels and lengths as values; a slot is filled again only once the training process has
let go of the batch it held (see _Arena). On fast storage, fresh shared memory per batch
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

import hashlib
import heapq
import itertools
import math
import mmap
import multiprocessing
import os
import time
import warnings
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from iolab.host.dataset.manifest import Manifest
from iolab.host.dataset.packed import PackedReader
from iolab.host.loader.common import drop_cached, drop_file

READERS = ("pil", "cv2-imread", "cv2-imdecode", "packed", "npz", "s3")
SIZE = 224
PACKED_DIR = "packed"


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


class _Packed(PackedReader):
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
        self.arena: _Arena | None = None  # where workers build batches (see prepare)
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
            self.packed: _Packed | None = _Packed(self.root / PACKED_DIR)
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
        """Before the DataLoader forks its `workers`: map the arena their batches are built in (see _Arena).

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
        self.arena = _Arena(mmap.mmap(-1, total), slot, workers, ring)

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
        where it lies, its labels and lengths as values (see _Arena). Decoded batches without a
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
            return {"images": self._ship(offset, shape), "labels": _values(labels), "bytes": total}
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
            "lengths": _values(lengths),
            "labels": _values(labels),
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

    def _ship(self, offset: int, shape: tuple[int, ...]) -> _Shipped:
        """The uint8 tensor `shape` at `offset` in the arena, as the training process will rebuild it there."""
        assert self.arena is not None
        return _Shipped(_arena_tensor, (self.arena.key, offset, shape))

    def _buffer(self, size: int) -> torch.Tensor:
        """A buffer of `size` bytes for a bytes-only batch without an arena slot: fresh shared memory in a worker
        (as torch's default_collate makes it)."""
        shared = _shared(size, torch.empty(0, dtype=torch.uint8))
        return shared if shared is not None else torch.empty(size, dtype=torch.uint8)


# The arenas of this process, by key: a worker's batch names its arena by key, and the training
# process, which mapped it before forking the worker, finds the same memory under that key.
_ARENAS: weakref.WeakValueDictionary[int, _Arena] = weakref.WeakValueDictionary()
_ARENA_KEYS = itertools.count()
SLOT_WAIT = 0.05  # seconds a worker waits for a slot the training process still holds (see Samples._slot)


class _Arena:
    """Memory shared by a rank's process and its loader workers: one slot per batch in flight.

    An anonymous shared mapping made before the DataLoader forks its workers, so that each of
    them inherits it: worker w cycles through its `ring` slots of `slot` bytes, and a batch
    crosses to the training process as its slot's offset and its shape (a few dozen bytes
    pickled), where torch's way sends a new shared-memory file per tensor per batch: a file
    descriptor passed through a socket (a connection and a handshake with the worker's
    resource-sharer thread each time), mapped, later unmapped, and on the worker's side
    allocated and zeroed page by page. Labels and lengths cross as values.

    `held` (shared too) marks each slot from the moment a worker takes it until the training
    process has let go of the batch's tensor and of every view of it (a finalizer on the
    array under them, see _arena_tensor): a slot is never filled while its batch is in use.
    A slot is taken and let go by one process each (its worker, the training process), so
    a byte per slot needs no lock.
    """

    def __init__(self, memory: mmap.mmap, slot: int, workers: int, ring: int):
        self.memory, self.slot, self.workers, self.ring = memory, slot, workers, ring
        self.held = multiprocessing.RawArray("b", workers * ring)
        self.key = next(_ARENA_KEYS)
        _ARENAS[self.key] = self

    def take(self, index: int) -> bool:
        """Mark slot `index` taken (in its worker), unless its batch is still held."""
        if self.held[index]:
            return False
        self.held[index] = 1
        return True

    def release(self, index: int) -> None:
        self.held[index] = 0


class _Shipped:
    """What a worker's batch holds in place of a tensor: pickled as `rebuild(*args)`, which makes the tensor in
    the process that unpickles it (the training process)."""

    __slots__ = ("args", "rebuild")

    def __init__(self, rebuild: Any, args: tuple[Any, ...]):
        self.rebuild, self.args = rebuild, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.rebuild, self.args


def _arena_tensor(key: int, offset: int, shape: tuple[int, ...]) -> torch.Tensor:
    """A batch's uint8 tensor where a worker built it, in the arena `key` (the training process's side); its slot
    is let go when the array under it, which the tensor and every view of it keep alive, is collected."""
    arena = _ARENAS[key]
    array = np.frombuffer(arena.memory, np.uint8, count=math.prod(shape), offset=offset)
    weakref.finalize(array, arena.release, offset // arena.slot).atexit = False
    return torch.from_numpy(array).view(shape)


def _values(values: list[int]) -> torch.Tensor | _Shipped:
    """An int64 tensor of `values`; in a worker, shipped as the values (pickled inline, no shared memory)."""
    return _Shipped(_tensor, (values,)) if get_worker_info() is not None else _tensor(values)


def _tensor(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _shared(numel: int, like: torch.Tensor) -> torch.Tensor | None:
    """In a loader worker, an output tensor in shared memory (as torch's default_collate makes it):
    the batch then crosses to the training process without another copy."""
    if get_worker_info() is None:
        return None
    storage = like._typed_storage()._new_shared(numel, device=like.device)
    return like.new(storage)


# --- reader s3: each sample one object of the bucket -----------------------------------------------

S3_ENV = "IOLAB_S3"  # the s3 backend's connection (JSON: endpoint, bucket, prefix, region, credentials' source)
S3_DATASET = "dataset"  # the staged data set's keys: <prefix>/dataset/<manifest path>, and its manifest.jsonl


class S3Objects:
    """Sample i's bytes as one GET of its object, through s3torchconnector (AWS's S3 client for PyTorch).

    The manifest's own copy in the bucket must be the loader's (same hash) before any
    sample is read. The first read of each sample (the first epoch: every worker shares
    the flags) checks its bytes against the manifest's size and sha256.
    """

    def __init__(self, conn: dict[str, Any], manifest: Manifest):
        from s3torchconnector import S3ClientConfig, S3MapDataset

        from iolab.host import s3client

        os.environ.update({name.upper(): value for name, value in s3client.keys(conn["credentials"]).items()})
        self.base = s3client.key(conn, S3_DATASET)
        uris = [f"s3://{conn['bucket']}/{self.base}/{e.path}" for e in manifest.entries]
        self.dataset = S3MapDataset.from_objects(
            [f"s3://{conn['bucket']}/{self.base}/manifest.jsonl", *uris],
            region=conn["region"],
            endpoint=conn["endpoint"],
            s3client_config=S3ClientConfig(force_path_style=True),
        )
        self.entries = manifest.entries
        self.checked = multiprocessing.RawArray("b", len(manifest.entries))
        stored = hashlib.sha256(self.dataset[0].read()).hexdigest()
        if stored != manifest.hash:
            raise ValueError(
                f"s3://{conn['bucket']}/{self.base}/manifest.jsonl is another data set's ({stored[:12]}, "
                f"the loader's is {manifest.hash[:12]}): stage the campaign's data set again"
            )

    @classmethod
    def from_env(cls, manifest: Manifest) -> S3Objects:
        if not os.environ.get(S3_ENV):
            raise ValueError(f"reader s3 reads an s3 backend's bucket: ${S3_ENV} names none (run it on an s3 backend)")
        from iolab.host import s3client

        return cls(s3client.connection(os.environ[S3_ENV]), manifest)

    def read(self, i: int) -> bytes:
        data = self.dataset[i + 1].read()
        if not self.checked[i]:
            entry = self.entries[i]
            digest = hashlib.sha256(data).hexdigest()
            if len(data) != entry.size or digest != entry.sha256:
                raise ValueError(
                    f"{self.base}/{entry.path}: {len(data)} bytes, sha256 {digest[:16]}…, differ "
                    f"from the manifest's sample ({entry.size} bytes, {entry.sha256[:16]}…): the "
                    "bucket's copy is damaged; stage the data set again"
                )
            self.checked[i] = 1
        return data

    def read_into(self, i: int, view: memoryview) -> None:
        view[:] = self.read(i)


def collate(batch: list[tuple[torch.Tensor, int, int]]) -> dict[str, Any]:
    """Decoded images stack into [B, H, W, C] (npz samples into [B, NPZ_SIDE, NPZ_SIDE]); raw bytes are
    concatenated, with their lengths."""
    if isinstance(batch, dict):
        return batch  # made whole by Samples.__getitems__
    tensors = [t for t, _, _ in batch]
    labels = _values([label for _, label, _ in batch])
    nbytes = sum(n for _, _, n in batch)
    if tensors[0].dim() > 1:
        out = _shared(len(tensors) * tensors[0].numel(), tensors[0])
        if out is not None:
            out = out.resize_(len(tensors), *tensors[0].shape)
        return {"images": torch.stack(tensors, out=out), "labels": labels, "bytes": nbytes}
    lengths = [t.numel() for t in tensors]
    return {
        "data": torch.cat(tensors, out=_shared(sum(lengths), tensors[0])),
        "lengths": _values(lengths),
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
