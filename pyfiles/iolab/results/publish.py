"""results.publish: the results index's rows into a lab's PostgreSQL server, the same schema.

    ./lab results.publish --to postgresql://iolab@lab-db/iolab       every store, what the server lacks
    IOLAB_RESULTS_DB=postgresql://…   or   results_db: postgresql://iolab@lab-db/iolab  in a campaign:
                                      each run's rows go there as the run is stored (iolab.results.db)

Through SQLAlchemy Core with psycopg 3 (iolab.results.schema: one schema for SQLite and PostgreSQL).

**Idempotent.** Rows carry stable ids and go in with ON CONFLICT DO NOTHING, in batches of BATCH
rows in the order of their files, each batch its own transaction. After a batch commits, the
local index records how far that campaign is published to that server (`published`: a byte
offset of the campaign's file). A second publish starts after that mark and adds nothing; one
killed halfway starts again at the last mark, and the batch it may send twice (committed on the
server, killed before the mark) is skipped row by row by the server. `--all` sends every row
again (a server restored from an older backup): the server keeps one of each.

**Rewritten stores are replaced.** A store whose files changed under the index (`results.reparse
--write` moves samples.jsonl aside and writes it anew; a store replaced) is read again by the index,
which drops its marks with its rows (iolab.results.db), as a rebuild drops all. A campaign without a
mark is sent whole, and the first batch's transaction deletes what the server held of it: the server
never keeps a superseded sample beside the new one, and never shows the campaign empty.

**Credentials** never leave the URL object (iolab.campaign.results_url): messages name the server as
user@host:port/database, and a driver's message is cut to its first line with the password, if it
quotes it, blotted out.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import and_, create_engine, select
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import SQLAlchemyError

from iolab.campaign.results_url import ENV, Target, parse
from iolab.errors import UserError
from iolab.results import db as results_db
from iolab.results import index as results_index
from iolab.results.schema import SHARED, campaigns, forget, published, put, runs, sample_metadata, samples
from iolab.store import ledger

BATCH = 5000  # rows per transaction on the server


def target_for(store_dir: Path) -> Target | None:
    """Where this store's runs are published as they end: $IOLAB_RESULTS_DB, else its campaign's results_db."""
    if os.environ.get(ENV):
        return parse(os.environ[ENV], f"${ENV}")
    found = (ledger.read(store_dir) or {}).get("results_db")
    return parse(found, f"{store_dir / ledger.FILE}: results_db") if found else None


@functools.cache
def _engine(url: URL) -> Engine:
    return create_engine(url, hide_parameters=True, connect_args={"connect_timeout": 10})


@dataclasses.dataclass
class Published:
    campaigns: int = 0
    samples: int = 0  # rows the server did not have
    runs: int = 0
    sent: int = 0  # rows sent (a resumed or --all publish sends rows the server keeps as they were)
    superseded: int = 0  # rows the server held of campaigns whose stores were rewritten since: deleted


def publish(
    results: Path, target: Target, stores: Iterable[str] | None = None, caught_up: bool = False, again: bool = False
) -> Published:
    """Send the server what it lacks of `stores` (default: every store); raise UserError in one line."""
    local = results_index.open_index(results) if not caught_up else results_db.engine(results_db.path_of(results))
    done = Published()
    with local.connect() as conn:
        query = select(campaigns)
        if stores is not None:
            query = query.where(campaigns.c.store.in_(list(stores)))
        chosen = [dict(r) for r in conn.execute(query).mappings()]
    try:
        remote = _engine(target.url)
        with remote.begin() as conn:
            SHARED.create_all(conn)
            done.campaigns = put(conn, campaigns, chosen, update=True)
        for campaign in chosen:
            for table in (samples, runs):
                _send(local, remote, target, campaign["campaign_id"], table, done, again)
    except SQLAlchemyError as exc:
        raise UserError(f"results.publish to {target.shown} failed: {target.scrub(results_db.why(exc))}") from None
    return done


def _metadata(local: Engine, ids: list[str]) -> list[dict[str, Any]]:
    with local.connect() as conn:
        query = select(sample_metadata).where(sample_metadata.c.sample_id.in_(ids))
        return [dict(r) for r in conn.execute(query).mappings()]


def _send(
    local: Engine, remote: Engine, target: Target, campaign_id: str, table: Any, done: Published, again: bool
) -> None:
    """The campaign's rows of `table` past its mark, batch by batch, the mark moved after each. Without a mark (never
    published there, or its store read again since: rewritten, replaced), the server's rows of the campaign are
    deleted in the first batch's transaction: a rewrite reaches the server as a replacement, never beside it."""
    kind = table.name
    mark_of = and_(published.c.target == target.key, published.c.campaign_id == campaign_id, published.c.kind == kind)
    with local.connect() as conn:
        stored = conn.execute(select(published.c.offset).where(mark_of)).scalar()
    replace = stored is None
    mark = -1 if again or stored is None else stored
    while True:
        with local.connect() as conn:
            rows = [
                dict(r)
                for r in conn.execute(
                    select(table)
                    .where(table.c.campaign_id == campaign_id, table.c.offset > mark)
                    .order_by(table.c.offset)
                    .limit(BATCH)
                ).mappings()
            ]
        if not rows and not replace:
            return
        with remote.begin() as conn:
            done.superseded += forget(conn, campaign_id, table) if replace else 0
            added = put(conn, table, rows)
            if table is samples:  # each sample's metadata with it
                put(conn, sample_metadata, _metadata(local, [r["sample_id"] for r in rows]))
        results_db.crash_point("publish-batch")
        done.sent += len(rows)
        setattr(done, kind, getattr(done, kind) + added)
        replace, mark = False, rows[-1]["offset"] if rows else mark
        with local.begin() as conn:
            entry = {"target": target.key, "campaign_id": campaign_id, "kind": kind, "offset": mark}
            put(conn, published, [entry], update=True)


def run(results: Path, to: str | None, campaign: str | None, again: bool) -> str:
    """`results.publish`: the server from --to or $IOLAB_RESULTS_DB; a line saying what went there."""
    if to:
        target = parse(to, "--to")
    elif os.environ.get(ENV):
        target = parse(os.environ[ENV], f"${ENV}")
    else:
        raise UserError(f"name the server: --to postgresql://USER@HOST[:PORT]/DATABASE, or set ${ENV}")
    stores = [campaign] if campaign else None
    if campaign and campaign not in results_db.stores(results):
        raise UserError(
            f"no store {campaign!r} in {results} (stores: {', '.join(results_db.stores(results)) or 'none'})"
        )
    done = publish(results, target, stores, again=again)
    return (
        f"published to {target.shown}: {done.samples} new sample(s), {done.runs} new run record(s) of "
        f"{done.campaigns} campaign(s) ({done.sent} row(s) sent; the server had the rest)"
        + (
            f"; {done.superseded} row(s) it held of stores rewritten since (results.reparse --write) replaced"
            if done.superseded
            else ""
        )
    )
