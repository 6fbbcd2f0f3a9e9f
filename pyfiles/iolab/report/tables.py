"""Compare backends side by side: median and spread over repetitions, in human units.

    ./lab report                     the latest campaign: accelerators fed, who wins, then every figure
    ./lab report --format html       one self-contained page with plots (report_html.py)
    ./lab report --format csv        every sample and its flags, for a spreadsheet
    ./lab report --units si          bytes in decimal units (GB/s); the default, iec, is binary (GiB/s)

Tables and the HTML page give each row (a metric at one point) one unit, chosen by
its largest figure and named in the row's header, `read_bw (GiB/s)`; the cells are
numbers in it. `--units` picks the prefixes of byte figures: `iec` (the default,
as iolab always reported them: KiB, MiB, GiB, TiB, powers of 1024) or `si` (kB, MB,
GB, TB, powers of 1000, as storage vendors quote them). The CSV and JSON exports
keep canonical units (`value` in the `unit` column: B/s, IOPS, ns, ...) whatever
`--units` says.
"""

from __future__ import annotations

import csv
import dataclasses
import getpass
import io
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.text import Text

from iolab.campaign import gpus
from iolab.campaign.profiles import side_by_side
from iolab.errors import UserError
from iolab.measures import limits, metrics, validity
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample, parse_line
from iolab.measures.who_wins import contests, summarize, winners
from iolab.report import footnotes, svg
from iolab.report.layout import NUMBER, TEXT, Column, Fitted, cited
from iolab.units import COUNT, printable, significant

AGREEMENT = validity.AGREEMENT
# Unit systems for byte figures: iec (binary, the default) and si (decimal).
UNITS = ("iec", "si")
DEFAULT_UNITS = "iec"
_SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
BYTE_UNITS = ("B", "B/s")


def unit_scale(unit: str, top: float, units: str = DEFAULT_UNITS) -> tuple[float, str]:
    """(divisor, label) that writes figures of `unit` up to `top` in one unit: (1e9, 'GB/s') in si."""
    if units not in UNITS:
        raise UserError(f"unknown units {units!r}; use iec (GiB/s, the default) or si (GB/s)")
    if (units == "si" and unit in BYTE_UNITS) or unit == "Hz":
        return next(((f, p + unit) for f, p in _SI_PREFIXES if abs(top) >= f), (1.0, unit))
    return svg.axis_unit(unit, top)


def number(value: float) -> str:
    """A figure in its row's unit: three significant digits, never in exponent form (1010, not 1.01e+03)."""
    return significant(value)


def plain(text: object) -> Text:
    """A table's cell or title as plain text: never Rich markup (`tm[/x]pfs`), never a terminal control."""
    return Text(printable(str(text)))


def with_unit(metric: str, label: str) -> str:
    """A row's header: the metric and its unit, `read_bw (GiB/s)`; a count's metric alone (`kv_served`)."""
    return f"{metric} ({label})" if label and label != COUNT else metric


def find_store(results: Path, campaign: str | None) -> ResultStore:
    """The named campaign's store, or the one with samples written to last (never a moved-aside one): of those this
    user ran (its ledger's `held_by`, iolab.store.ledger), where there is one, so that another user's campaign on a
    shared controller is not taken for one's own.

    A name is a store's directory under `results`, never a path (`../x`, `/etc`).
    """
    if campaign is not None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", campaign):
            raise UserError(
                f"campaign {campaign!r} is not a campaign name: give the name of a directory in {results} "
                "(letters, digits, '.', '_' and '-'; no path)"
            )
        store = ResultStore(results, campaign)
        if not store.samples_path.exists():
            known = sorted(p.parent.name for p in results.glob("*/samples.jsonl"))
            raise UserError(
                f"no results for campaign {campaign!r} in {results}"
                + (f" (campaigns with results: {', '.join(known)})" if known else "; run `./lab bench.all` first")
            )
        return store
    stores = sorted((p for p in results.glob("*/samples.jsonl") if _own_samples(p)), key=lambda p: p.stat().st_mtime)
    if not stores:
        raise UserError(f"no results in {results} yet; run `./lab bench.all` first")
    mine = [p for p in stores if _ran_by(p.parent) == getpass.getuser()]
    return ResultStore(results, (mine or stores)[-1].parent.name)


def _ran_by(store_dir: Path) -> str | None:
    """The user whose command ran the campaign last (its ledger's `held_by`), None when the store does not say."""
    from iolab.store import ledger

    holder = (ledger.read(store_dir) or {}).get("held_by")
    return holder.get("user") if isinstance(holder, dict) else None


