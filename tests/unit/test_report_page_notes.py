"""The HTML page at a glance (issue 37, structure 8): a flag's name in its cell and its reason once, as a note
under the table that the cell links to; "who wins" without the search's single probes; chart names whole.

On a store shaped like the main job's (tests/report_stores.py: the real fio runs of tests/fixtures/report and
both backends' accelerator searches with every kind of flag). How wide Chromium lays the page out is
tests/integration/test_report_html.py's.
"""

from __future__ import annotations

import re
from html import unescape

import pytest
import report_stores

from iolab.measures import host_flags, validity, who_wins
from iolab.report import html as report_html
from iolab.report import svg
from iolab.report import tables as report


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    return report_stores.main_job(tmp_path_factory.mktemp("page") / "results")


@pytest.fixture(scope="module")
def page(store) -> str:
    return report_html.build(store)


def section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start : page.index("</section>", start)]


def cells(html: str) -> list[str]:
    """The text of each table cell of `html`."""
    return [unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)]


def notes(html: str) -> dict[str, str]:
    """The notes under the tables of `html`: anchor → text."""
    return {a: unescape(t) for a, t in re.findall(r'<li id="([^"]+)" value="\d+">(.*?)</li>', html, re.S)}


def test_the_verdicts_flags_are_names_in_the_cell_and_their_reasons_notes_under_the_table(store, page):
    verdict = section(page, "verdict")
    table, under = verdict.split("</table>", 1)
    found = notes(under)
    samples = store.samples()
    verdicts = validity.assess(samples)
    rows = report.verdict_rows(samples)
    flags = [f for r in rows for f in report.answer_flags(r, verdicts)]
    # The store's answers carry the search's flags and their probes' runs potential_caching.
    assert {name for name, _ in flags} >= {"host-bound", "disturbed", host_flags.POTENTIAL_CACHING}
    for name, why in flags:
        assert why not in " ".join(cells(table)), f"{name}'s reason is in a cell"
        anchor = next(a for a, text in found.items() if text.endswith(why))
        cell = next(c for c in re.findall(r"<td class=\"num fed\">.*?</td>", table, re.S) if f'href="#{anchor}"' in c)
        assert name in unescape(re.sub(r"<[^>]+>", "", cell))
    assert len(found) == len(set(found.values())) == len({why for _, why in flags})  # each reason once
    assert set(re.findall(r'href="#([^"]+)"', table)) == set(found)


def test_the_flags_table_names_each_flag_and_says_each_reason_once_under_it(store, page):
    flags = section(page, "flags")
    table, under = flags.split("</table>", 1)
    found = notes(under)
    rows = report.flag_rows(store.samples())
    assert not any(r["reason"] and r["reason"] in " ".join(cells(table)) for r in rows)
    assert sorted(set(found.values())) == sorted(found.values())
    assert {re.sub(r"<[^>]+>", "", f) for f in re.findall(r'<span class="badge[^"]*">(.*?)</span>', table)} == {
        r["flag"] for r in rows
    }
    assert set(re.findall(r'href="#([^"]+)"', table)) == set(found)


def test_the_header_and_the_flags_table_name_a_searchs_flags_by_their_short_names(page):
    """A search's flags are sentences in its answer's metadata, which validity reads as flag names: the page
    names them as the verdict does (host-bound, disturbed), their sentences in the notes."""
    header = page[page.index("<header>") : page.index("</header>")]
    flagged = unescape(re.search(r"flagged: (.*?) \(see", header).group(1))
    assert "1 host-bound" in flagged and "1 disturbed" in flagged and "not the storage" not in flagged
    table = section(page, "flags").split("</table>", 1)[0]
    badges = {re.sub(r"<[^>]+>", "", b) for b in re.findall(r'<span class="badge[^"]*">(.*?)</span>', table)}
    assert {"host-bound", "disturbed"} <= badges and not any(" " in b for b in badges)


def test_who_wins_leaves_out_the_searchs_single_probes_and_says_how_many(store, page):
    rows = who_wins.summarize(report.figures(store.samples()))
    single = [k for k, contenders in who_wins.contests(rows).items() if len(contenders) < 2]
    assert len(single) == 9  # the probes at 1, 2 and 4 accelerators, measured once on a backend (3 metrics each)
    wins = section(page, "summary")
    assert "resnet50-h100" not in wins and "n=1" not in wins
    assert "Left out: 9 points measured once on a backend" in wins
    assert wins.count("<tr>") == 1 + len(who_wins.winners(rows)) == 1 + 9  # the header, then the fio points


def test_a_tilted_name_under_a_bar_chart_starts_inside_the_chart():
    """The page cut the first tilted names at the chart's left edge (`0 accelerators=1`)."""
    names = [f"resnet50-h100 accelerators={n}" for n in (1, 2, 3, 4, 6, 7, 8)]
    chart = svg.bar_chart(names, ["tmpfs"], {(n, "tmpfs"): svg.Bar(1.0) for n in names}, "samples/s")
    for x, text in re.findall(r'translate\(([\d.]+),[\d.]+\) rotate\(-30\)" text-anchor="end">([^<]+)<', chart):
        assert float(x) - 0.87 * svg._text_width(text) >= 0, text  # where its first letter is drawn
    assert all(f">{name}<" in chart for name in names)
