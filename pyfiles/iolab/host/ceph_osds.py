"""The storage side of a Ceph backend, as a client reaches it: its OSDs' (and MDS's) caches and counters.

On the hosts (stdlib plus librados, the `rados` module of python3-rados, which ceph-common
depends on), with the backend's ceph.conf, keyring and client name:

    python -m iolab.host.ceph_osds drop --cluster '{"conf": ..., "keyring": ..., "client": "admin", "mds": false}'
    sampler = Sampler(run_dir / OSD_FILE, Cluster.from_json(text), after=2.0)
    sampler.start(); ...; sampler.stop()

    python -m iolab.host.ceph_osds health --cluster '{...}' --out FILE   (a faulted run's, on the controller)

`drop` is `ceph tell osd.* cache drop` (and `ceph tell mds.* cache drop` for CephFS) sent
through one librados connection, with each OSD's BlueStore cache (the
`bluestore_cache_*` mempools of `dump_mempools`: data buffers, onodes, metadata) read
before and after, so the record shows that the drop happened. It prints the record as
JSON; role drop_caches writes it into the run's storage_drop_caches.json.

The sampler reads every OSD's `perf dump` once a second (`ceph tell osd.N perf dump`)
while the tool runs and writes, per OSD and interval, client operations per second, bytes
read and written per second, the mean operation latency and the bytes BlueStore read from
its cache and from the device (hits and misses), into `osd_telemetry.jsonl` beside the
host's telemetry, on the run's first host only ($IOLAB_CEPH, set by playbooks/run.yml). One
persistent connection, no process per sample: the ceph CLI costs a Python start-up each call.

On the controller, iolab.store.ceph reads what they wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iolab.shared.protocol import OSD_FILE

# The BlueStore caches that `cache drop` empties (dump_mempools' pool names).
CACHE_POOLS = ("bluestore_cache_data", "bluestore_cache_onode", "bluestore_cache_meta", "bluestore_cache_other")
# perf dump's `osd` counters: operations, bytes to and from clients, latencies {avgcount, sum}.
COUNTERS = ("op", "op_r", "op_w", "op_out_bytes", "op_in_bytes")
LATENCIES = ("op_latency", "op_r_latency", "op_w_latency")
# perf dump's `bluestore` counters: bytes read from BlueStore's cache, and from the device (misses).
CACHE_COUNTERS = {"bluestore_buffer_hit_bytes": "cache_hit", "bluestore_buffer_miss_bytes": "cache_miss"}
TIMEOUT = 15
MDS_DROP_TIMEOUT = 10  # seconds the MDS waits for clients to give back capabilities


class CephError(Exception):
    """A command the cluster refused or did not answer."""


@dataclass(frozen=True)
class Cluster:
    """How a client reaches the cluster: the backend's ceph.conf, keyring and client name; `mds` for CephFS."""

    conf: str
    keyring: str
    client: str
    mds: bool = False

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("conf", "keyring", "client")):
            raise ValueError(f"--cluster {text!r}: give a JSON object with conf, keyring and client")
        return cls(data["conf"], data["keyring"], data["client"], bool(data.get("mds", False)))

    def connect(self) -> Connection:
        try:
            import rados  # python3-rados: ceph-common depends on it
        except ImportError:
            raise CephError("librados' Python module is missing on this host: apt-get install python3-rados") from None
        try:
            handle = rados.Rados(conffile=self.conf, conf={"keyring": self.keyring}, rados_id=self.client)
            handle.connect(timeout=TIMEOUT)
        except rados.Error as exc:
            raise CephError(f"cannot reach the cluster of {self.conf} as client.{self.client}: {exc}") from None
        return Connection(handle)


class Connection:
    """One librados connection: the OSDs' ids and their `tell` commands."""

    def __init__(self, handle: Any):
        self.handle = handle

    def close(self) -> None:
        self.handle.shutdown()

    def mon(self, prefix: str) -> Any:
        ret, out, err = self.handle.mon_command(json.dumps({"prefix": prefix, "format": "json"}), b"", timeout=TIMEOUT)
        if ret != 0:
            raise CephError(f"ceph {prefix}: {err or ret}")
        return json.loads(out)

    def osds(self) -> list[int]:
        return [int(osd) for osd in self.mon("osd ls")]

    def tell(self, osd: int, prefix: str) -> Any:
        ret, out, err = self.handle.osd_command(
            osd, json.dumps({"prefix": prefix, "format": "json"}), b"", timeout=TIMEOUT
        )
        if ret != 0:
            raise CephError(f"ceph tell osd.{osd} {prefix}: {err or ret}")
        return json.loads(out) if out.strip() else {}

    def cache_bytes(self, osd: int) -> dict[str, int]:
        pools = self.tell(osd, "dump_mempools")["mempool"]["by_pool"]
        return {pool: int(pools.get(pool, {}).get("bytes", 0)) for pool in CACHE_POOLS}

    def mds_names(self) -> list[str]:
        """The MDS daemons that hold a rank in some file system (those with a cache to drop)."""
        dump = self.mon("fs dump")
        return sorted(
            info["name"]
            for fs in dump.get("filesystems", [])
            for info in fs.get("mdsmap", {}).get("info", {}).values()
            if info.get("rank", -1) >= 0
        )


