"""The running run's throughput, read from its hosts while Ansible's task still runs (see iolab.host.live).

`Watch(inventory, hosts, run_dirs)`, a context manager around a run's playbook, reads each host's
RUN_DIR/live.json every `interval` seconds in a thread of its own: a local connection's from the file
system, any other host's over SFTP on one SSH connection per host (Fabric, as `lab.ping` reaches hosts),
opened once and kept for the run — no shell, no command per read. `text()` is the line the campaign's
live table shows under its hosts, all hosts added up:

    now: read 2.3 GiB/s, write 0 B/s, 1.9 cores (2 of 2 hosts)

(with `, 61.4k IOPS` where fio says its own rate, `, 812 samples/s, AU 93 %` for a
loader, `, this run about 2 min 10 s to go` for a calibration: its slowest host's guess). `export`, where
$IOLAB_LIVE_METRICS names a destination, gets each round's figures too
(iolab.drive.live_metrics: Prometheus). A host that does not answer, or has no live.json (the tool not started yet, or
already ended), is left out of the sum; a host that failed to connect is tried again after
`retry` seconds. Nothing here can fail or slow a run: the figures are for the person
watching, never recorded.
"""

from __future__ import annotations

import json
import os
import posixpath
import threading
import time
from collections.abc import Callable
from typing import Any

from iolab.campaign.hosts import Inventory
from iolab.progress import duration
from iolab.shared.protocol import LIVE_FILE
from iolab.units import human


class Watch:
    def __init__(
        self,
        inventory: Inventory,
        hosts: list[str],
        run_dir: dict[str, str],
        interval: float = 2.0,
        retry: float = 30,
        export: Callable[[dict[str, dict[str, Any]]], None] | None = None,
    ):
        self.inventory = inventory
        self.export = export  # each round's figures, per host, also go there (iolab.drive.live_metrics)
        self.hosts = hosts
        self.run_dir = run_dir  # host → its RUN_DIR
        self.interval = interval
        self.retry = retry
        self.figures: dict[str, dict[str, Any]] = {}
        self._connections: dict[str, Any] = {}
        self._failed_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="live", daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(10)
        for connection in self._connections.values():
            try:
                connection.close()
            except Exception:  # noqa: BLE001, S110 - closing what may already be gone
                pass

    def text(self) -> str:
        """'now: read 2.3 GiB/s, write 0 B/s, 1.9 cores (2 of 2 hosts)', or '' before any host has figures."""
        figures = list(self.figures.values())
        if not figures:
            return ""
        read = sum(f.get("read_Bps", 0.0) for f in figures)
        write = sum(f.get("write_Bps", 0.0) for f in figures)
        cores = sum(f.get("cores", 0.0) for f in figures)
        iops = sum(f.get("iops", 0.0) for f in figures)
        rate = sum(f.get("samples_per_s", 0.0) for f in figures)
        au = [f["au_pct"] for f in figures if "au_pct" in f]
        eta = [f["eta_s"] for f in figures if "eta_s" in f]  # a calibration's, from its steps timed so far
        return (
            f"now: read {human(read, 'B/s')}, write {human(write, 'B/s')}, "
            + (f"{human(iops, 'IOPS')}, " if iops else "")
            + (f"{human(rate, 'samples/s')}, AU {sum(au) / len(au):.0f} %, " if au else "")
            + f"{cores:.1f} cores "
            f"({len(figures)} of {len(self.hosts)} host{'s' if len(self.hosts) != 1 else ''})"
            + (f", this run about {duration(max(eta))} to go" if eta else "")
        )

    # -- the thread
    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            for host in self.hosts:
                if self._stop.is_set():
                    return
                found = self._read(host)
                if found is None:
                    self.figures.pop(host, None)
                else:
                    self.figures[host] = found
            if self.export is not None:
                self.export(dict(self.figures))

    def _read(self, host: str) -> dict[str, Any] | None:
        hostvars = self.inventory.hostvars.get(host, {})
        try:
            if hostvars.get("ansible_connection") == "local":
                return _first_live(self.run_dir[host], os.listdir, open)
            sftp = self._sftp(host, hostvars)
            return None if sftp is None else _first_live(self.run_dir[host], sftp.listdir, sftp.open)
        except Exception:  # noqa: BLE001 - a host not answering is left out of the sum, never an error
            self._drop(host)
            return None

    def _sftp(self, host: str, hostvars: dict[str, Any]) -> Any:
        if host in self._connections:
            return self._connections[host].sftp()
        if time.monotonic() - self._failed_at.get(host, -self.retry) < self.retry:
            return None
        from iolab.drive.direct import connection

        conn = connection(host, hostvars, timeout=5)
        conn.open()
        self._connections[host] = conn
        return conn.sftp()

    def _drop(self, host: str) -> None:
        self._failed_at[host] = time.monotonic()
        conn = self._connections.pop(host, None)
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001, S110
                pass


def _first_live(run_dir: str, listdir: Callable[[str], list[str]], opener: Callable[..., Any]) -> dict[str, Any] | None:
    """RUN_DIR/live.json, or a phase's (checkpoint: RUN_DIR/write/live.json) when the run has none: one read
    while the tool runs, a listing only when that read finds nothing."""
    found = _load(posixpath.join(run_dir, LIVE_FILE), opener)
    if found is not None:
        return found
    try:
        names = listdir(run_dir)
    except OSError:
        return None  # the run's directory is not there yet
    for name in sorted(n for n in names if "." not in n):
        found = _load(posixpath.join(run_dir, name, LIVE_FILE), opener)
        if found is not None:
            return found
    return None


def _load(path: str, opener: Callable[..., Any]) -> dict[str, Any] | None:
    try:
        with opener(path) as handle:
            return json.loads(handle.read())
    except (OSError, ValueError):
        return None
