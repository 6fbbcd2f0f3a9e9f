"""One client (rank) of the KV-cache offload workload, as MLPerf Storage v3.0's kv-cache.py runs it (host side).

Users hold multi-turn conversations: each user thread thinks (its template's think time, ±20 %),
then asks (a request of a context and a number of generated tokens drawn from its template); one
conversation in five ends after a turn, none lasts past 50 turns. A pool of workers (one per user,
at most 500) takes the requests in priority order (the user's QoS) and does, for each:

    1. a system-prompt prefix look-up, one request in five (never cached: a miss; the context
       loses the prompt's words);
    2. from its second turn on, a read of every earlier turn's KV entry still cached;
    3. prefill: the request's KV entry written (context tokens × KV bytes per token);
    4. decode (contexts under 10,000 tokens): the entry read back, then once per 32 generated tokens;
    5. the generation time (none by default: MLPerf's CLOSED options measure storage only).

Where an entry goes, and how it is written and read, is iolab.host.kvcache_tiers'.

The seed draws the users (the reference's own draws: the same users); what they then ask is drawn
afresh in every run, as the reference's threads share one generator in an order no run repeats. A
request stream fixed by the seed would make every trial and every probe the same sample of a few
dozen requests per user, and so repeat its luck: at seed 42 it drew contexts 2–12 % under their
mean for each busy user, entries 9 % smaller than the reference's in every trial (docs/PERFORMANCE.md).

At the duration the users stop and no worker takes another request, but a request taken before
then does all its I/O, as the reference's does; the rank's figures are taken once each worker has
been waited for up to JOIN_S in turn (the reference's joins), so they count the reads that ran
past the duration, over the duration (docs/PERFORMANCE.md: what that changes in the figures).
"""

from __future__ import annotations

import dataclasses
import itertools
import queue
import random
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from iolab.host.kvcache_tiers import TIERS, Settings, Stats, Tiers
from iolab.shared.kvcache_model import SYSTEM_PROMPT_WORDS, templates

INTERACTIVE, RESPONSIVE = 0.15, 0.50  # a user's QoS draw: priority 3 below 0.15, 2 below 0.50, else 1
END_CONVERSATION = 0.2
MAX_TURNS = 50
MAX_CONVERSATIONS = 1000
SYSTEM_PROMPT = 0.2  # requests that look a system prompt up
DECODE_BATCH = 32  # generated tokens per decode read
PREFILL_ONLY = 10_000  # context tokens from which a request is prefill only (no decode read)
MAX_WORKERS = 500
GENERATION = {"none": 0.0, "fast": 0.002, "realistic": 0.030}  # s per generated token
JOIN_S = 2.0  # after the duration, each worker is waited for up to this long in turn before the figures


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    context: int
    generate: int
    think: float
    priority: int


def draw_users(count: int, seed: int, scale: float = 1.0) -> list[User]:
    """The users of a rank, drawn as the reference draws them from its seed: template, QoS, context, generated
    tokens, think time (the same draws in the same order: the same users)."""
    draw = random.Random(seed)
    table = templates(scale)
    users = []
    for index in range(count):
        kind = draw.choice(list(table))
        roll = draw.random()
        priority = 3 if roll < INTERACTIVE else 2 if roll < RESPONSIVE else 1
        context, generate, think = table[kind]
        users.append(
            User(f"user_{index:04d}", draw.randint(*context), draw.randint(*generate), draw.uniform(*think), priority)
        )
    return users


@dataclasses.dataclass
class Request:
    user: User
    key: str
    conversation: str
    turn: int
    context: int
    generate: int
    prefill_only: bool  # drawn with PREFILL_ONLY tokens or more: no decode


class Conversations:
    """Each conversation's turns (their entries' keys); the least recently used goes past MAX_CONVERSATIONS."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turns: dict[str, list[str]] = {}
        self.used: dict[str, float] = {}
        self.numbers = itertools.count()

    def start(self, user: str) -> str:
        name = f"conv_{user}_{next(self.numbers)}"
        with self.lock:
            if len(self.turns) >= MAX_CONVERSATIONS:
                oldest = min(self.used, key=self.used.__getitem__)
                del self.turns[oldest], self.used[oldest]
            self.turns[name], self.used[name] = [], time.time()
        return name

    def add_turn(self, name: str) -> tuple[int, str] | None:
        """The next turn's number and key; None when the conversation was let go."""
        with self.lock:
            if name not in self.turns:
                return None
            keys = self.turns[name]
            keys.append(f"{name}_turn_{len(keys) + 1}")
            self.used[name] = time.time()
            return len(keys), keys[-1]

    def turns_of(self, name: str) -> int:
        with self.lock:
            return len(self.turns.get(name, []))

    def earlier(self, name: str, key: str) -> list[str]:
        with self.lock:
            return [k for k in self.turns.get(name, []) if k != key]


