"""Object PUT and GET throughput and latency against an S3 bucket (host side, boto3).

    python -m iolab.kinds.objects.host --s3 CONNECTION_JSON --workdir KEYS --out RUN_DIR --size BYTES
        --threads N --objects N --runtime SECONDS --ramp SECONDS

First every one of the host's `--objects` keys (KEYS/obj-<i>, under the backend's
prefix) is written once, untimed. Then two timed phases, each `ramp + runtime` seconds:
PUT (each of the N threads overwrites its own keys in turn) and GET (each thread reads
keys in a seeded random order and checks that each body has the object's size). A
request counts when it ends inside the window after the ramp (the warm-up); its
latency is from the request's start to the last byte of its response (a GET reads the
whole body). The keys are deleted at the end.

RUN_DIR/objects.json holds, per phase: the window, requests and bytes in it, latency
percentiles (ns) and per-second series of bytes and requests, from which the controller
derives B/s and requests/s (iolab.kinds.objects.parser).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from iolab.host import s3client

RESULT = "objects.json"
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def percentile(ordered: list[int], pct: float) -> int:
    """The nearest-rank percentile of an ascending list (fio's convention)."""
    return ordered[max(0, min(len(ordered) - 1, int(round(pct / 100 * len(ordered) + 0.5)) - 1))]


class Phase:
    """One timed phase: threads issue requests until the window closes; what ends inside it is kept."""

    def __init__(self, name: str, ramp: float, runtime: float, keep_going: bool = False):
        self.name, self.ramp, self.runtime = name, ramp, runtime
        self.lock = threading.Lock()
        self.done: list[tuple[float, int, int]] = []  # (ended at, latency ns, bytes)
        self.error: str | None = None
        # A faulted run's clients go on after a failed request (its storage may come back): each failure counted.
        self.keep_going = keep_going
        self.failed: list[tuple[float, str]] = []  # (ended at, why)

    def run(self, threads: int, request) -> dict[str, Any]:
        """Run `request(thread, turn) -> bytes` on every thread; the phase's record."""
        barrier = threading.Barrier(threads + 1)
        workers = [threading.Thread(target=self._loop, args=(t, request, barrier), daemon=True) for t in range(threads)]
        for worker in workers:
            worker.start()
        barrier.wait()
        self.started = time.time()
        self.opens, self.closes = self.started + self.ramp, self.started + self.ramp + self.runtime
        for worker in workers:
            worker.join()
        if self.error:
            raise RuntimeError(f"{self.name}: {self.error}")
        return self.record()

    def _loop(self, thread: int, request, barrier: threading.Barrier) -> None:
        barrier.wait()
        turn = 0
        while self.error is None:
            begun = time.perf_counter_ns()
            try:
                moved = request(thread, turn)
            except Exception as exc:  # the first failure ends the phase, and says why (unless it keeps going)
                why = f"{exc.__class__.__name__}: {exc}"
                if not self.keep_going:
                    self.error = self.error or why
                    return
                with self.lock:
                    self.failed.append((time.time(), why))
                if time.time() >= self.closes:
                    return
                time.sleep(0.1)  # a refused connection fails at once: no busy loop while the server is away
                turn += 1
                continue
            latency, ended = time.perf_counter_ns() - begun, time.time()
            if ended >= self.closes:
                return
            if ended >= self.opens:
                with self.lock:
                    self.done.append((ended, latency, moved))
            turn += 1

    def record(self) -> dict[str, Any]:
        if not self.done:
            raise RuntimeError(
                f"{self.name}: no request ended inside the {self.runtime:g} s window; "
                "lengthen runtime or make the objects smaller"
            )
        latencies = sorted(lat for _, lat, _ in self.done)
        seconds: dict[int, list[int]] = {}
        for ended, _, moved in self.done:
            bucket = seconds.setdefault(int(ended - self.opens), [0, 0])
            bucket[0] += moved
            bucket[1] += 1
        return {
            "window": [self.opens, self.closes],
            "requests": len(self.done),
            "bytes": sum(m for _, _, m in self.done),
            "latency_ns": {
                **{k: percentile(latencies, p) for k, p in PERCENTILES.items()},
                "min": latencies[0],
                "max": latencies[-1],
                "mean": sum(latencies) / len(latencies),
            },
            # [end of the second (epoch s), bytes, requests] for every whole second of the window
            "series": [[self.opens + s + 1, *seconds.get(s, [0, 0])] for s in range(int(self.runtime))],
            # requests that failed (a faulted run's, --keep-going): how many, the first's error and time
            "errors": len(self.failed),
            **({"first_error": self.failed[0][1], "first_error_at": self.failed[0][0]} if self.failed else {}),
        }


class _Requests:
    """The phases' requests on this host's keys: PUT overwrites each thread's own keys in turn, GET reads keys in
    each thread's seeded random order and checks each body's size."""

    def __init__(self, s3, bucket: str, names: list[str], size: int, threads: int, seed: int):
        self.s3, self.bucket, self.names, self.size, self.threads = s3, bucket, names, size, threads
        # Random bytes (nothing to compress), one pool for all: each object starts at its own offset.
        self.pool = os.urandom(size + 4096)
        self.orders = [random.Random(seed * 1000 + t) for t in range(threads)]

    def body(self, index: int, turn: int) -> bytes:
        offset = (index * 131 + turn * 17) % 4096
        return self.pool[offset : offset + self.size]

    def fill(self) -> None:
        """Write every key once (untimed)."""
        for index, name in enumerate(self.names):
            self.s3.put_object(Bucket=self.bucket, Key=name, Body=self.body(index, 0))

    def put(self, thread: int, turn: int) -> int:
        index = (thread + turn * self.threads) % len(self.names)
        self.s3.put_object(Bucket=self.bucket, Key=self.names[index], Body=self.body(index, turn))
        return self.size

    def get(self, thread: int, turn: int) -> int:
        name = self.names[self.orders[thread].randrange(len(self.names))]
        data = self.s3.get_object(Bucket=self.bucket, Key=name)["Body"].read()
        if len(data) != self.size:
            raise ValueError(f"{name}: {len(data)} bytes back, {self.size} written")
        return len(data)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m iolab.kinds.objects.host", description=__doc__.split("\n")[0])
    p.add_argument("--s3", required=True, help="the backend's connection (JSON; names the credentials' source)")
    p.add_argument("--workdir", required=True, help="this host's keys go under PREFIX/WORKDIR/")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--objects", type=int, default=64)
    p.add_argument("--runtime", type=float, default=10.0)
    p.add_argument("--ramp", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep-going", action="store_true", help="count a failed request and go on (a faulted run)")
    return p


def main(args: list[str] | None = None) -> int:
    opts = _parser().parse_args(args)
    try:
        conn = s3client.connection(opts.s3)
        s3 = s3client.client(conn)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    import boto3

    bucket, workdir = conn["bucket"], s3client.key(conn, opts.workdir)
    names = [f"{workdir}/obj-{i:06d}" for i in range(max(opts.objects, opts.threads))]
    requests = _Requests(s3, bucket, names, opts.size, opts.threads, opts.seed)
    result: dict[str, Any] = {
        "client": "boto3",
        "boto3": boto3.__version__,
        "endpoint": conn["endpoint"],
        "bucket": bucket,
        "keys": workdir + "/",
        "size": opts.size,
        "threads": opts.threads,
        "objects": len(names),
        "runtime": opts.runtime,
        "ramp": opts.ramp,
        "phases": {},
    }
    try:
        filled = time.time()
        requests.fill()
        result["fill_s"] = time.time() - filled
        for phase, request in (("put", requests.put), ("get", requests.get)):
            result["phases"][phase] = Phase(phase, opts.ramp, opts.runtime, opts.keep_going).run(opts.threads, request)
    except Exception as exc:
        print(f"objects on {conn['endpoint']}/{bucket}: {exc}", file=sys.stderr)
        return 1
    finally:
        try:
            result["deleted"] = s3client.delete_prefix(s3, bucket, workdir)
        except Exception as exc:
            print(f"deleting {workdir}/ in {bucket}: {exc}", file=sys.stderr)
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / RESULT).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
