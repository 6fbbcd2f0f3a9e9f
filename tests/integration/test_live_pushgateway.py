"""Live figures pushed to a real Prometheus Pushgateway (Debian's prometheus-pushgateway, started here on a free
loopback port), scraped back as Prometheus would, and deleted from it when the run ends."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from iolab.drive import live_metrics

GATEWAY = shutil.which("prometheus-pushgateway")
pytestmark = pytest.mark.skipif(
    GATEWAY is None, reason="Debian's prometheus-pushgateway is not installed (apt-get install prometheus-pushgateway)"
)


@pytest.fixture
def gateway():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [GATEWAY, f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def scrape(url: str) -> dict[tuple[str, str], float]:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    return {
        (s.name, s.labels.get("host", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("iolab_live_")
    }


def test_the_figures_reach_the_gateway_while_the_run_is_in_flight(gateway):
    exporter = live_metrics.Exporter("pushgateway", gateway)
    exporter.follow("quick", "abc123", "tmpfs", "seq")
    exporter.export({"gpu01": {"read_Bps": 3e9, "iops": 45000.0, "cores": 2.0}})
    found = scrape(gateway)
    assert found[("iolab_live_read_bytes_per_second", "gpu01")] == 3e9
    assert found[("iolab_live_iops", "gpu01")] == 45000.0
    exporter.clear()
    assert scrape(gateway) == {}
    assert not exporter.failed
