"""Checkpoint writes and reads as MLPerf Storage's checkpointing workload does them (host side, stdlib only).

    python -m iolab.kinds.checkpoint.host check --dir WORKDIR --out RUN_DIR --world W --hosts H --index I
                                          --bytes-per-rank B
    python -m iolab.kinds.checkpoint.host write --dir WORKDIR --out RUN_DIR --world W --hosts H --index I
                                          --bytes-per-rank B
    python -m iolab.kinds.checkpoint.host read  --dir WORKDIR --out RUN_DIR --world W --hosts H --index I [--remove]

(each also takes --count N: N checkpoints, MLPerf Storage's 10, written one after the other, then read back.)

The job's W ranks are spread over its H hosts (`share`); host I runs its share. Each rank is
a process of its own (as each emulated accelerator is a process in DLIO): `write` has every
rank write its shard of each checkpoint K, `ckpt-rank<R>-<K>.bin`, in pieces of up to 64 MiB
and fsync it; `read` first records how much of the shards is still in this host's page cache
(fincore: a cold read starts at 0 %), then has every rank read its shards back, checkpoint by
checkpoint. All ranks of a host start each checkpoint together (a barrier). Each rank's bytes
and times, per checkpoint, go to RUN_DIR/checkpoint.json (one entry per phase), from which the
controller derives the figures: a checkpoint's duration = its slowest rank, throughput =
bytes / that duration. `check` (and `write`, first) refuses in one line when this host's ranks
would not fit its memory (MemAvailable) or all their shards the target's free space.

The data is random and every piece starts at another, 4 KiB-unaligned offset of a random
pool, so neither compression nor block-level deduplication shrinks it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue as queue_module
import shutil
import subprocess
import sys
import time
from pathlib import Path

from iolab.host import facts, runs

PIECE = 64 << 20
SLACK = 4 << 20  # the pool is a piece and this: each piece starts at another offset of it
# A rank's memory beside its pool: measured as the resident size of a forked rank less its pool, 11 MiB
# (docs/REFERENCE_FIGURES.md, "Checkpointing"), rounded up.
RANK_OVERHEAD = 12 << 20
RESULT = "checkpoint.json"


def share(world: int, hosts: int, index: int) -> range:
    """The ranks host `index` of `hosts` runs of the job's `world`: as even as they go, the first hosts one more."""
    each, more = divmod(world, hosts)
    first = index * each + min(index, more)
    return range(first, first + each + (index < more))


def pool_bytes(shard_bytes: int) -> int:
    """What a rank holds to write a shard of `shard_bytes` (a read holds less: one piece)."""
    return min(PIECE, shard_bytes) + SLACK


def refusal(directory: Path, ranks: int, shard_bytes: int, count: int = 1) -> str | None:
    """Why this host cannot run `ranks` ranks writing `count` shards of `shard_bytes` each: its memory or the
    target's space; or None."""
    each = RANK_OVERHEAD + pool_bytes(shard_bytes)
    available = facts.meminfo().get("MemAvailable")
    if available is None or ranks * each > available:
        has = "no MemAvailable in /proc/meminfo" if available is None else f"{available >> 20} MiB available"
        return (
            f"{ranks} checkpoint ranks need {ranks * each >> 20} MiB of memory on this host ({each >> 20} MiB each) "
            f"and it has {has}; give fewer writers or ranks, or spread them over more hosts"
        )
    free = shutil.disk_usage(directory).free
    if count * ranks * shard_bytes > free * 0.95:
        return (
            f"{directory}: the {count} checkpoint(s) need {count * ranks * shard_bytes >> 20} MiB on this host but "
            f"the target has "
            f"{free >> 20} MiB free; lower the workload's scale or give the backend more space"
        )
    return None


def shard(directory: Path, rank: int, checkpoint: int = 1) -> Path:
    return directory / f"ckpt-rank{rank:05d}-{checkpoint:02d}.bin"


def _write_rank(directory: Path, rank: int, size: int, count: int, barrier, queue) -> None:
    piece_bytes = min(PIECE, size)
    view = memoryview(os.urandom(pool_bytes(size)))
    for checkpoint in range(1, count + 1):
        barrier.wait()
        started = time.time()
        fd = os.open(shard(directory, rank, checkpoint), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            written, piece = 0, 0
            while written < size:
                # 4 KiB-unaligned: no two pieces alike, nor two checkpoints
                offset = (piece * 4099 + rank * 7919 + checkpoint * 4111) % SLACK
                chunk = view[offset : offset + min(piece_bytes, size - written)]
                while chunk:
                    done = os.write(fd, chunk)
                    written += done
                    chunk = chunk[done:]
                piece += 1
            os.fsync(fd)  # each checkpoint ends in fsync (MLPerf Storage rule 4.3.2)
        finally:
            os.close(fd)
        queue.put(
            {"rank": rank, "checkpoint": checkpoint, "bytes": size, "started_at": started, "ended_at": time.time()}
        )


def _read_rank(directory: Path, rank: int, count: int, barrier, queue) -> None:
    buffer = bytearray(min(PIECE, shard(directory, rank).stat().st_size) or 1)
    for checkpoint in range(1, count + 1):
        barrier.wait()
        started = time.time()
        total = 0
        with open(shard(directory, rank, checkpoint), "rb", buffering=0) as handle:
            while True:
                got = handle.readinto(buffer)
                if not got:
                    break
                total += got
        queue.put(
            {"rank": rank, "checkpoint": checkpoint, "bytes": total, "started_at": started, "ended_at": time.time()}
        )


def resident_bytes(paths: list[Path]) -> int | None:
    """Bytes of `paths` in the page cache (util-linux fincore), or None where fincore is missing."""
    if not shutil.which("fincore") or not paths:
        return None
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", *map(str, paths)], capture_output=True, text=True
    )
    if out.returncode != 0:
        return None
    return sum(int(line) for line in out.stdout.split())


