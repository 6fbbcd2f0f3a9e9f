"""`report --format html` on the fixture campaigns, opened in headless Chromium (Debian's `chromium`).

The page must render its plots (bars with a size on screen, not just markup) and
fetch nothing: every resource is inline.
"""

from __future__ import annotations

import html
import json
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


# Measures how wide Chromium laid the page out: what scrolls sideways, and each element whose right edge passes
# the right edge of <main> (the page's column), by tag, class and the start of its text.
WIDTH = """<script>
const edge = document.querySelector('main').getBoundingClientRect().right + 1;
const wide = [...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > edge);
document.body.setAttribute('data-probe', JSON.stringify({
  window: window.innerWidth, scroll: document.documentElement.scrollWidth,
  wide: wide.map(e => `${e.tagName}.${e.className} ${(e.textContent || '').trim().slice(0, 50)}`),
  notes: [...document.querySelectorAll('ol.footnotes li')].map(li => li.id),
  cites: [...document.querySelectorAll('sup a')].map(a => a.getAttribute('href'))}));
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


def probe(tmp_path: Path, page: Path, script: str = PROBE, *args: str) -> dict:
    return probed(tmp_path, page, script, *args)


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


@needs_chromium
def test_the_main_jobs_page_fits_a_1280_px_window_its_flags_noted_under_their_tables(tmp_path):
    """Issue 37, structure 8: the verdict's flags wrote their sentences into a cell that does not wrap, and the
    page ran 55 px past a 1280-px window (1,335 px wide on this store before). A store shaped like the main
    job's (tests/report_stores.py: real fio runs, both backends' searches, every kind of flag)."""
    import report_stores

    from iolab.report import html as report_html

    page = report_html.write(report_stores.main_job(tmp_path / "results"))
    found = probe(tmp_path, page, WIDTH, "--window-size=1280,2000")
    shot = tmp_path / "report-1280.png"  # what Chromium drew, kept to look at when this fails
    if found["scroll"] > found["window"] or found["wide"]:
        chromium(tmp_path, "--window-size=1280,2000", f"--screenshot={shot}", page.as_uri())
    assert found["window"] == 1280
    assert found["scroll"] <= 1280 and found["wide"] == [], f"{found} (screenshot: {shot})"
    # Every mark links to a note of its table, and every note is cited.
    assert found["notes"] and {f"#{note}" for note in found["notes"]} == set(found["cites"])
    assert {note.split("-note-")[0] for note in found["notes"]} == {"verdict", "flags"}


# --- report.history's page ------------------------------------------------------------------------

HISTORY_PROBE = """<script>
const box = e => e.getBoundingClientRect();
const points = [...document.querySelectorAll('svg.time-chart g.point')];
document.body.setAttribute('data-probe', JSON.stringify({
  timeCharts: document.querySelectorAll('svg.time-chart').length,
  points: points.length,
  drawnPoints: points.filter(p => box(p).width > 1 && box(p).height > 1).length,
  rings: document.querySelectorAll('svg g.point.regression circle.ring').length,
  shapes: [...new Set(points.map(p => p.querySelector('rect, path, circle:not(.ring)').tagName))],
  regressions: [...document.querySelectorAll('ul.regressions li')].map(li => li.textContent),
  loaded: performance.getEntriesByType('resource').map(r => r.name)}));
