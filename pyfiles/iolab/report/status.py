"""`./lab status [--campaign NAME]`: each campaign's runs, the rules its results break, what it compares with.

Per store (a campaign, or one moved aside by --no-resume), from the results index:

- **runs** of its plan (its ledger, iolab.store.ledger; a store from before ledgers: the runs it recorded):
  `ok` (samples stored on every host of the run), `failed` (a host's last record failed, no samples),
  `running` (not stored yet while the command that holds the campaign lives: its PID, on this
  controller, still runs with the start time it recorded, as iolab.drive.lease checks a lease's holder),
  `missing` (not stored, and nothing runs it: the next `bench.all` runs it);
- **rules broken**: every flag iolab.measures.validity gives its runs (potential_caching, repeats_disagree,
  MLPerf Storage's numbered rules: mlperf_*), and a search's answer that foreign CPU disturbed
  (`disturbed`, iolab.measures.limits), each with the runs it concerns and its first reason;
- **comparable with** another campaign when both ran the same workload points (the plans' config
  hashes, iolab.store.ledger.config_hash), on the same data set (the manifest hashes the loaders recorded,
  else the ledgers' data set), with the same iolab major version.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from iolab.drive import lease
from iolab.errors import UserError
from iolab.measures import host_flags, validity
from iolab.measures.samples import AGGREGATE_HOST
from iolab.report import footnotes
from iolab.report.layout import TEXT, Column, Fitted
from iolab.results import index as results_index
from iolab.results import query as results_query
from iolab.results.schema import campaigns, runs, sample_metadata, samples

DISTURBED = "disturbed"


@dataclasses.dataclass
class Status:
    store: str
    name: str
    started: str
    ended: str
    version: str
    counts: dict[str, int]  # ok, failed, missing, running → runs
    rules: dict[str, tuple[int, str]]  # flag → (runs, its first reason)
    held_by: str  # who runs it now, '' when nothing does
    configs: frozenset[str]  # config hashes of its plan (empty: not known)
    datasets: frozenset[str]  # data set manifest hashes, else the ledger's data set hash
    comparable: dict[str, str] = dataclasses.field(default_factory=dict)  # other store → '' or why not


def collect(results: Path, campaign: str | None = None) -> list[Status]:
    """Every store's status (`campaign`: the stores of that campaign name, or that store), oldest first."""
    eng = results_index.open_index(results)
    with eng.connect() as conn:
        rows = list(conn.execute(select(campaigns).order_by(campaigns.c.started, campaigns.c.store)))
        found = [_status(conn, row, results) for row in rows]
    for s in found:
        s.comparable = {o.store: _differs(s, o) for o in found if o.store != s.store}
    if campaign is not None:
        found = [s for s in found if campaign in (s.name, s.store)]
        if not found:
            names = ", ".join(dict.fromkeys(r.name for r in rows)) or "none"
            raise UserError(f"no campaign {campaign!r} in {results} (campaigns: {names})")
    return found


def _status(conn: Any, row: Any, results: Path) -> Status:
    held = _holder(results / row.store)
    plan = json.loads(row.plan or "[]")
    stored = {
        (r, h)
        for r, h in conn.execute(
            select(samples.c.run_id, samples.c.host)
            .where(samples.c.campaign_id == row.campaign_id, samples.c.host != AGGREGATE_HOST)
            .distinct()
        )
    }
    last: dict[tuple[str, str], str] = {}
    recorded = select(runs.c.run_id, runs.c.host, runs.c.status).where(runs.c.campaign_id == row.campaign_id)
    for run_id, host, status in conn.execute(recorded.order_by(runs.c.offset)):
        last[(run_id, host)] = status
    hosts: dict[str, list[str]] = {p["run_id"]: list(p.get("hosts") or []) for p in plan}
    for run_id, host in [*stored, *last]:
        if not plan:  # no ledger: the runs it recorded
            hosts.setdefault(run_id, []).append(host)
    counts = dict.fromkeys(("ok", "failed", "running", "missing"), 0)
    for run_id, on in hosts.items():
        on = list(dict.fromkeys(on))
        if on and all((run_id, h) in stored for h in on):
            counts["ok"] += 1
        elif any(last.get((run_id, h)) == "failed" and (run_id, h) not in stored for h in on):
            counts["running" if held else "failed"] += 1
        else:
            counts["running" if held else "missing"] += 1
    return Status(
        store=row.store,
        name=row.name,
        started=row.started or "",
        ended=row.ended or "",
        version=row.iolab_version or "",
        counts=counts,
        rules=_rules(conn, row.campaign_id, row.name),
        held_by=held,
        configs=frozenset(p.get("config_hash") for p in plan if p.get("config_hash")),
        datasets=_datasets(conn, row.campaign_id) or frozenset([row.dataset] if row.dataset else []),
    )


