"""The KV-cache tiers of one rank: a waterfall LRU over GPU, CPU and storage, as kv-cache.py keeps them (host side).

An entry goes to the first tier with room — GPU, CPU (both memory here: iolab has no GPU tier of its
own, so a GPU tier is host memory too), then storage. A full memory tier demotes its least recently
used entries to the next one, keeping itself at TARGET_USAGE of its size; the storage tier deletes its
least recently used files, down to its budget. On storage an entry is one `.npy` file written whole
with np.save, flushed and fsynced (its device time: the fsync), and read with np.load after
posix_fadvise(DONTNEED) of the file (its device time: the load). iolab's one addition: no write takes
the target's file system past FILL_LIMIT of its size (statvfs, before each write; the rank's least
recently used files go first). A rank's settings and statistics are here too; its users and workers
are iolab.host.kvcache_sim's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from iolab.shared.kvcache_model import bytes_per_token, entry_bounds

TARGET_USAGE = 0.8  # a memory tier demotes down to this share of its size
LARGE_ENTRY = 0.95  # an entry over this share of a memory tier skips it
NEAR_EMPTY = 0.05  # a tier under this share of its size takes an entry without evicting
FILL_LIMIT = 0.9  # no write takes the target's file system past this share of its size
POOL = 256 << 20  # random bytes each entry is cut from (then stamped: no two 4 KiB blocks alike)
BLOCK = 4096
TIERS = ("gpu", "cpu", "storage")


@dataclasses.dataclass(frozen=True)
class Settings:
    layers: int
    kv_heads: int
    head_dim: int
    users: int
    duration: float
    seed: int
    allocs: int = 0  # concurrent allocations (0: unbounded)
    gpu_bytes: int = 0
    cpu_bytes: int = 0
    context_scale: float = 1.0
    generation: str = "none"
    model: str | None = None  # the preset the shape is (kv-cache.py's --model), None for a shape of its own

    @property
    def per_token(self) -> int:
        return bytes_per_token(self.layers, self.kv_heads, self.head_dim)


@dataclasses.dataclass
class Entry:
    tier: str
    size: int
    last: float
    count: int = 1


@dataclasses.dataclass(frozen=True)
class Timing:
    total: float
    device: float  # storage: the fsync of a write, the np.load of a read
    host: float


class Stats:
    """What a rank counts: bytes per tier, latencies (s), requests, tokens, errors."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bytes = {(tier, op): 0 for tier in TIERS for op in ("read", "write")}
        self.latency: dict[str, list[float]] = {
            f"{tier}_{op}": [] for tier in TIERS for op in ("read", "write", "read_device", "write_device")
        }
        self.counts = dict.fromkeys(
            ("hits", "misses", "requests", "tokens", "errors", "demoted", "evicted", "storage_tokens"), 0
        )
        self.io_time = 0.0  # the requests' storage I/O time, summed (the reference's storage throughput's divisor)
        self.fill_peak = 0.0  # the target's file system's most share in use after a storage write

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, value in counts.items():
                self.counts[name] += value


