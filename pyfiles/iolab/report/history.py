"""Past campaigns under results/: when they ran, how much, on which hosts, and which configuration.

    ./lab report.history

Stores moved aside by `bench.all --no-resume` (`results/<name>.<UTC stamp>/`) are
listed too. The list is read from the results index (iolab.results.db); `entry` reads one store's
files (the HTML report's header). Below it, report.history draws each figure over time
(iolab.report.history_series). The configuration hash is a hash of the campaign's sorted run ids:
a run id is itself a hash of the run's full configuration (campaign name,
backend, workload parameters, repetition; see campaign.run_id), so two stores
with the same hash ran the same configuration, and re-running a campaign file
reproduces it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from iolab.measures.samples import AGGREGATE_HOST, ResultStore
from iolab.report.layout import TEXT, Column, Fitted


@dataclasses.dataclass(frozen=True)
class Entry:
    store: str  # directory name under results/
    campaign: str  # the campaign's own name (a moved-aside store keeps it)
    first: str  # earliest sample start, ISO UTC ('' without samples)
    last: str  # latest sample end
    runs: int  # runs with samples
    failed: int  # runs recorded as failed and not retried successfully
    samples: int
    hosts: tuple[str, ...]
    backends: tuple[str, ...]
    config_hash: str
    skipped: int = 0  # lines of its files that are not records (iolab.measures.samples.BadLine)

    @property
    def date(self) -> str:
        return self.first[:16].replace("T", " ") if self.first else "—"


def config_hash(run_ids: set[str] | list[str]) -> str:
    """sha256 of the sorted, distinct run ids, one a line: 12 hex digits."""
    text = "\n".join(sorted(set(run_ids)))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def entry(store: ResultStore) -> Entry:
    samples = store.samples()
    records = store.run_records()
    with_samples = {s.run_id for s in samples}
    failed = {r["run_id"] for r in records if r.get("status") == "failed"} - with_samples
    return Entry(
        store=store.dir.name,
        campaign=samples[0].campaign if samples else store.dir.name.split(".", 1)[0],
        first=min((s.started_at for s in samples), default=""),
        last=max((s.ended_at for s in samples), default=""),
        runs=len(with_samples),
        failed=len(failed),
        samples=len(samples),
        hosts=tuple(sorted({s.host for s in samples if s.host != AGGREGATE_HOST})),
        backends=tuple(dict.fromkeys(s.backend for s in samples)),
        # Attempted runs count: a campaign with a failed run did not (yet) run the same configuration.
        config_hash=config_hash(with_samples | {r["run_id"] for r in records}),
        skipped=len(store.skipped),
    )


def campaigns(results: Path) -> list[Entry]:
    """Every store under `results` that holds samples or run records, oldest first, from the results index
    (iolab.results.db, caught up with the files first)."""
    from sqlalchemy import func, select

    from iolab.results import index as results_index
    from iolab.results.schema import campaigns as stores
    from iolab.results.schema import indexed, runs, samples

    entries = []
    with results_index.open_index(results).connect() as conn:
        for c in conn.execute(select(stores)):
            mine = samples.c.campaign_id == c.campaign_id
            first, last, count = conn.execute(
                select(func.min(samples.c.started_at), func.max(samples.c.ended_at), func.count()).where(mine)
            ).one()
            with_samples = set(conn.execute(select(samples.c.run_id).where(mine).distinct()).scalars())
            records = conn.execute(select(runs.c.run_id, runs.c.status).where(runs.c.campaign_id == c.campaign_id))
            recorded = set()
            failed = set()
            for run_id, status in records:
                recorded.add(run_id)
                if status == "failed":
                    failed.add(run_id)
            hosts = conn.execute(select(samples.c.host).where(mine, samples.c.host != AGGREGATE_HOST).distinct())
            backends = conn.execute(
                select(samples.c.backend).where(mine).group_by(samples.c.backend).order_by(func.min(samples.c.offset))
            )
            bad = conn.execute(select(func.sum(indexed.c.bad)).where(indexed.c.store == c.store)).scalar()
            entries.append(
                Entry(
                    store=c.store,
                    campaign=c.name,
                    first=first or "",
                    last=last or "",
                    runs=len(with_samples),
                    failed=len(failed - with_samples),
                    samples=count,
                    hosts=tuple(sorted(hosts.scalars())),
                    backends=tuple(backends.scalars()),
                    # Attempted runs count: a campaign with a failed run did not (yet) run the same configuration.
                    config_hash=config_hash(with_samples | recorded),
                    skipped=bad or 0,
                )
            )
    return sorted(entries, key=lambda e: (e.first or "~", e.store))


def same_configuration(entries: list[Entry]) -> dict[str, list[str]]:
    """config hash → the stores that share it (only hashes shared by two stores or more)."""
    by_hash: dict[str, list[str]] = {}
    for e in entries:
        by_hash.setdefault(e.config_hash, []).append(e.store)
    return {h: stores for h, stores in by_hash.items() if len(stores) > 1}


def table(results: Path) -> Fitted:
    """A store a line, then its date, runs, samples, hosts, backends and config hash; under the table, the stores
    that ran the same configuration."""
    entries = campaigns(results)
    shared = same_configuration(entries)
    out = Fitted(
        [Column("date (UTC)"), Column("runs", TEXT), Column("samples", TEXT), Column("hosts")]
        + [Column("backends"), Column("config")],
        title=f"campaigns in {results}",
        after=[
            "config: hash of the sorted run ids (each a hash of a run's full configuration); equal hashes ran the "
            "same configuration",
            *(f"same configuration {h}: {', '.join(stores)}" for h, stores in shared.items()),
        ],
    )
    for e in entries:
        runs = f"{e.runs}" + (f" (+{e.failed} failed)" if e.failed else "")
        samples = f"{e.samples}" + (f" ({e.skipped} bad lines skipped)" if e.skipped else "")
        out.add_row(e.date, runs, samples, _hosts(e.hosts), ", ".join(e.backends), e.config_hash, group=e.store)
    return out


def _hosts(hosts: tuple[str, ...]) -> str:
    from iolab.campaign.hosts import compress

    return compress(list(hosts)) if hosts else "—"