def _run_ranks(target, args_per_rank: list[tuple], count: int) -> list[dict]:
    """Each rank's entries, one per checkpoint, by checkpoint and rank."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(len(args_per_rank), timeout=600)
    queue = context.Queue()
    procs = [context.Process(target=target, args=(*args, barrier, queue)) for args in args_per_rank]
    for proc in procs:
        proc.start()
    results: list[dict] = []
    try:
        while len(results) < len(procs) * count:
            try:
                results.append(queue.get(timeout=1.0))
            except queue_module.Empty:
                failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if failed:
                    raise RuntimeError(f"{len(failed)} rank process(es) failed (exit {failed[0]})") from None
    finally:
        for proc in procs:
            if proc.exitcode is None and len(results) < len(procs) * count:
                proc.terminate()
            proc.join()
    return sorted(results, key=lambda r: (r["checkpoint"], r["rank"]))


def _record(out: Path, phase: str, ranks: list[dict], **extra: object) -> None:
    path = out / RESULT
    data = json.loads(path.read_text()) if path.exists() else {}
    data[phase] = {"ranks": ranks, **extra}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m iolab.kinds.checkpoint.host")
    parser.add_argument("phase", choices=("check", "write", "read"))
    parser.add_argument("--dir", type=Path, required=True, help="where the shards are (on the storage under test)")
    parser.add_argument("--out", type=Path, required=True, help="the run's directory: checkpoint.json goes there")
    parser.add_argument("--world", type=int, required=True, help="writer processes (ranks) of the whole job")
    parser.add_argument("--hosts", type=int, default=1, help="the hosts the ranks are spread over")
    parser.add_argument("--index", type=int, default=0, help="this host's place among them, from 0")
    parser.add_argument("--bytes-per-rank", type=int, help="check, write: each shard's size in bytes")
    parser.add_argument("--count", type=int, default=1, help="checkpoints written, then read (MLPerf: 10)")
    parser.add_argument("--remove", action="store_true", help="read: remove the shards afterwards")
    return parser


def _options(argv: list[str] | None) -> argparse.Namespace | None:
    """The command line, checked: a usage error exits 2, too few ranks for the hosts is None (told)."""
    parser = _parser()
    opts = parser.parse_args(argv)
    if not 0 <= opts.index < opts.hosts:
        parser.error("--index is this host's place among --hosts, from 0")
    if opts.count < 1:
        parser.error("--count is how many checkpoints, at least 1")
    if opts.world < opts.hosts:
        print(
            f"{opts.world} checkpoint ranks leave some of the {opts.hosts} hosts without one; "
            "give at least as many ranks as hosts, or select fewer hosts",
            file=sys.stderr,
        )
        return None
    if opts.phase != "read" and (not opts.bytes_per_rank or opts.bytes_per_rank < 1):
        parser.error(f"{opts.phase} needs --bytes-per-rank (a positive number of bytes)")
    return opts


def _check_or_write(opts: argparse.Namespace, ranks: range, paths: list[Path]) -> int:
    opts.dir.mkdir(parents=True, exist_ok=True)
    refused = refusal(opts.dir, len(ranks), opts.bytes_per_rank, opts.count)
    if refused or opts.phase == "check":
        print(refused or f"{len(ranks)} ranks fit this host's memory and the target's space", file=sys.stderr)
        return 1 if refused else 0
    runs.note_scratch(opts.out, paths)  # for `hostrun stop`, should the run not end as it should
    args = [(opts.dir, rank, opts.bytes_per_rank, opts.count) for rank in ranks]
    _record(opts.out, "write", _run_ranks(_write_rank, args, opts.count), fsync=True, count=opts.count)
    return 0


def _read(opts: argparse.Namespace, ranks: range, paths: list[Path]) -> int:
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"no checkpoint to read: {missing[0]} is missing (the write phase did not finish)", file=sys.stderr)
        return 1
    resident = resident_bytes(paths)
    read = _run_ranks(_read_rank, [(opts.dir, rank, opts.count) for rank in ranks], opts.count)
    _record(
        opts.out,
        "read",
        read,
        resident_before_bytes=resident,
        shard_bytes=sum(p.stat().st_size for p in paths),
        count=opts.count,
    )
    if opts.remove:
        for path in paths:
            path.unlink(missing_ok=True)
        runs.note_scratch(opts.out, [])
    return 0


def main(argv: list[str] | None = None) -> int:
    opts = _options(argv)
    if opts is None:
        return 1
    ranks = share(opts.world, opts.hosts, opts.index)
    paths = [shard(opts.dir, rank, k) for rank in ranks for k in range(1, opts.count + 1)]
    opts.out.mkdir(parents=True, exist_ok=True)
    try:
        if opts.phase in ("check", "write"):
            return _check_or_write(opts, ranks, paths)
        return _read(opts, ranks, paths)
    except (OSError, RuntimeError) as exc:
        print(f"checkpoint {opts.phase} on {opts.dir}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