class Tiers:
    """The waterfall LRU over the memory tiers and the storage directory, with the rank's statistics."""

    def __init__(self, settings: Settings, directory: Path, storage_limit: float, stats: Stats) -> None:
        self.settings, self.dir, self.stats = settings, directory, stats
        self.limits = {"gpu": settings.gpu_bytes, "cpu": settings.cpu_bytes, "storage": storage_limit}
        self.order = [t for t in TIERS if t == "storage" or self.limits[t] > 0]
        self.usage = dict.fromkeys(TIERS, 0)
        self.entries: dict[str, Entry] = {}
        self.memory: dict[str, np.ndarray] = {}
        self.lock = threading.Lock()
        self.locks: dict[str, threading.Lock] = {}
        self.allocs = threading.BoundedSemaphore(settings.allocs) if settings.allocs else None
        self.pool = self._pool()

    def _pool(self) -> np.ndarray:
        _, most = entry_bounds(self.settings.per_token, self.settings.context_scale)
        size = min(POOL, most + BLOCK)
        return np.frombuffer(np.random.default_rng(self.settings.seed).bytes(size), dtype=np.uint8)

    def _entry_lock(self, key: str) -> threading.Lock:
        with self.lock:
            return self.locks.setdefault(key, threading.Lock())

    # --- what an entry holds -------------------------------------------------------------------------

    def make(self, key: str, tokens: int) -> np.ndarray:
        """A KV entry of `tokens` tokens: (layers, K and V, tokens, KV heads, head dimension) fp16, cut from the
        pool at a place its key decides, XORed with a 4 KiB stamp of its key and each 4 KiB block's index:
        no block of it equals another, of it or of any other entry (no deduplication, no compression)."""
        s = self.settings
        shape = (s.layers, 2, tokens, s.kv_heads, s.head_dim)
        size = int(np.prod(shape)) * 2
        seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") ^ (s.seed & (2**64 - 1))
        out = np.empty(size, dtype=np.uint8)
        place, done = seed, 0
        while done < size:  # pieces of the pool, each from a place of its own
            piece = min(size - done, len(self.pool))
            start = place % (len(self.pool) - piece + 1)
            out[done : done + piece] = self.pool[start : start + piece]
            done, place = done + piece, (place * 6364136223846793005 + 1442695040888963407) % 2**64
        stamp = np.random.default_rng(seed).integers(0, 256, BLOCK, dtype=np.uint8)
        whole = size // BLOCK * BLOCK
        blocks = out[:whole].reshape(-1, BLOCK)
        blocks ^= stamp
        blocks[:, :8] ^= np.arange(len(blocks), dtype=np.uint64).view(np.uint8).reshape(-1, 8)
        out[whole:] ^= stamp[: size - whole]
        return out.view(np.float16).reshape(shape)

    # --- storage ---------------------------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        return self.dir / f"{key}.npy"

    def _filled(self, size: int = 0) -> float:
        """The share of the target's file system in use, `size` more bytes written (statvfs, as df counts)."""
        fs = os.statvfs(self.dir)
        total = fs.f_blocks * fs.f_frsize
        return (total - fs.f_bavail * fs.f_frsize + size) / total

    def _fits(self, size: int) -> bool:
        """Whether the target's file system takes `size` more bytes without passing FILL_LIMIT of its size."""
        return self._filled(size) <= FILL_LIMIT

    def _save(self, key: str, data: np.ndarray) -> Timing:
        start = time.perf_counter()
        with open(self._path(key), "wb") as handle:
            np.save(handle, data, allow_pickle=False)
            saved = time.perf_counter()
            handle.flush()
            os.fsync(handle.fileno())
            synced = time.perf_counter()
        return Timing(synced - start, synced - saved, saved - start)

    def _load(self, key: str) -> Timing:
        start = time.perf_counter()
        fd = os.open(self._path(key), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        before = time.perf_counter()
        data = np.load(self._path(key), allow_pickle=False)
        loaded = time.perf_counter()
        np.array(data)  # the reference's copy of what it loaded
        done = time.perf_counter()
        return Timing(done - start, loaded - before, before - start + done - loaded)

    def _put(self, tier: str, key: str, data: np.ndarray) -> Timing:
        if tier == "storage":
            return self._save(key, data)
        start = time.perf_counter()
        self.memory[key] = np.copy(data)
        took = time.perf_counter() - start
        return Timing(took, took, took)

    def _get(self, tier: str, key: str) -> tuple[np.ndarray | None, Timing]:
        if tier == "storage":
            return None, self._load(key)
        start = time.perf_counter()
        data = np.copy(self.memory[key])
        took = time.perf_counter() - start
        return data, Timing(took, took, took)

    def _drop(self, tier: str, key: str) -> None:
        if tier == "storage":
            self._path(key).unlink(missing_ok=True)
        else:
            self.memory.pop(key, None)

    # --- the waterfall ---------------------------------------------------------------------------------

    def _lru(self, tier: str) -> list[tuple[str, int]]:
        with self.lock:
            found = [(e.last, e.count, k, e.size) for k, e in self.entries.items() if e.tier == tier]
        return [(key, size) for _, _, key, size in sorted(found)]

    def _victims(self, tier: str) -> Iterator[tuple[str, int]]:
        """The tier's entries, least recently used first: a snapshot, then one more once it is spent."""
        yield from self._lru(tier)
        yield from self._lru(tier)

    def _take(self, tier: str, size: int, target: float) -> bool:
        with self.lock:
            used = self.usage[tier]
            if used + size <= target or used < self.limits[tier] * NEAR_EMPTY:
                self.usage[tier] += size
                return True
        return False

    def _delete(self, key: str) -> None:
        """Evict a storage entry: its file goes."""
        with self._entry_lock(key):
            with self.lock:
                entry = self.entries.get(key)
                if entry is None or entry.tier != "storage":
                    return
                del self.entries[key]
            self._drop("storage", key)
            with self.lock:
                self.usage["storage"] -= entry.size
        self.stats.add(evicted=1)

    def _demote(self, key: str, tier: str, below: str) -> None:
        """Move a memory tier's entry to the tier below (room made there already). The reference counts a
        demotion's write as no write of the workload's: neither does iolab."""
        with self._entry_lock(key):
            with self.lock:
                entry = self.entries.get(key)
                if entry is None or entry.tier != tier:
                    return
            data, _ = self._get(tier, key)
            assert data is not None  # a memory tier holds its copy
            self._put(below, key, data)
            self._drop(tier, key)
            with self.lock:
                entry.tier = below
                self.usage[tier] -= entry.size
        self.stats.add(demoted=1)

    def room(self, tier: str, size: int, depth: int = 0) -> bool:
        """Make room for `size` bytes in `tier` (and reserve them): evict its least recently used entries, down to
        TARGET_USAGE of a memory tier (demoted, room made below first) or the storage's whole budget (deleted).
        A memory tier refuses an entry over LARGE_ENTRY of its size, or one it would have to empty itself for."""
        at = self.order.index(tier)
        below = self.order[at + 1] if at + 1 < len(self.order) else None
        limit = self.limits[tier]
        if depth > 10 or (below is not None and size > limit * LARGE_ENTRY):
            return False
        target = limit if below is None else limit * TARGET_USAGE
        first = True
        for key, held in self._victims(tier):
            if self._take(tier, size, target):
                return True
            if first and below is not None:
                if sum(s for _, s in self._lru(tier)) < limit * 0.2 and size > target * 0.5:
                    return False
            first = False
            if below is None:
                self._delete(key)
            elif not self.room(below, held, depth + 1):
                return False
            else:
                self._demote(key, tier, below)
        if self._take(tier, size, target):
            return True
        if below is None:  # the last tier takes it, over its budget (the file system's limit still holds)
            with self.lock:
                self.usage[tier] += size
            return True
        return False

    def _storage_fits(self, size: int) -> bool:
        """FILL_LIMIT before a storage write: this rank's least recently used files go until the entry fits."""
        for key, _ in self._lru("storage"):
            if self._fits(size):
                return True
            self._delete(key)
        return self._fits(size)

    # --- a request's two operations --------------------------------------------------------------------

    def allocate(self, key: str, tokens: int) -> tuple[str | None, float]:
        """Prefill: write a new entry to the first tier with room; (its tier, s) or (None, 0) on a failure."""
        with self.lock:
            if key in self.entries:
                return self.entries[key].tier, 0.0
        if self.allocs:
            self.allocs.acquire()
        try:
            return self._allocate(key, tokens)
        finally:
            if self.allocs:
                self.allocs.release()

    def _allocate(self, key: str, tokens: int) -> tuple[str | None, float]:
        data = self.make(key, tokens)
        size = data.nbytes
        tier = next((t for t in self.order if self.room(t, size)), "storage")
        try:
            if tier == "storage" and not self._storage_fits(size):
                raise OSError(f"{self.dir}: a {size >> 20} MiB entry would fill the file system past 9/10")
            timing = self._put(tier, key, data)
        except OSError:
            with self.lock:
                self.usage[tier] -= size
            self.stats.add(errors=1)
            return None, 0.0
        with self.lock:
            self.entries[key] = Entry(tier, size, time.time())
        filled = self._filled() if tier == "storage" else 0.0
        with self.stats.lock:
            self.stats.fill_peak = max(self.stats.fill_peak, filled)
            self.stats.bytes[(tier, "write")] += size
            self.stats.latency[f"{tier}_write"].append(timing.total)
            if tier == "storage":
                self.stats.latency["storage_write_device"].append(timing.device)
                self.stats.counts["storage_tokens"] += tokens
        return tier, timing.total

    def access(self, key: str) -> tuple[str | None, float]:
        """A read of an entry: (its tier, s), or (None, 0) when it is not cached (a miss)."""
        with self.lock:
            known = key in self.entries
        if not known:
            self.stats.add(misses=1)
            return None, 0.0
        with self._entry_lock(key):
            with self.lock:
                entry = self.entries.get(key)
                if entry is not None:
                    entry.last, entry.count = time.time(), entry.count + 1
            if entry is None:
                self.stats.add(misses=1)
                return None, 0.0
            tier, size = entry.tier, entry.size
            with self.stats.lock:
                self.stats.counts["hits"] += 1
                self.stats.bytes[(tier, "read")] += size
            try:
                _, timing = self._get(tier, key)
            except (OSError, KeyError, ValueError):
                self.stats.add(errors=1)
                return tier, 0.0
        with self.stats.lock:
            self.stats.latency[f"{tier}_read"].append(timing.total)
            if tier == "storage":
                self.stats.latency["storage_read_device"].append(timing.device)
                self.stats.counts["storage_tokens"] += size // self.settings.per_token
        return tier, timing.total

    def clear(self) -> None:
        """Remove every file the rank left on the storage."""
        for path in self.dir.glob("*.npy"):
            path.unlink(missing_ok=True)
