"""The running run's live figures for Prometheus: a Pushgateway, or node_exporter's textfile collector.

Off by default; on where the controller's environment names a destination:

    IOLAB_LIVE_METRICS=textfile:/var/lib/prometheus/node-exporter/iolab.prom
    IOLAB_LIVE_METRICS=pushgateway:http://127.0.0.1:9091

While a run is in flight, each time iolab.drive.live reads its hosts (every 2 s) the figures of the `now:`
line go there, per host, as gauges labelled with the run (campaign, run_id, backend, workload, host):

    iolab_live_read_bytes_per_second    iolab_live_write_bytes_per_second    iolab_live_iops
    iolab_live_samples_per_second       iolab_live_au_percent                iolab_live_cores

(a figure a tool does not give is left out: AU only for emulated accelerators, IOPS where fio says
it). When the run ends they are taken away (the file removed, the group deleted from the gateway),
so a scrape sees figures only while a run is in flight. Like the live line, nothing here is recorded
and nothing can fail or slow a run: a destination that fails is said once on stderr, then left alone.
Written with prometheus-client (its text format, atomic textfile writes, the Pushgateway protocol).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from iolab.errors import UserError
from iolab.units import printable

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

ENV = "IOLAB_LIVE_METRICS"
JOB = "iolab"
LABELS = ("campaign", "run_id", "backend", "workload", "host")
# live.json's key → (gauge, help)
FIGURES = {
    "read_Bps": ("iolab_live_read_bytes_per_second", "bytes read per second now (iolab's live line)"),
    "write_Bps": ("iolab_live_write_bytes_per_second", "bytes written per second now"),
    "iops": ("iolab_live_iops", "I/O operations per second now, as fio says"),
    "samples_per_s": ("iolab_live_samples_per_second", "samples a loader delivers per second now"),
    "au_pct": ("iolab_live_au_percent", "accelerator utilisation of the emulated accelerators now, %"),
    "cores": ("iolab_live_cores", "CPU cores the tool uses now"),
}


def destination() -> tuple[str, str] | None:
    """('textfile', PATH) or ('pushgateway', URL) from $IOLAB_LIVE_METRICS; None when unset (off)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    kind, _, where = value.partition(":")
    if kind not in ("textfile", "pushgateway") or not where:
        raise UserError(
            f"${ENV}: {printable(value)!r} is neither textfile:PATH (node_exporter's textfile collector, a .prom "
            "file) nor pushgateway:URL (http://HOST:9091); unset it to keep live figures to the terminal"
        )
    if kind == "textfile" and not where.endswith(".prom"):
        raise UserError(f"${ENV}: node_exporter's textfile collector reads only *.prom files, not {where!r}")
    return kind, where


class Exporter:
    """One destination, fed by iolab.drive.live.Watch after each read of the hosts, for the run `labels` names."""

    def __init__(self, kind: str, where: str):
        self.kind, self.where = kind, where
        self.run: dict[str, str] = {}
        self.failed = False

    def follow(self, campaign: str, run_id: str, backend: str, workload: str) -> None:
        """The run now in flight (a batch's runs follow one another under one watch)."""
        self.clear()
        self.run = {"campaign": campaign, "run_id": run_id, "backend": backend, "workload": workload}

    def export(self, figures: dict[str, dict[str, Any]]) -> None:
        """Each host's figures (live.json's keys) as gauges; a host without figures now is left out. prometheus-client
        is imported here, where figures are sent (≈ 0.09 s): a command without a destination never loads it."""
        from prometheus_client import CollectorRegistry, Gauge

        registry = CollectorRegistry()
        gauges = {key: Gauge(name, text, LABELS, registry=registry) for key, (name, text) in FIGURES.items()}
        for host, found in figures.items():
            for key, gauge in gauges.items():
                if isinstance(found.get(key), int | float):
                    gauge.labels(**self.run, host=host).set(float(found[key]))
        self._send(lambda: self._write(registry))

    def clear(self) -> None:
        """No run in flight: its figures go (the file removed, the gateway's group deleted)."""
        if not self.run:
            return
        if self.kind == "textfile":
            self._send(lambda: os.remove(self.where) if os.path.exists(self.where) else None)
        else:
            from prometheus_client import delete_from_gateway

            self._send(lambda: delete_from_gateway(self.where, job=JOB, grouping_key=self._group(), timeout=5))
        self.run = {}

    def _group(self) -> dict[str, str]:
        return {"campaign": self.run.get("campaign", ""), "run_id": self.run.get("run_id", "")}

    def _write(self, registry: CollectorRegistry) -> None:
        from prometheus_client import push_to_gateway, write_to_textfile

        if self.kind == "textfile":
            write_to_textfile(self.where, registry)  # written aside and renamed: a scrape never reads half
        else:
            push_to_gateway(self.where, job=JOB, registry=registry, grouping_key=self._group(), timeout=5)

    def _send(self, action: Any) -> None:
        if self.failed:
            return
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - a destination that fails never fails the run
            self.failed = True
            print(
                f"iolab: live figures to {self.kind} {printable(self.where)} failed ({printable(str(exc))}); "
                "not sent again in this command",
                file=sys.stderr,
            )


def exporter() -> Exporter | None:
    """The exporter $IOLAB_LIVE_METRICS asks for, or None (off)."""
    found = destination()
    return None if found is None else Exporter(*found)