def _holder(store_dir: Path) -> str:
    """Who runs the campaign now ('user@controller, PID N since …'), or '' when no live command holds it."""
    from iolab.store import ledger

    holder = (ledger.read(store_dir) or {}).get("held_by")
    if not isinstance(holder, dict) or holder.get("controller") != socket.gethostname() or lease.gone(holder):
        return ""
    return f"{holder.get('user')}@{holder.get('controller')}, PID {holder.get('pid')} since {holder.get('since')}"


def _rules(conn: Any, campaign_id: str, name: str) -> dict[str, tuple[int, str]]:
    """flag → (the runs it concerns, its first reason): validity's verdicts on the campaign's samples, and the
    searches that foreign CPU disturbed."""
    query = results_query.whole_samples().where(samples.c.campaign_id == campaign_id).order_by(samples.c.offset)
    rows = conn.execute(query)
    found = results_query.to_samples(rows, {campaign_id: name})
    by_flag: dict[str, list[host_flags.Flag]] = defaultdict(list)
    for run_id, flags in validity.assess(found).flags.items():
        for flag in {f.name: f for f in flags}.values():
            named, reason = footnotes.flag_named(flag)  # a search answer's sentence by its short name
            by_flag[named].append(host_flags.Flag(named, reason, metric=run_id))
    for s in found:
        why = s.metadata.get(DISTURBED) if s.metric == "accelerators_fed" else None
        if why:
            by_flag[DISTURBED].append(
                host_flags.Flag(DISTURBED, f"{s.workload} on {s.backend}: {why}", metric=s.run_id)
            )
    return {name: (len({f.metric for f in flags}), flags[0].reason) for name, flags in sorted(by_flag.items())}


def _datasets(conn: Any, campaign_id: str) -> frozenset[str]:
    recorded = func.json_extract(sample_metadata.c.metadata, "$.dataset_manifest_hash")
    query = (
        select(recorded)
        .join(samples, samples.c.sample_id == sample_metadata.c.sample_id)
        .where(samples.c.campaign_id == campaign_id, recorded.is_not(None))
        .distinct()
    )
    return frozenset(str(h) for (h,) in conn.execute(query))


def _differs(a: Status, b: Status) -> str:
    """'' when A and B compare, else why not."""
    why = []
    if not a.configs or not b.configs:
        why.append("workloads unknown (a store without a ledger)")
    elif a.configs != b.configs:
        shared = len(a.configs & b.configs)
        why.append(f"workloads differ ({shared} of {len(a.configs | b.configs)} workload points shared)")
    if a.datasets != b.datasets:
        why.append("data sets differ")
    if a.version.split(".")[0] != b.version.split(".")[0]:
        why.append(f"iolab {a.version or '?'} against {b.version or '?'}")
    return "; ".join(why)


def table(found: list[Status]) -> Fitted:
    """A store a line, then its runs, rules broken (one a line) and the stores it compares with (one a line)."""
    out = Fitted(
        [Column("started (UTC)"), Column("runs", TEXT), Column("rules broken (runs)"), Column("comparable with")],
        title="campaigns: runs of each store's plan, the rules its results break",
    )
    for s in found:
        runs = ", ".join(f"{n} {k}" for k, n in s.counts.items() if n) or "none"
        rules = "\n".join(f"{name} ({runs})" for name, (runs, _) in s.rules.items()) or "none"
        same = "\n".join(o for o, why in s.comparable.items() if not why) or "—"
        out.add_row(s.started[:16].replace("T", " "), runs, rules, same, group=s.store)
    return out


def details(s: Status) -> list[str]:
    """--campaign's lines under the table: who runs it, each rule's first reason, and why others do not compare."""
    lines = [f"{s.store}: running now, by {s.held_by}" if s.held_by else f"{s.store}: nothing runs it now"]
    lines += [f"  {name} ({runs} run(s)): {reason}" for name, (runs, reason) in s.rules.items()]
    lines += [f"  not comparable with {other}: {why}" for other, why in s.comparable.items() if why]
    return lines
