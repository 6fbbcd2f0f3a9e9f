"""results.publish to a real PostgreSQL (Debian's postgresql 15): the same rows, a second publish adds none, a
publish killed halfway (SIGKILL after a batch committed) completes exactly, a wrong password fails in one line
naming the server and never the secret, and runs stored with `results_db:` go there as they are stored.

The server is this module's own: initdb into a temporary directory as the `postgres` user (root cannot run
postgres), password authentication (scram-sha-256), listening on a free loopback port, stopped and deleted after.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text

from iolab.measures.samples import ResultStore
from iolab.results import index as results_index
from iolab.results import store as results_store
from iolab.results.schema import runs, samples
from iolab.store import ledger
from support import Cli, record, sample

INITDB = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
pytestmark = pytest.mark.skipif(
    not INITDB or shutil.which("runuser") is None,
    reason="Debian's postgresql is not installed (apt-get install postgresql): these tests run a real server",
)
PASSWORD = secrets.token_hex(12)


def _as_postgres(*argv: str | Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *map(str, argv)], check=True, capture_output=True, text=True, **kw
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A private PostgreSQL: the URL of database iolab, owned by user iolab with PASSWORD."""
    bindir = INITDB[-1].parent
    base = Path(tempfile.mkdtemp(prefix="iolab-pg-"))
    base.chmod(0o755)
    shutil.chown(base, "postgres")
    secret = base / "pw"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    shutil.chown(secret, "postgres")
    port = _free_port()
    try:
        _as_postgres(bindir / "initdb", "-D", base / "data", "-U", "postgres", "--auth=scram-sha-256",
                     "--pwfile", secret, "-E", "UTF8", "--no-sync")  # fmt: skip
        options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
        _as_postgres(bindir / "pg_ctl", "-D", base / "data", "-l", base / "log", "-o", options, "-w", "start")
        env = {**os.environ, "PGPASSWORD": PASSWORD}
        for sql in (f"CREATE ROLE iolab LOGIN PASSWORD '{PASSWORD}'", "CREATE DATABASE iolab OWNER iolab"):
            _as_postgres("psql", "-h", base, "-p", port, "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-c", sql, env=env)
        yield f"postgresql://iolab:{PASSWORD}@127.0.0.1:{port}/iolab"
    finally:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", bindir / "pg_ctl", "-D", base / "data", "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


def server_rows(url: str, campaign_ids: set[str]) -> list[tuple]:
    """(sample id, value) of the server's samples of these campaigns."""
    eng = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with eng.connect() as conn:
            query = select(samples.c.sample_id, samples.c.value).where(samples.c.campaign_id.in_(campaign_ids))
            return sorted(tuple(r) for r in conn.execute(query))
    finally:
        eng.dispose()


def local_rows(results: Path) -> tuple[set[str], list[tuple]]:
    with results_index.open_index(results).connect() as conn:
        ids = set(conn.execute(text("SELECT campaign_id FROM campaigns")).scalars())
        return ids, sorted(tuple(r) for r in conn.execute(select(samples.c.sample_id, samples.c.value)))


