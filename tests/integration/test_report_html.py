"""`report --format html` on the fixture campaigns, opened in headless Chromium (Debian's `chromium`).

The page must render its plots (bars with a size on screen, not just markup) and
fetch nothing: every resource is inline.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from support import CHROMIUM, Cli, chromium, probed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report"
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium); it renders the HTML report"
)
# Measures what Chromium laid out: charts, bars with a size, and anything the page tried to load.
PROBE = """<script>
const box = e => e.getBoundingClientRect();
const bars = [...document.querySelectorAll('svg.bar-chart rect.bar')];
document.body.setAttribute('data-probe', JSON.stringify({
  charts: document.querySelectorAll('svg.chart').length,
  barCharts: document.querySelectorAll('svg.bar-chart').length,
  lineCharts: document.querySelectorAll('svg.line-chart').length,
  bars: bars.length,
  drawnBars: bars.filter(b => box(b).width > 1 && box(b).height > 0).length,
  whiskers: document.querySelectorAll('svg g.whisker').length,
  loaded: performance.getEntriesByType('resource').map(r => r.name),
  sections: [...document.querySelectorAll('section')].map(s => s.id)}));
</script>"""


@pytest.fixture
def results(tmp_path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("*.md", "*.yml"))
    return root


def build(results: Path, campaign: str) -> Path:
    done = Cli(results)("report", "--campaign", campaign, "--format", "html")
    path = Path(done.stdout.strip())
    assert path == results / campaign / "report.html" and path.exists()
    return path


def probe(tmp_path: Path, page: Path) -> dict:
    return probed(tmp_path, page, PROBE)


def test_the_page_references_no_remote_resource(results):
    text = build(results, "report-fixture").read_text()
    # The SVG namespace is a name, not a resource; nothing else may point outside the file.
    assert set(re.findall(r"https?://[^\s\"'<>)]+", text)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b", text, re.IGNORECASE)
    assert "@import" not in text and not re.search(r"url\(", text)


@needs_chromium
def test_chromium_draws_the_bar_charts_with_whiskers(results, tmp_path):
    page = build(results, "report-fixture")
    found = probe(tmp_path, page)
    # Throughput: read_bw and read_iops, 3 points × 2 backends; latency: 3 points, 3 percentiles × 2 backends.
    assert found["barCharts"] == 2 + 3
    assert found["bars"] == 2 * 6 + 3 * 6
    assert found["drawnBars"] == found["bars"]
    assert found["whiskers"] >= found["bars"] - 2  # a bar whose repeats are equal has no whisker
    assert [u for u in found["loaded"] if not u.startswith("file:")] == []
    assert found["sections"] == ["summary", "throughput", "latency", "backends", "flags", "provenance"]


@needs_chromium
def test_telemetry_becomes_time_series_and_a_screenshot_renders(results, tmp_path):
    page = build(results, "fio-tmpfs")
    found = probe(tmp_path, page)
    assert "telemetry" in found["sections"]
    assert found["lineCharts"] >= 4
    shot = tmp_path / "report.png"
    done = chromium(tmp_path, "--window-size=1280,2400", f"--screenshot={shot}", page.as_uri())
    assert shot.exists(), done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    try:
        from PIL import Image
    except ImportError:
        return
    colours = Image.open(shot).convert("RGB").getcolors(1 << 24)
    blue = sum(n for n, (r, g, b) in colours if abs(r - 0x42) < 8 and abs(g - 0x69) < 8 and abs(b - 0xD0) < 8)
    assert blue > 2000, "the first backend's colour is hardly on screen: the charts did not render"