def _own_samples(path: Path) -> bool:
    """Whether a samples file holds a sample of its directory's campaign.

    False for an empty file, and for a store that `bench.all --no-resume` moved aside
    (`results/<campaign>.<UTC time>/`: its samples keep the campaign's own name).
    """
    with path.open("rb") as handle:
        for line in handle:  # the first sample's campaign; a line that is not a sample does not decide
            try:
                data = parse_line(line)
            except ValueError:
                continue
            if isinstance(data, dict) and "campaign" in data:
                return line.endswith(b"\n") and data["campaign"] == path.parent.name
    return False


def point_label(workload: str, setting_label: str) -> str:
    return f"{workload} {setting_label}".strip()


def run_flagged(verdicts: validity.Verdicts, run_ids: list[str]) -> bool:
    """Whether a run has a flag of its own (caching); disagreeing repeats are marked † per metric instead."""
    return any(f.blocking and f.name != validity.REPEATS_DISAGREE for r in run_ids for f in verdicts.of(r))


VERDICT_METRIC = "accelerators_fed"
ANSWERS = (VERDICT_METRIC, "kv_served")  # a search's answer: accelerators fed, KV-cache users or clients served


def figures(samples: list[Sample]) -> list[Sample]:
    """The samples the tables below the verdict compare: all but a search's answer."""
    return [s for s in samples if s.metric not in ANSWERS]


def fed_label(value: float, metadata: dict[str, Any], kind: str = "") -> str:
    """An accelerators_fed answer (iolab.run.accelerators) as it is shown: `6 h100 (6–7)` (the most that held, the
    fewest that failed), `≥ 4 h100 (limited by this host)`, `≥ 8 h100 (the workload's ceiling)`, then its flags
    (⚑); no interval for an answer stored before the search kept one."""
    held, failed, bound = int(value), metadata.get("failed"), metadata.get("bound")
    text = f"{held} {kind}".strip()
    if bound == "host":
        text = f"≥ {text} (limited by this host)"
    elif bound == "ceiling":
        text = f"≥ {text} (the workload's ceiling)"
    elif failed is not None:
        text += f" ({held}–{failed})"
    return text + "".join(f" ⚑ {flag}" for flag in metadata.get("flags", []))


def limit_line(row: dict) -> str:
    """What limited a backend's search, as the first line of its answer (a client verdict says what it measures)."""
    limit = row["limited_by"]
    if not limit:
        return f"{row['backend']} ({row['workload']}): what limited it was not recorded"
    note = " — measures this host, not the storage" if limit["side"] == "client" else ""
    return f"{row['backend']} ({row['workload']}): {limits.said(limit)}{note}"


def answers(samples: list[Sample], metric: str, key: str) -> list[tuple[Sample, dict[str, Any], dict[str, Any] | None]]:
    """A search's answers, one per (workload, backend): its latest `metric` sample for all hosts (searched more than
    once: the last), the point it answers at (its metadata's `at`) and that point's probes (the entry of its
    `points` whose `key` is the answer's: accelerators, count), or None where none is."""
    latest = {(s.workload, s.backend): s for s in samples if s.metric == metric and s.host == AGGREGATE_HOST}
    found = []
    for s in latest.values():
        at: dict[str, Any] = s.metadata.get("at", {})
        point = next((p for p in s.metadata.get("points", []) if p[key] == at.get(key)), None)
        found.append((s, at, point))
    return found


def verdict_rows(samples: list[Sample]) -> list[dict]:
    """The campaign's answer: per workload and backend, the accelerators fed (`search: accelerators`).

    One row per (workload, backend) with an accelerators_fed sample for all hosts (the
    latest, if searched more than once): `fed` accelerators per host, `label` with its interval,
    its `flags` as (name, why) (footnotes.named), what limited it, and at that point (`at`; the
    1-accelerator probe when none held) the total read B/s, samples/s and the lowest host's AU, with
    the probe's run id and the AU spread of that point's probes.
    """
    rows = []
    for s, at, point in answers(samples, VERDICT_METRIC, "accelerators"):
        rows.append(
            {
                "workload": s.workload,
                "backend": s.backend,
                "fed": int(s.value),
                # where a bench.calibrate profile of its model exists, the same answer in that device too
                "label": fed_label(s.value, {**s.metadata, "flags": []}, s.params.get("accelerator_type", ""))
                + side_by_side(s),
                "flags": [footnotes.named(flag) for flag in s.metadata.get("flags", [])],
                "limited_by": s.metadata.get("limited_by"),
                "accelerator": s.params.get("accelerator_type", ""),
                "threshold": s.params.get("au_threshold"),
                "at": at.get("accelerators"),
                "read_bw": at.get("read_bw"),
                "samples_per_s": at.get("samples_per_s"),
                "au": at.get("au"),
                "au_range": (min(point["au"]), max(point["au"]), len(point["au"])) if point else None,
                "run_id": at.get("run_id", ""),
                "hosts": len(s.metadata.get("hosts", [])),
            }
        )
    return rows