def many(results: Path, name: str, count: int) -> None:
    """A store of `count` samples (appended past the index: the publish catches it up first)."""
    store = ResultStore(results, name)
    store.add_samples([sample(name, f"r{i // 10}", float(i + 1), host=f"h{i % 10}") for i in range(count)])
    store.add_run_records([record(f"r{i}") for i in range(count // 10)])


def test_publish_sends_the_same_rows_and_a_second_adds_none(postgres, tmp_path):
    many(tmp_path, "quick", 300)
    many(tmp_path, "other", 200)
    cli = Cli(tmp_path)
    first = cli("results.publish", "--to", postgres)
    assert "500 new sample(s), 50 new run record(s) of 2 campaign(s)" in first.stdout
    ids, mine = local_rows(tmp_path)
    assert server_rows(postgres, ids) == mine
    again = cli("results.publish", "--to", postgres)
    assert "0 new sample(s), 0 new run record(s)" in again.stdout and "(0 row(s) sent" in again.stdout
    everything = cli("results.publish", "--to", postgres, "--all")  # every row again: the server keeps one of each
    assert "0 new sample(s), 0 new run record(s)" in everything.stdout and "(550 row(s) sent" in everything.stdout
    assert server_rows(postgres, ids) == mine
    assert PASSWORD not in first.stdout + first.stderr + again.stdout + everything.stdout


def test_a_publish_killed_halfway_completes_exactly(postgres, tmp_path):
    from iolab.results.publish import BATCH

    total = 2 * BATCH + 700
    many(tmp_path, "big", total)
    cli = Cli(tmp_path)
    cli.env["IOLAB_TEST_CRASH_AT"] = "publish-batch:2"  # SIGKILL after the 2nd batch committed, before its mark
    killed = cli("results.publish", "--to", postgres, check=False)
    assert killed.returncode == -9, killed.stderr
    ids, mine = local_rows(tmp_path)
    assert len(server_rows(postgres, ids)) == 2 * BATCH
    del cli.env["IOLAB_TEST_CRASH_AT"]
    resumed = cli("results.publish", "--to", postgres)
    assert f"{total - 2 * BATCH} new sample(s)" in resumed.stdout  # the batch sent twice added nothing
    assert server_rows(postgres, ids) == mine and len(mine) == total


def test_a_wrong_password_fails_in_one_line_naming_the_server(postgres, tmp_path):
    many(tmp_path, "quick", 10)
    wrong = postgres.replace(PASSWORD, "not-" + PASSWORD)
    done = Cli(tmp_path)("results.publish", "--to", wrong, check=False)
    port = postgres.rsplit(":", 1)[1].split("/")[0]
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"iolab: results.publish to iolab@127.0.0.1:{port}/iolab failed")
    assert "password authentication failed" in lines[0] and PASSWORD not in done.stderr
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or PASSWORD.encode() not in path.read_bytes(), path


def test_runs_go_to_the_campaigns_server_as_they_are_stored(postgres, tmp_path, monkeypatch):
    """`results_db:` without a password (the campaign file is shared): libpq takes it from PGPASSWORD."""
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.delenv("IOLAB_RESULTS_DB", raising=False)
    store = results_store.open_store(tmp_path, "live")
    store.dir.mkdir(parents=True)
    found = {"schema": ledger.SCHEMA, "id": "live-campaign".ljust(32, "0"), "name": "live", "plan": []}
    found["results_db"] = postgres.replace(f":{PASSWORD}@", "@")
    (store.dir / ledger.FILE).write_text(json.dumps(found))
    store.add_samples([sample("live", "r1", 1e9), sample("live", "r1", 1e9, host="*")])
    store.add_run_records([record("r1")])
    eng = create_engine(postgres.replace("postgresql://", "postgresql+psycopg://"))
    with eng.connect() as conn:
        mine = samples.c.campaign_id == found["id"]
        assert conn.execute(select(samples.c.value).where(mine)).scalars().all() == [1e9, 1e9]
        assert conn.execute(select(runs.c.status).where(runs.c.campaign_id == found["id"])).scalars().all() == ["ok"]
    eng.dispose()


def rewrite(results: Path, name: str, keep: int, stamp: str) -> None:
    """What `results.reparse --write` does to a store: samples.jsonl moved aside, the samples made again written
    anew (here: the first `keep`, each value doubled)."""
    store = ResultStore(results, name)
    old = store.samples()
    store.samples_path.rename(store.samples_path.with_name(f"samples.jsonl.{stamp}"))
    store.add_samples([dataclasses.replace(s, value=s.value * 2) for s in old[:keep]])


def test_a_rewritten_store_replaces_its_rows_on_the_server(postgres, tmp_path):
    many(tmp_path, "quick", 30)
    many(tmp_path, "other", 20)
    cli = Cli(tmp_path)
    cli("results.publish", "--to", postgres)
    rewrite(tmp_path, "quick", 25, "20261129T000000Z")
    again = cli("results.publish", "--to", postgres)
    assert (
        "25 new sample(s)" in again.stdout and "33 row(s) it held of stores rewritten since" in again.stdout
    )  # and its 3 records
    ids, mine = local_rows(tmp_path)
    assert server_rows(postgres, ids) == mine and len(mine) == 45  # 25 of quick's, made again; other's 20
    everything = cli("results.publish", "--to", postgres, "--all")
    assert "0 new sample(s)" in everything.stdout and server_rows(postgres, ids) == mine
    rewrite(tmp_path, "quick", 10, "20261129T010000Z")  # again, then a rebuild reads every store before the publish
    cli("results.index", "--rebuild")
    cli("results.publish", "--to", postgres)
    ids, mine = local_rows(tmp_path)
    assert server_rows(postgres, ids) == mine and len(mine) == 30