class Rank:
    """One client: its users, its workers and its tiers, for `duration` seconds."""

    def __init__(self, settings: Settings, directory: Path, storage_limit: float) -> None:
        self.settings = settings
        self.stats = Stats()
        self.tiers = Tiers(settings, directory, storage_limit, self.stats)
        self.conversations = Conversations()
        self.queue: queue.PriorityQueue[tuple[int, float, int, Request]] = queue.PriorityQueue()
        self.order = itertools.count()
        self.stop = threading.Event()

    def _user(self, user: User, draw: random.Random) -> None:
        conversation: str | None = None
        while not self.stop.is_set():
            if self.stop.wait(user.think * draw.uniform(0.8, 1.2)):
                break
            if conversation and (
                draw.random() >= 1 - END_CONVERSATION or self.conversations.turns_of(conversation) >= MAX_TURNS
            ):
                conversation = None
            turn = self.conversations.add_turn(conversation) if conversation else None
            if conversation is None or turn is None:  # a new conversation, or one let go past MAX_CONVERSATIONS
                conversation = self.conversations.start(user.name)
                turn = self.conversations.add_turn(conversation)
            assert turn is not None
            context = draw.randint(max(1, user.context // 4), user.context)
            generate = draw.randint(max(1, user.generate // 4), user.generate)
            request = Request(user, turn[1], conversation, turn[0], context, generate, context >= PREFILL_ONLY)
            self.queue.put((-user.priority, time.time(), next(self.order), request))

    def _serve(self, request: Request, draw: random.Random) -> float:
        """One request's I/O, all of it even past the duration; its storage time (s)."""
        spent = 0.0
        if draw.random() < SYSTEM_PROMPT:  # a system prompt, never cached: a miss, and fewer tokens to write
            words = draw.choice(SYSTEM_PROMPT_WORDS)
            self.tiers.access(f"kv_system_prompt_{words}")
            request.context = max(0, request.context - words)
        if request.turn > 1:
            for key in self.conversations.earlier(request.conversation, request.key):
                spent += self.tiers.access(key)[1]
        spent += self.tiers.allocate(request.key, request.context)[1]
        if request.prefill_only:
            return spent
        tier, took = self.tiers.access(request.key)
        spent += took
        if tier is None:
            return spent + self.tiers.allocate(request.key, request.context)[1]
        for _ in range(-(-request.generate // DECODE_BATCH)):
            spent += self.tiers.access(request.key)[1]
        return spent

    def _worker(self, draw: random.Random) -> None:
        while not self.stop.is_set():
            try:
                *_, request = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if self.stop.is_set():
                break
            spent = self._serve(request, draw)
            time.sleep(request.generate * GENERATION[self.settings.generation])
            with self.stats.lock:
                self.stats.counts["requests"] += 1
                self.stats.counts["tokens"] += request.generate
                self.stats.io_time += spent

    def run(self) -> dict[str, Any]:
        """The rank's run: users and workers for the duration; its figures in kv-cache.py's result shape."""
        users = draw_users(self.settings.users, self.settings.seed, self.settings.context_scale)
        fresh = random.Random()  # each run's requests a new draw, as the reference's (see the module's docstring)
        threads = [
            threading.Thread(target=self._user, args=(u, random.Random(fresh.getrandbits(64))), daemon=True)
            for u in users
        ]
        workers = [
            threading.Thread(target=self._worker, args=(random.Random(fresh.getrandbits(64)),), daemon=True)
            for _ in range(min(len(users), MAX_WORKERS))
        ]
        started = time.time()
        for thread in threads + workers:
            thread.start()
        self.stop.wait(self.settings.duration)
        self.stop.set()
        elapsed = time.time() - started
        for worker in workers:  # the requests in flight do their I/O meanwhile
            worker.join(timeout=JOIN_S)
        with self.tiers.lock:
            stored = sum(1 for e in self.tiers.entries.values() if e.tier == "storage")
        with self.stats.lock:  # the figures now, as the reference's: a read still running has its bytes in them
            found = result(self.stats, elapsed, started, stored)
        for thread in threads + workers:  # done before the rank's files go
            thread.join(timeout=30)
        return found


def _percentiles(values: list[float], prefix: str) -> dict[str, float]:
    if not values:
        return {}
    found = np.percentile(np.array(values), [50, 95, 99]) * 1000
    return {f"{prefix}_{name}_ms": float(v) for name, v in zip(("p50", "p95", "p99"), found, strict=True)}


def result(stats: Stats, elapsed: float, started: float, stored: int) -> dict[str, Any]:
    """A rank's figures, named as kv-cache.py names them in its result file (summary.cache_stats)."""
    gib = 1 << 30
    cache: dict[str, Any] = {}
    for tier in TIERS:
        for op, said in (("read", "read"), ("write", "written")):
            cache[f"tier_{tier}_kv_bytes_{said}_gb"] = stats.bytes[(tier, op)] / gib
            cache[f"tier_{tier}_{op}_bandwidth_gbps"] = stats.bytes[(tier, op)] / gib / elapsed
        for op in ("read", "write"):
            cache.update(_percentiles(stats.latency[f"{tier}_{op}"], f"{tier}_{op}"))
    for op in ("read", "write"):
        cache.update(_percentiles(stats.latency[f"storage_{op}_device"], f"storage_{op}_device"))
    counts = stats.counts
    cache.update(
        cache_hits=counts["hits"],
        cache_misses=counts["misses"],
        storage_entries=stored,
        storage_tokens_processed=counts["storage_tokens"],
    )
    return {
        "summary": {
            "total_requests": counts["requests"],
            "total_tokens": counts["tokens"],
            "elapsed_time": elapsed,
            "avg_throughput_tokens_per_sec": counts["tokens"] / elapsed,
            "total_storage_io_time": stats.io_time,
            "storage_throughput_tokens_per_sec": counts["tokens"] / stats.io_time if stats.io_time else 0.0,
            "cache_stats": cache,
        },
        "iolab": {
            "started_at": started,
            "ended_at": started + elapsed,
            "errors": counts["errors"],
            "demoted": counts["demoted"],
            "evicted": counts["evicted"],
            "fill_peak": stats.fill_peak,
        },
    }
