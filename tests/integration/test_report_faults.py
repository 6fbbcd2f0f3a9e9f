"""Faulted runs on the report, the HTML page (opened in headless Chromium) and report.compare, from the files of
real faulted campaigns (tests/fixtures/report_faults/README.md says how they were made): their samples are made
again here from those files (`./lab results.reparse --write`, the code that made them as the runs ended), so the
figures on the page are the parsers' of today, never stored numbers.

    report-faults   fio on 3 simulated hosts, gpu02's link down from 8 s to 13 s; on an RBD image and on CephFS
    osd-stop        fio on one host's RBD image, the lab's one OSD stopped at 10 s and started again at 30 s
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from support import CHROMIUM, Cli, probed

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report_faults"
CAMPAIGNS = ("report-faults", "osd-stop")
# What Chromium laid out of the faults section: its charts, their lines and marks, the figures' cells.
PROBE = """<script>
const section = document.querySelector('section#faults');
const box = e => e.getBoundingClientRect();
const charts = section ? [...section.querySelectorAll('svg.line-chart')] : [];
document.body.setAttribute('data-probe', JSON.stringify({
  runs: section ? section.querySelectorAll('details').length : 0,
  charts: charts.length,
  drawnCharts: charts.filter(c => box(c).width > 100 && box(c).height > 100).length,
  lines: charts.map(c => [...c.querySelectorAll('path.line')].map(p => p.dataset.series)),
  marks: charts.map(c => [...c.querySelectorAll('line.mark')].filter(m => box(m).height > 20).length),
  markLabels: charts.map(c => [...c.querySelectorAll('text.mark-label')].map(t => t.textContent)),
  cells: section ? [...section.querySelectorAll('table.faults tr')].map(r => [...r.cells].map(c => c.textContent)) : [],
  loaded: performance.getEntriesByType('resource').map(r => r.name)}));
</script>"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """The fixture campaigns' files, their samples made again from them."""
    root = tmp_path_factory.mktemp("faults") / "results"
    for campaign in CAMPAIGNS:
        shutil.copytree(FIXTURES / campaign, root / campaign)
        done = Cli(root)("results.reparse", "--campaign", campaign, "--write", check=False)
        assert "Traceback" not in done.stderr, done.stderr
        assert (root / campaign / "samples.jsonl").exists(), done.stdout + done.stderr
    return root


def samples(results: Path, campaign: str) -> list[dict]:
    return [json.loads(line) for line in (results / campaign / "samples.jsonl").read_text().splitlines()]


def figure(found: list[dict], metric: str, host: str, after: str | None = None, backend: str | None = None) -> float:
    (value,) = [
        s["value"]
        for s in found
        if s["metric"] == metric
        and s["host"] == host
        and s["params"].get("after") == after
        and backend in (None, s["backend"])
    ]
    return value


def test_the_terminal_report_shows_each_faulted_run_with_its_events_and_figures(results):
    out = Cli(results)("report", "--campaign", "report-faults").stdout
    part = out[out.index("Faulted runs: what the clients felt") :]
    assert part.count("link_down on gpu02 injected at 8.0 s: ok") == 2
    assert part.count("link_down on gpu02 healed at 13.0 s: ok") == 2
    for backend in ("rbd", "cephfs"):
        assert f"seq on {backend}, rep 1" in part
    header = next(line for line in part.splitlines() if "figure" in line and "gpu01" in line)
    assert re.search(r"gpu01 .* gpu02 .* gpu03 .* all hosts", header), header
    # The sparkline of all hosts' rate, a character a second, a ^ under the seconds of the injection and of the
    # heal, 5 s apart.
    lines = part.splitlines()
    sparks = [i for i, line in enumerate(lines) if re.fullmatch(r"\s*[▁▂▃▄▅▆▇█]{15,}\s*", line)]
    assert len(sparks) == 2 and lines[sparks[0] - 1].strip() == "read_bw of all hosts, a character 1 s:"
    assert lines[sparks[0] + 1].strip() == "^    ^", lines[sparks[0] + 1]


def test_the_page_draws_each_faulted_run_with_its_faults_marked(results, tmp_path):
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium); it renders the HTML report")
    found = {}
    for campaign in CAMPAIGNS:
        page = Path(Cli(results)("report", "--campaign", campaign, "--format", "html").stdout.strip())
        found[campaign] = probed(tmp_path, page, PROBE)
    link, osd = found["report-faults"], found["osd-stop"]

    # Three hosts and all of them on each backend; the cluster felt nothing, so its chart is left out.
    assert link["runs"] == 2 and link["charts"] == link["drawnCharts"] == 2
    assert link["lines"] == [["gpu01", "gpu02", "gpu03", "all hosts"]] * 2
    assert link["marks"] == [2, 2] and link["markLabels"][0] == ["link_down injected", "link_down healed"]
    head, *rows = link["cells"][:11]
    assert head == ["figure", "gpu01", "gpu02", "gpu03", "all hosts"]
    by_label = {row[0]: row[1:] for row in rows}
    rbd = samples(results, "report-faults")
    # gpu02 stopped while its link was down: its floor is 0 % of its baseline, as the samples say; the page shows the
    # sample's figure.
    assert figure(rbd, "floor_pct", "gpu02", backend="rbd") == 0.0 and by_label["floor, % of baseline"][1] == "0.0 %"
    assert by_label["errors the clients saw"] == ["0", "0", "0", "0"]

    # One OSD stopped: the rate and the cluster's OSDs, both with the injection, the heal, and on the cluster's
    # chart the moment it was as healthy as before.
    assert osd["runs"] == 1 and osd["charts"] == osd["drawnCharts"] == 2
    assert osd["lines"] == [["gpu01"], ["OSDs up", "OSDs in", "objects degraded"]]
    assert osd["markLabels"][0] == ["osd_stop injected", "osd_stop healed"]
    assert osd["markLabels"][1] == ["osd_stop injected", "osd_stop healed", "as healthy as before"]
    assert osd["marks"] == [2, 3]
    cells = {row[0]: row[1] for row in osd["cells"][1:]}
    stopped = samples(results, "osd-stop")
    assert cells["floor, % of baseline"] == "0.0 %" and figure(stopped, "floor_pct", "gpu01") == 0.0
    healthy = figure(stopped, "time_to_health_ok", "*")
    assert 20 < healthy < 120 and cells["cluster back to its health"].endswith(" s")
    assert [u for page in found.values() for u in page["loaded"] if not u.startswith("file:")] == []


def test_two_backends_recovery_is_compared_with_the_rules_syntax(results):
    """RBD against CephFS, one campaign: every time_to_90pct they both have is judged by the rule."""
    cli = Cli(results)
    done = cli(
        "report.compare", "rbd", "cephfs", "--campaign", "report-faults", "--rule", "time_to_90pct <= +20%",
        "--format", "json", check=False,
    )  # fmt: skip
    document = json.loads(done.stdout)
    checks = [(p, c) for p in document["points"] for c in p["checks"]]
    assert checks and {p["metric"].split("{")[0] for p, _ in checks} == {"time_to_90pct"}
    for point, check in checks:
        a, b = point["baseline"]["median"], point["candidate"]["median"]
        if b is None:  # CephFS never got back where RBD did: lost
            assert check["outcome"] == "failed" and point["lost"]
        elif a == 0:
            assert check["outcome"] == ("failed" if b > 0 else "passed"), check
        else:
            assert check["outcome"] == ("failed" if b / a - 1 > 0.2 else "passed"), check
    assert done.returncode == (1 if document["regressions"] else 0)