def verdict_cells(rows: list[dict], units: str = DEFAULT_UNITS) -> tuple[list[str], list[list[str]]]:
    """The verdict table as text: its header and one row of cells per verdict_rows row (its flags apart:
    `answer_flags`).

    Accelerators are per host, throughput of all hosts, both at the answer (with none fed: at one
    accelerator per host); the AU's range over that point's probes follows it, with their number.
    """
    factor, label = unit_scale("B/s", max((r["read_bw"] or 0.0 for r in rows), default=0.0), units)
    head = ["workload", "backend", "accelerators fed (held–failed)", f"read_bw ({label})", "AU (%)"]
    head.append("AU over the (n) probes (%)")
    cells = []
    for r in rows:
        low_high = r["au_range"]
        au = f"{r['au']:.1f}" if r["au"] is not None else "—"
        spread = f"{low_high[0]:.1f}–{low_high[1]:.1f} ({low_high[2]})" if low_high else "—"
        cells.append([*answer_cells(r, factor), au, spread])
    return head, cells


def answer_cells(row: dict, factor: float) -> list[str]:
    """A search's answer row's first cells, every search alike: workload, backend, the answer's label, read_bw
    in the table's unit (`factor`)."""
    bw = number(row["read_bw"] / factor) if row["read_bw"] is not None else "—"
    return [row["workload"], row["backend"], row["label"], bw]


LAB_SCALE = (
    "MLPerf Storage counts only a data set of at least 5× each host's RAM; a smaller one gives a "
    "lab-scale figure: MLPerf Storage rules broken."
)


def answer_flags(row: dict, verdicts: validity.Verdicts) -> list[tuple[str, str]]:
    """A verdict row's flags as (name, why): the answer's own, then those of the run at its point."""
    return row["flags"] + footnotes.run_flags(verdicts, row["run_id"])


def verdict_table(store: ResultStore, samples: list[Sample] | None = None, units: str = DEFAULT_UNITS) -> Group | None:
    """Backend × workload → what limited the search (its first line), then the accelerators fed with their
    interval, total read throughput and AU there, each flag a footnote under the table; None without a search."""
    samples = store.samples() if samples is None else samples
    rows = verdict_rows(samples)
    if not rows:
        return None
    title = (
        f"campaign {store.dir.name}: how many emulated accelerators per host each backend keeps at "
        f"AU ≥ {rows[0]['threshold']:g}% (read_bw: all hosts)"
    )
    return answers_table(title, rows, verdict_cells(rows, units), validity.assess(samples), "verdict")


def answers_table(
    title: str, rows: list[dict], table: tuple[list[str], list[list[str]]], verdicts: validity.Verdicts, name: str
) -> Group:
    """A search's answers on the terminal (accelerators fed, KV-cache users served): the title, what limited each
    search, then a row per backend under its workload, each flag a named footnote (`name`: the notes' anchors)."""
    head, cells = table
    notes = footnotes.Footnotes(name)
    columns = [Column(f"{head[0]}: {head[1]}"), Column(head[2], TEXT), *(Column(h, NUMBER) for h in head[3:])]
    out = Fitted(columns, notes=notes, after=[LAB_SCALE])
    for row, line in zip(rows, cells, strict=True):
        answer = "\n".join(filter(None, (line[2], cited(notes, answer_flags(row, verdicts)))))
        out.add_row(line[1], answer, *line[3:], group=line[0])
    return Group(plain(title), *(plain(limit_line(r)) for r in rows), out)