</script>"""


def three_months(results: Path) -> None:
    """Campaign 'vendors' a month apart on backends a and b; in the third, a reads 20 % slower."""
    from iolab.results import store as results_store
    from support import record, sample

    for name, day, a in (("vendors.20261101T000000Z", "2026-10-01", 4e9), ("vendors-nov", "2026-11-01", 4e9),
                         ("vendors", "2026-12-01", 3.2e9)):  # fmt: skip
        store = results_store.open_store(results, name)
        for backend, value in (("a", a), ("b", 2e9)):
            for rep, spread in enumerate((0.99, 1.01), 1):
                run_id = f"{name}-{backend}-{rep}"
                store.add_samples(
                    [sample(name.split(".")[0], run_id, value * spread, day=day, backend=backend, repetition=rep)]
                )
                store.add_run_records([record(run_id)])


@needs_chromium
def test_chromium_draws_the_history_with_backend_markers_and_the_regression_ringed(tmp_path):
    results = tmp_path / "results"
    three_months(results)
    done = Cli(results)("report.history", "--metric", "read_bw", "--format", "html")
    page = Path(done.stdout.strip())
    assert page == results / "history.html"
    text = page.read_text()
    assert set(re.findall(r"https?://[^\s\"'<>)]+", text)) == {"http://www.w3.org/2000/svg"}
    probed = tmp_path / "probe-history.html"
    probed.write_text(text.replace("</body>", HISTORY_PROBE + "</body>"))
    dom = chromium(tmp_path, "--dump-dom", probed.as_uri()).stdout
    found = json.loads(html.unescape(re.search(r"data-probe=\"([^\"]*)\"", dom).group(1)))
    assert found["timeCharts"] == 1 and found["points"] == 6 and found["drawnPoints"] == 6
    assert sorted(found["shapes"]) == ["circle", "rect"]  # backend a's marker and b's
    assert found["rings"] == 1 and len(found["regressions"]) == 1
    assert found["regressions"][0].startswith("read_bw · seq · a: vendors (2026-12-01)")
    assert "-20.0% breaks read_bw >= -5%" in found["regressions"][0]
    assert [u for u in found["loaded"] if not u.startswith("file:")] == []


# --- every page kind at 1280 px (issue 44, 9) -------------------------------------------------------------------


def calibrated(root: Path) -> Path:
    """The main job with its answers given in a calibrated CPU too (a bench.calibrate profile of resnet50, and the
    profile each answer recorded): the answer's cell carries `= 3.7 AMD EPYC 7763 64-Core Processor (calibrated
    …)`, which made the page 1,460 px wide at 1280 (its last column cut off)."""
    import dataclasses

    import report_stores

    from iolab.campaign import profiles
    from iolab.measures.samples import ResultStore

    store = report_stores.main_job(root)
    device = "AMD EPYC 7763 64-Core Processor"
    directory = profiles.profiles_dir(root)
    directory.mkdir(parents=True, exist_ok=True)
    document = {"kind": profiles.PROFILE_KIND, "host": "cpu01", "measured_at": "2026-11-28T10:00:00Z",
                "entries": [{"model": "resnet50", "batch": 32, "step_s": 0.0112, "scale": "full"}],
                "device": {"device": "cpu", "name": device, "count": 1}}  # fmt: skip
    (directory / "cpu01-2026-11-28T100000Z.json").write_text(json.dumps(document))
    recorded = {"step_times": {"32": 0.0112}, "calibrated_at": "2026-11-28T10:00:00Z", "scale": "full",
                "device": device, "model": "resnet50"}  # fmt: skip
    samples = [
        dataclasses.replace(
            s,
            params={**s.params, "accelerator": {"type": "h100", "model": "resnet50"}},
            metadata={**s.metadata, "profile": recorded},
        )
        if s.metric == "accelerators_fed"
        else s
        for s in store.samples()
    ]
    store.samples_path.unlink()
    store.add_samples(samples)
    return ResultStore(root, store.dir.name).dir


@needs_chromium
@pytest.mark.parametrize("kind", ["calibrated", "kv-cache", "faults", "fio-tmpfs", "history"])
def test_every_page_kind_fits_a_1280_px_window(tmp_path, monkeypatch, kind):
    """Nothing scrolls sideways and nothing passes the page's column at 1280 px: a calibrated campaign's answer
    wraps in its cell, a faulted run's table keeps to its box."""
    import report_stores

    from iolab.measures.samples import ResultStore
    from iolab.report import history_html, history_series
    from iolab.report import html as report_html
    from iolab.store import reparse

    root = tmp_path / "results"
    monkeypatch.setenv("IOLAB_RESULTS", str(root))
    if kind == "calibrated":
        page = report_html.write(ResultStore(root, calibrated(root).name))
        assert "AMD EPYC 7763 64-Core Processor (calibrated 2026-11-28" in page.read_text()
    elif kind == "kv-cache":
        page = report_html.write(report_stores.kv_cache(root))
    elif kind == "faults":
        shutil.copytree(FIXTURES.parent / "report_faults" / "report-faults", root / "report-faults")
        assert reparse.check(ResultStore(root, "report-faults"), write=True)[1]
        page = report_html.write(ResultStore(root, "report-faults"))
    elif kind == "fio-tmpfs":
        shutil.copytree(FIXTURES / "fio-tmpfs", root / "fio-tmpfs")
        page = report_html.write(ResultStore(root, "fio-tmpfs"))
    else:
        report_stores.main_job(root)
        shutil.copytree(FIXTURES / "fio-tmpfs", root / "fio-tmpfs")
        found, rules = history_series.run(root, [], None, None, [], None)
        page = history_html.write(found, rules, root)
    found = probe(tmp_path, page, WIDTH, "--window-size=1280,2000")
    shot = tmp_path / f"{kind}-1280.png"  # what Chromium drew, kept to look at when this fails
    if found["scroll"] > found["window"] or found["wide"]:
        chromium(tmp_path, "--window-size=1280,2000", f"--screenshot={shot}", page.as_uri())
    assert found["window"] == 1280
    assert found["scroll"] <= 1280 and found["wide"] == [], f"{found} (screenshot: {shot})"
