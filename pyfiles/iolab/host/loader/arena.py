"""Where a loader worker builds its batches: an arena of memory shared with the rank's process (see Arena),
and the small objects a batch crosses to the training process as.
"""

from __future__ import annotations

import itertools
import math
import mmap
import multiprocessing
import weakref
from typing import Any

import numpy as np
import torch
from torch.utils.data import get_worker_info

# The arenas of this process, by key: a worker's batch names its arena by key, and the training
# process, which mapped it before forking the worker, finds the same memory under that key.
_ARENAS: weakref.WeakValueDictionary[int, Arena] = weakref.WeakValueDictionary()
_ARENA_KEYS = itertools.count()
SLOT_WAIT = 0.05  # seconds a worker waits for a slot the training process still holds (readers.Samples._slot)


class Arena:
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


class Shipped:
    """What a worker's batch holds in place of a tensor: pickled as `rebuild(*args)`, which makes the tensor in
    the process that unpickles it (the training process)."""

    __slots__ = ("args", "rebuild")

    def __init__(self, rebuild: Any, args: tuple[Any, ...]):
        self.rebuild, self.args = rebuild, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.rebuild, self.args


def arena_tensor(key: int, offset: int, shape: tuple[int, ...]) -> torch.Tensor:
    """A batch's uint8 tensor where a worker built it, in the arena `key` (the training process's side); its slot
    is let go when the array under it, which the tensor and every view of it keep alive, is collected."""
    arena = _ARENAS[key]
    array = np.frombuffer(arena.memory, np.uint8, count=math.prod(shape), offset=offset)
    weakref.finalize(array, arena.release, offset // arena.slot).atexit = False
    return torch.from_numpy(array).view(shape)


def values(values: list[int]) -> torch.Tensor | Shipped:
    """An int64 tensor of `values`; in a worker, shipped as the values (pickled inline, no shared memory)."""
    return Shipped(_tensor, (values,)) if get_worker_info() is not None else _tensor(values)


def _tensor(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def shared_tensor(numel: int, like: torch.Tensor) -> torch.Tensor | None:
    """In a loader worker, an output tensor in shared memory (as torch's default_collate makes it):
    the batch then crosses to the training process without another copy."""
    if get_worker_info() is None:
        return None
    storage = like._typed_storage()._new_shared(numel, device=like.device)
    return like.new(storage)