# --- the cache drop ---------------------------------------------------------------------------------


def _drop_mds(cluster: Cluster, names: list[str]) -> dict[str, Any]:
    """`ceph tell mds.NAME cache drop` for each (the ceph CLI: librados has no MDS commands)."""
    out: dict[str, Any] = {}
    for name in names:
        argv = [
            "ceph",
            "--conf",
            cluster.conf,
            "--keyring",
            cluster.keyring,
            "--id",
            cluster.client,
            "--connect-timeout",
            str(TIMEOUT),
            "tell",
            f"mds.{name}",
            "cache",
            "drop",
            str(MDS_DROP_TIMEOUT),
        ]
        done = subprocess.run(
            argv, check=False, capture_output=True, text=True, timeout=TIMEOUT + MDS_DROP_TIMEOUT + 30
        )
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise CephError(f"ceph tell mds.{name} cache drop: {why}")
        result = json.loads(done.stdout)
        out[f"mds.{name}"] = {
            "trimmed": result.get("trim_cache", {}).get("trimmed"),
            "cache_bytes_after": result.get("cache", {}).get("pool", {}).get("bytes"),
        }
    return out


def drop(cluster: Cluster) -> dict[str, Any]:
    """Drop the OSDs' caches (and the MDS's for CephFS); the record, with each OSD's cache bytes before and after.

    A cluster that cannot be reached, or refuses, gives a record with `dropped: false` and the error.
    """
    started = time.time()
    method = "ceph tell osd.* cache drop" + ("; ceph tell mds.* cache drop" if cluster.mds else "")
    record: dict[str, Any] = {"cluster": cluster.conf, "method": method, "dropped": False}
    try:
        conn = cluster.connect()
        try:
            osds = conn.osds()
            before = {osd: conn.cache_bytes(osd) for osd in osds}
            for osd in osds:
                conn.tell(osd, "cache drop")
            after = {osd: conn.cache_bytes(osd) for osd in osds}
            names = conn.mds_names() if cluster.mds else []
        finally:
            conn.close()
        record["osds"] = {f"osd.{osd}": {"before": before[osd], "after": after[osd]} for osd in osds}
        record["cache_bytes_before"] = sum(sum(b.values()) for b in before.values())
        record["cache_bytes_after"] = sum(sum(a.values()) for a in after.values())
        if cluster.mds:
            record["mds"] = _drop_mds(cluster, names)
        record["dropped"] = True
    except (CephError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
        record["error"] = str(exc)
    record["dropped_at"] = time.time()
    record["seconds"] = record["dropped_at"] - started
    return record


# --- the OSDs' counters while the tool runs -----------------------------------------------------------


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def counters(perf: dict[str, Any]) -> dict[str, float]:
    """One OSD's perf dump, flattened: counts, bytes, latency sums and counts, BlueStore cache hits and misses."""
    osd, store = perf.get("osd", {}), perf.get("bluestore", {})
    out = {name: float(osd.get(name, 0)) for name in COUNTERS}
    out.update({name: float(store.get(name, 0)) for name in CACHE_COUNTERS})
    for name in LATENCIES:
        out[f"{name}_sum"] = float(osd.get(name, {}).get("sum", 0.0))
        out[f"{name}_count"] = float(osd.get(name, {}).get("avgcount", 0))
    return out


def interval(prev: dict[str, float], cur: dict[str, float], seconds: float) -> dict[str, float]:
    """One OSD over one interval: ops (count), iops, read_bw and write_bw (B/s), mean latencies (s), and the
    bytes BlueStore read from its cache (cache_hit) and from the device (cache_miss), per interval and per second."""
    d = {k: max(0.0, cur[k] - prev.get(k, 0.0)) for k in cur}

    def mean(name: str) -> float:
        count = d[f"{name}_count"]
        return _round(d[f"{name}_sum"] / count) if count else 0.0

    return {
        "ops": d["op"],
        "read_ops": d["op_r"],
        "write_ops": d["op_w"],
        "read_bytes": d["op_out_bytes"],
        "write_bytes": d["op_in_bytes"],
        "iops": _round(d["op"] / seconds),
        "read_bw": _round(d["op_out_bytes"] / seconds),
        "write_bw": _round(d["op_in_bytes"] / seconds),
        "op_await": mean("op_latency"),
        "read_await": mean("op_r_latency"),
        "write_await": mean("op_w_latency"),
        **{f"{key}_bytes": d[name] for name, key in CACHE_COUNTERS.items()},
        **{f"{key}_bw": _round(d[name] / seconds) for name, key in CACHE_COUNTERS.items()},
    }


class Sampler:
    """Every OSD's perf counters once an interval, from `after` seconds on, into `path` (a thread)."""

    def __init__(self, path: Path, cluster: Cluster, after: float = 0.0, interval_s: float = 1.0):
        self.path, self.cluster, self.after, self.interval = path, cluster, after, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="iolab-osd-telemetry", daemon=True)
        self.errors: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=TIMEOUT * 2)
        return {"errors": self.errors}

    def _write(self, out: Any, record: dict[str, Any]) -> None:
        out.write(json.dumps(record, sort_keys=True) + "\n")
        out.flush()

    def _read(self, conn: Connection, osds: list[int]) -> dict[int, dict[str, float]]:
        return {osd: counters(conn.tell(osd, "perf dump")) for osd in osds}

    def _run(self) -> None:
        cpu0 = time.thread_time()
        with open(self.path, "w") as out:
            try:
                conn = self.cluster.connect()
            except CephError as exc:
                self.errors.append(str(exc))
                self._write(out, {"type": "end", "t": time.time(), "errors": self.errors})
                return
            try:
                self._sample(conn, out)
            except (CephError, ValueError, KeyError) as exc:
                self.errors.append(str(exc))
            finally:
                conn.close()
            cpu = time.thread_time() - cpu0
            self._write(out, {"type": "end", "t": time.time(), "sampler_cpu_s": _round(cpu), "errors": self.errors})

    def _sample(self, conn: Connection, out: Any) -> None:
        if self._stop.wait(self.after):
            return
        osds = conn.osds()
        prev, mono = self._read(conn, osds), time.monotonic()
        self._write(
            out,
            {
                "type": "start",
                "t": time.time(),
                "interval": self.interval,
                "after": self.after,
                "osds": osds,
                "cluster": asdict(self.cluster),
            },
        )
        stopping = False
        while not stopping:
            stopping = self._stop.wait(max(0.0, mono + self.interval - time.monotonic()))
            cur, now = self._read(conn, osds), time.monotonic()
            seconds = now - mono
            if seconds <= 0:
                break
            self._write(
                out,
                {
                    "type": "sample",
                    "t": time.time(),
                    "dt": _round(seconds),
                    "osd": {str(osd): interval(prev[osd], cur[osd], seconds) for osd in osds},
                },
            )
            prev, mono = cur, now