def summary_table(store: ResultStore, samples: list[Sample] | None = None, units: str = DEFAULT_UNITS) -> Fitted | None:
    """Which backend wins each workload and metric, by how much, and whether the repeats keep them apart.

    None when no point has two backends measured at least twice (one backend, or a search's probes only).
    """
    samples = store.samples() if samples is None else samples
    verdicts = validity.assess(samples)
    rows = summarize(samples)
    agree = {(r["workload"], r["setting"], r["metric"], r["backend"]): r["agree"] for r in rows}
    found = winners(rows)
    if not found:
        return None
    once = len(contests(rows)) - len(found)
    out = Fitted(
        [Column("workload: metric"), Column("winner"), Column("by", TEXT, "right"), Column("median", NUMBER)]
        + [Column("runner-up"), Column("sure")],
        title=f"campaign {store.dir.name}: who wins (medians over repetitions, {units.upper()} units)",
        after=[
            "sure: yes = every repeat of the winner beats every repeat of the runner-up; † repeats differ by more "
            "than 5%; ⚑ a run involved is flagged (see the flags)"
        ]
        + [f"Left out: {once} point(s) a backend measured once (a search's probes): no range to compare."] * (once > 0),
    )
    for w in found:
        point = (w["workload"], w["setting"], w["metric"])
        marks = ("" if agree[(*point, w["winner"])] and agree[(*point, w["runner_up"])] else " †") + (
            " ⚑" if run_flagged(verdicts, w["run_ids"]) else ""
        )
        factor, label = unit_scale(w["unit"], max(w["best"], w["second"]), units)
        out.add_row(
            with_unit(w["metric"], label),
            w["winner"] + marks,
            w["margin"],
            number(w["best"] / factor),
            f"{w['runner_up']} {number(w['second'] / factor)}",
            w["sure"],
            group=point_label(w["workload"], w["setting_label"]),
        )
    return out


def table(store: ResultStore, samples: list[Sample] | None = None, units: str = DEFAULT_UNITS) -> Fitted:
    """Every figure: per point and metric a row, per backend a column (median ± half-range (n); a figure
    measured once has no range)."""
    samples = store.samples() if samples is None else samples
    rows = [r for r in summarize(samples) if r["metric"] in metrics.ordered("table")]
    verdicts = validity.assess(samples)
    backends = list(dict.fromkeys(s.backend for s in samples))
    out = Fitted(
        [Column("workload: metric"), *(Column(b, NUMBER) for b in backends)],
        title=f"campaign {store.dir.name}: median ± half-range over repetitions (n), {units.upper()} units",
        after=["† repeats differ by more than 5% of their median; ⚑ a run is flagged"],
    )
    scales = row_scales(rows, units)
    cells: dict[tuple, dict[str, str]] = defaultdict(dict)
    for row in rows:
        mark = ("" if row["agree"] else " †") + (" ⚑" if run_flagged(verdicts, row["run_ids"]) else "")
        key = (row["workload"], row["setting_label"], row["metric"])
        spread = f" ±{row['spread'] * 100:.1f}%" if row["n"] > 1 else ""
        cells[key][row["backend"]] = f"{number(row['median'] / scales[key][0])}{spread} ({row['n']}){mark}"
    workloads = list(dict.fromkeys(s.workload for s in samples))
    settings = {(r["workload"], r["setting_label"]): validity.setting_order(r["setting"]) for r in rows}
    for (workload, label, metric), by_backend in sorted(
        cells.items(), key=lambda kv: (workloads.index(kv[0][0]), settings[kv[0][:2]], metrics.of(kv[0][2]).table)
    ):
        out.add_row(
            with_unit(metric, scales[(workload, label, metric)][1]),
            *(by_backend.get(b, "—") for b in backends),
            group=point_label(workload, label),
        )
    return out


def row_scales(rows: list[dict], units: str = DEFAULT_UNITS) -> dict[tuple, tuple[float, str]]:
    """(workload, setting label, metric) → the (divisor, unit label) of its row: its largest median picks it."""
    tops: dict[tuple, tuple[float, str]] = {}
    for r in rows:
        key = (r["workload"], r["setting_label"], r["metric"])
        tops[key] = (max(tops.get(key, (0.0, ""))[0], abs(r["median"])), r["unit"])
    return {key: unit_scale(unit, top, units) for key, (top, unit) in tops.items()}


