"""Live figures to Prometheus (drive.live_metrics): node_exporter's textfile, read back with prometheus-client's own
parser; the live watch feeding it (iolab.drive.live.Watch on a local host's live.json); a destination that fails."""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from iolab.campaign.hosts import Inventory
from iolab.drive import live, live_metrics
from iolab.errors import UserError
from iolab.shared.protocol import LIVE_FILE


def scraped(path) -> dict[tuple[str, str], float]:
    """(metric name, host) → value, as Prometheus would read the file."""
    return {
        (s.name, s.labels["host"]): s.value
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
    }


def test_the_textfile_holds_each_hosts_figures_while_the_run_is_in_flight(tmp_path):
    out = tmp_path / "iolab.prom"
    exporter = live_metrics.Exporter("textfile", str(out))
    exporter.follow("quick", "abc123", "tmpfs", "seq")
    exporter.export(
        {"gpu01": {"read_Bps": 2.5e9, "write_Bps": 0.0, "iops": 2400.0, "cores": 1.5}, "gpu02": {"read_Bps": 1e9}}
    )
    found = scraped(out)
    assert found[("iolab_live_read_bytes_per_second", "gpu01")] == 2.5e9
    assert found[("iolab_live_iops", "gpu01")] == 2400.0
    assert found[("iolab_live_read_bytes_per_second", "gpu02")] == 1e9
    assert ("iolab_live_au_percent", "gpu01") not in found  # a figure the tool does not give is left out
    labels = next(s.labels for f in text_string_to_metric_families(out.read_text()) for s in f.samples)
    assert labels == {"campaign": "quick", "run_id": "abc123", "backend": "tmpfs", "workload": "seq", "host": "gpu01"}
    exporter.clear()  # the run ended
    assert not out.exists()


def test_the_live_watch_feeds_the_exporter(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LIVE_FILE).write_text(json.dumps({"read_Bps": 1e8, "samples_per_s": 800.0, "au_pct": 93.0}))
    out = tmp_path / "iolab.prom"
    exporter = live_metrics.Exporter("textfile", str(out))
    exporter.follow("quick", "r1", "tmpfs", "loader")
    inventory = Inventory(tmp_path, ("localhost",), {}, {"localhost": {"ansible_connection": "local"}})
    with live.Watch(inventory, ["localhost"], {"localhost": str(run_dir)}, interval=0.05, export=exporter.export):
        deadline = time.monotonic() + 20
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert scraped(out)[("iolab_live_au_percent", "localhost")] == 93.0


def test_a_destination_that_fails_is_said_once_and_never_fails_the_run(tmp_path, capsys):
    exporter = live_metrics.Exporter("textfile", str(tmp_path / "no such dir" / "iolab.prom"))
    exporter.follow("quick", "r1", "tmpfs", "seq")
    exporter.export({"h": {"read_Bps": 1.0}})
    exporter.export({"h": {"read_Bps": 2.0}})
    assert capsys.readouterr().err.count("live figures to textfile") == 1


@pytest.mark.parametrize(
    "value, why",
    [("prometheus:9091", "neither textfile:PATH"), ("textfile:/tmp/iolab.txt", r"reads only \*\.prom files")],
)
def test_a_destination_iolab_cannot_use_is_refused(monkeypatch, value, why):
    monkeypatch.setenv(live_metrics.ENV, value)
    with pytest.raises(UserError, match=why):
        live_metrics.exporter()


def test_off_by_default(monkeypatch):
    monkeypatch.delenv(live_metrics.ENV, raising=False)
    assert live_metrics.exporter() is None