# --- the cluster's health while a fault is injected (run on the controller: iolab.drive.injector) ----------------


def health_record(status: dict[str, Any]) -> dict[str, Any]:
    """What a faulted run keeps of one `ceph status`: health and its checks, the OSDs up and in, the objects
    degraded and misplaced, and the placement groups by state."""
    pgmap, osdmap = status.get("pgmap", {}), status.get("osdmap", {})
    return {
        "health": status.get("health", {}).get("status"),
        "checks": sorted(status.get("health", {}).get("checks", {})),
        "osds_up": osdmap.get("num_up_osds"),
        "osds_in": osdmap.get("num_in_osds"),
        "degraded_objects": int(pgmap.get("degraded_objects", 0)),
        "misplaced_objects": int(pgmap.get("misplaced_objects", 0)),
        "pgs": {state["state_name"]: state["count"] for state in pgmap.get("pgs_by_state", [])},
    }


def poll_health(cluster: Cluster, out: Path, interval_s: float = 1.0) -> int:
    """`ceph status` once an interval into `out` (JSON lines: t and health_record), through one connection, until
    SIGTERM or stdin closes (the controller that started this process went away)."""
    import signal

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def stdin_closed() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=stdin_closed, daemon=True).start()
    with open(out, "a") as sink:
        try:
            conn = cluster.connect()
        except CephError as exc:
            sink.write(json.dumps({"t": time.time(), "error": str(exc)}) + "\n")
            return 1
        try:
            while not stop.is_set():
                began = time.monotonic()
                try:
                    record = {"t": time.time(), **health_record(conn.mon("status"))}
                except (CephError, ValueError, KeyError) as exc:
                    record = {"t": time.time(), "error": str(exc)}
                sink.write(json.dumps(record, sort_keys=True) + "\n")
                sink.flush()
                stop.wait(max(0.0, began + interval_s - time.monotonic()))
        finally:
            conn.close()
    return 0


ENV = "IOLAB_CEPH"  # playbooks/run.yml sets it to run_ceph on the run's first host


def started_from_env(run_dir: Path, after: float | None) -> Sampler | None:
    """A started sampler of the OSDs that $IOLAB_CEPH names, when the run keeps telemetry; else None."""
    text = os.environ.get(ENV, "")
    if after is None or not text:
        return None
    sampler = Sampler(run_dir / OSD_FILE, Cluster.from_json(text), after)
    sampler.start()
    return sampler


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iolab.host.ceph_osds", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_drop = sub.add_parser("drop", help="drop the OSDs' (and MDS's) caches; print the record as JSON")
    p_drop.add_argument("--cluster", required=True, help="JSON: conf, keyring, client, mds")
    p_health = sub.add_parser("health", help="`ceph status` once a second into a file, until SIGTERM or EOF on stdin")
    p_health.add_argument("--cluster", required=True, help="JSON: conf, keyring, client")
    p_health.add_argument("--out", type=Path, required=True, help="the JSON lines file to append to")
    opts = parser.parse_args(args)
    try:
        cluster = Cluster.from_json(opts.cluster)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if opts.command == "health":
        return poll_health(cluster, opts.out)
    print(json.dumps(drop(cluster), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