def flag_rows(samples: list[Sample], verdicts: validity.Verdicts | None = None) -> list[dict]:
    """One row per flag: a run's own flags per run, a disagreement once for all the repeats it concerns."""
    verdicts = verdicts or validity.assess(samples)
    first: dict[str, Sample] = {}
    for s in samples:
        first.setdefault(s.run_id, s)
    rows: dict[tuple, dict] = {}
    for run_id, flags in verdicts.flags.items():
        s = first[run_id]
        for f in flags:
            name, reason = footnotes.flag_named(f)
            key = (name, reason) if f.name == validity.REPEATS_DISAGREE else (run_id, name, reason)
            row = rows.setdefault(
                key,
                {
                    "run_ids": [],
                    "backend": s.backend,
                    "workload": s.workload,
                    "repetitions": [],
                    "flag": name,
                    "reason": reason,
                    "blocking": f.blocking,
                },
            )
            row["run_ids"].append(run_id)
            row["repetitions"].append(s.repetition)
    for row in rows.values():
        order = sorted(range(len(row["run_ids"])), key=lambda i: row["repetitions"][i])
        row["run_ids"] = [row["run_ids"][i] for i in order]
        row["repetitions"] = [row["repetitions"][i] for i in order]
    return list(rows.values())


def flags_table(store: ResultStore, samples: list[Sample] | None = None) -> Fitted | None:
    """The flagged runs, each flag's reason a footnote under the table (None when every run is comparable)."""
    samples = store.samples() if samples is None else samples
    rows = flag_rows(samples)
    if not rows:
        return None
    notes = footnotes.Footnotes("flags")
    out = Fitted(
        [Column("flag"), Column("backend"), Column("workload"), Column("rep", NUMBER), Column("run")],
        title="flags: runs that may not be comparable",
        notes=notes,
    )
    for row in rows:
        out.add_row(
            cited(notes, [(row["flag"], row["reason"])]),
            row["backend"],
            row["workload"],
            ",".join(str(r) for r in row["repetitions"]),
            " ".join(row["run_ids"]),
        )
    return out


def export(store: ResultStore, fmt: str) -> str:
    """Every sample with `valid`, `flags` and `reasons`, as CSV (params, metadata, flags as JSON) or JSON."""
    rows = validity.annotate(store.samples())
    if fmt == "json":
        return json.dumps(rows, indent=1)
    buffer = io.StringIO()
    # A sample's own fields in their order (but its schema), its judgement, then its two mappings as JSON.
    own = [f.name for f in dataclasses.fields(Sample) if f.name not in ("params", "metadata", "schema")]
    fields = [*own, "valid", "flags", "reasons", "params", "metadata"]
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(k, row[k]) for k in fields})
    return printable(buffer.getvalue())  # a name's control characters written out, never sent to a terminal


def _cell(key: str, value: Any) -> Any:
    if key in ("params", "metadata", "flags", "reasons", "valid"):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


def nothing_to_compare(campaign: str, backends: list[str]) -> str:
    """Why a campaign has no "who wins": one backend, or no point two backends measured at least twice."""
    if len(backends) < 2:
        return f"campaign {campaign}: one backend ({', '.join(backends)}), nothing to compare; its figures:"
    return (
        f"campaign {campaign}: no point measured at least twice on two backends ({', '.join(backends)}), "
        "nothing to compare; the figures:"
    )


def print_report(store: ResultStore, console=None, units: str = DEFAULT_UNITS, leads=()) -> None:
    """The terminal report: accelerators fed, real GPUs fed, then `leads` (each `(samples, units)` → a table or
    None: the KV-cache answer and trials, iolab.report.kvcache), who wins, every figure, then the flags."""
    from rich.console import Console

    console = console or Console()
    samples = store.samples()
    verdict = verdict_table(store, samples, units)
    if verdict is not None:
        console.print(verdict)
    fed = gpus.lines(samples)  # real GPUs: the synthetic ceiling against the real data, per backend
    if fed:
        console.print(plain(f"campaign {store.dir.name}: real GPUs fed per host (campaign.gpus)"), *map(plain, fed))
    for lead in leads:
        shown = lead(samples, units)
        if shown is not None:
            console.print(shown)
    samples = figures(samples)
    summary = summary_table(store, samples, units)
    if summary is None:
        console.print(plain(nothing_to_compare(store.dir.name, list(dict.fromkeys(s.backend for s in samples)))))
    else:
        console.print(summary)
    console.print(table(store, samples, units))
    from iolab.report import faults as report_faults  # the faulted runs: their events, rates and figures

    faulted = report_faults.table(store, samples, units)
    if faulted is not None:
        console.print(faulted)
    flags = flags_table(store, samples)
    if flags is not None:
        console.print(flags)
