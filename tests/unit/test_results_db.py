"""The results index (iolab.results.db): every stored line once, repaired after a crash, rebuilt from the files.

Stores are written as a campaign writes them (iolab.results.store's store: each append indexed), or
past the index (a plain ResultStore: what a controller killed between the append and the index's
write leaves); the index is then set against the files (iolab.results.check) as `results.index` does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from sqlalchemy import select

from iolab.drive import lease
from iolab.errors import UserError
from iolab.measures.samples import AGGREGATE_HOST, ResultStore
from iolab.results import check as results_check
from iolab.results import db as results_db
from iolab.results import index as results_index
from iolab.results import query as results_query
from iolab.results import store as results_store
from iolab.results.schema import campaigns, runs, samples
from iolab.run import plan
from iolab.store import ledger
from support import Cli, record, sample


def run_into(store: ResultStore, run_id: str, value: float, **kw) -> None:
    """One run as record.store_run stores it: its samples (a host's and the aggregate), then its status."""
    store.add_samples([sample(store.dir.name.split(".")[0], run_id, value, **kw)])
    store.add_samples([sample(store.dir.name.split(".")[0], run_id, value, host=AGGREGATE_HOST, **kw)])
    store.add_run_records([record(run_id)])


def agreement(results) -> dict[str, tuple[int, int, bool]]:
    """store → (samples, run records, whether files and index agree)."""
    eng = results_index.open_index(results)
    return {a.store: (a.db_samples, a.db_runs, a.agree) for a in results_check.verify(eng, results)}


def rows(results) -> list[tuple]:
    with results_index.open_index(results).connect() as conn:
        return sorted(tuple(r) for t in (samples, runs) for r in conn.execute(select(t)))


def test_each_append_lands_in_the_index_once(tmp_path):
    store = results_store.open_store(tmp_path, "quick")
    run_into(store, "r1", 1e9)
    run_into(store, "r2", 1.1e9)
    with results_index.open_index(tmp_path).connect() as conn:
        assert conn.execute(select(samples.c.value)).scalars().all() == [1e9, 1e9, 1.1e9, 1.1e9]
        assert conn.execute(select(campaigns.c.store, campaigns.c.name)).all() == [("quick", "quick")]
    assert agreement(tmp_path) == {"quick": (4, 2, True)}
    assert results_db.catch_up(results_db.engine(results_db.path_of(tmp_path)), tmp_path).samples == 0


def test_lines_stored_past_the_index_are_caught_up_never_doubled(tmp_path):
    """What a controller killed between the JSONL append and the index's write leaves: the next command reads on."""
    indexed = results_store.open_store(tmp_path, "quick")
    run_into(indexed, "r1", 1e9)
    behind = ResultStore(tmp_path, "quick")  # appends without the index's hook
    run_into(behind, "r2", 2e9)
    assert agreement(tmp_path) == {"quick": (4, 2, True)}
    with results_index.open_index(tmp_path).connect() as conn:  # the index's offset: where the next one reads from
        indexed_to = conn.exec_driver_sql("SELECT offset FROM indexed WHERE file = 'samples.jsonl'").scalar()
    assert indexed_to == indexed.samples_path.stat().st_size


def test_a_torn_line_waits_and_a_bad_line_is_skipped_on_both_sides(tmp_path):
    store = results_store.open_store(tmp_path, "quick")
    run_into(store, "r1", 1e9)
    whole = sample("quick", "r2", 3e9).to_json().encode()
    with store.samples_path.open("ab") as handle:
        handle.write(b'{"not": "a sample"}\n' + whole[:40])  # a bad line, and half a line: a crash mid-append
    assert agreement(tmp_path) == {"quick": (2, 1, True)}
    with store.samples_path.open("ab") as handle:
        handle.write(whole[40:] + b"\n")
    assert agreement(tmp_path) == {"quick": (3, 1, True)}
    from iolab.report import history

    assert [e.skipped for e in history.campaigns(tmp_path)] == [1]


def test_a_store_moved_aside_is_the_same_campaign_renamed(tmp_path):
    store = results_store.open_store(tmp_path, "quick")
    ledger.begin(store, _campaign(), [], ["localhost"], lease.record("campaign test"))
    run_into(store, "r1", 1e9)
    first_id = ledger.read(store.dir)["id"]
    moved = plan.start_over(store)  # --no-resume
    ledger.begin(store, _campaign(), [], ["localhost"], lease.record("campaign test"))
    run_into(store, "r1", 1.2e9)
    assert agreement(tmp_path) == {"quick": (2, 1, True), moved.name: (2, 1, True)}
    with results_index.open_index(tmp_path).connect() as conn:
        ids = dict(conn.execute(select(campaigns.c.store, campaigns.c.campaign_id)).all())
    assert ids[moved.name] == first_id != ids["quick"]


def test_a_store_from_before_ledgers_gets_one_and_keeps_its_id_when_moved(tmp_path):
    old = ResultStore(tmp_path, "quick")
    run_into(old, "r1", 1e9)
    results_index.open_index(tmp_path)
    adopted = ledger.read(old.dir)
    assert adopted["name"] == "quick" and adopted["plan"] == []
    moved = tmp_path / "quick.20261121T070000Z"
    old.dir.rename(moved)
    assert agreement(tmp_path) == {moved.name: (2, 1, True)}
    assert ledger.read(moved)["id"] == adopted["id"]


def test_a_copied_store_is_a_campaign_of_its_own(tmp_path):
    store = results_store.open_store(tmp_path, "quick")
    run_into(store, "r1", 1e9)
    shutil.copytree(store.dir, tmp_path / "copy")
    assert agreement(tmp_path) == {"copy": (2, 1, True), "quick": (2, 1, True)}


def test_a_rebuild_gives_the_same_rows(tmp_path):
    for name, value in (("a", 1e9), ("b", 2e9), ("c", 3e9)):
        run_into(results_store.open_store(tmp_path, name), f"{name}1", value)
    before = rows(tmp_path)
    _, line = results_check.run(tmp_path, rebuild=True)
    assert rows(tmp_path) == before and len(before) == 9
    assert line.startswith("3 store(s): index and files agree; rebuilt from the files")


def test_an_index_that_differs_from_the_files_fails_the_check(tmp_path):
    run_into(results_store.open_store(tmp_path, "quick"), "r1", 1e9)
    with results_index.open_index(tmp_path).begin() as conn:
        conn.execute(samples.update().values(value=5.0))
    with pytest.raises(UserError, match="differ for quick; run `./lab results.index --rebuild`"):
        results_check.run(tmp_path, rebuild=False)
    assert results_check.run(tmp_path, rebuild=True)[1].startswith("1 store(s): index and files agree")


def test_the_query_is_read_only(tmp_path):
    run_into(results_store.open_store(tmp_path, "quick"), "r1", 1e9)
    columns, found = results_query.query(tmp_path, "SELECT host, value FROM samples ORDER BY host")
    assert columns == ["host", "value"] and found == [("*", 1e9), ("localhost", 1e9)]
    elsewhere = tmp_path / "elsewhere.db"
    for sql in (
        "DELETE FROM samples",
        "CREATE TEMP TABLE t (a)",
        f"ATTACH DATABASE '{elsewhere}' AS m",
        "PRAGMA query_only=OFF",
    ):
        with pytest.raises(UserError, match="results.query is read-only") as refused:
            results_query.query(tmp_path, sql)
        assert "\n" not in str(refused.value)
    with pytest.raises(UserError, match="one statement at a time"):
        results_query.query(tmp_path, "SELECT 1; SELECT 2")
    assert rows(tmp_path) and not elsewhere.exists()  # nothing was changed, nothing made


def test_samples_of_a_date(tmp_path):
    store = results_store.open_store(tmp_path, "quick")
    run_into(store, "r1", 1e9, day="2026-11-21")
    run_into(store, "r2", 2e9, day="2026-12-19")
    run_into(results_store.open_store(tmp_path, "other"), "o1", 3e9, day="2026-12-19")
    assert {s.value for s in results_query.samples_at(tmp_path, "quick@2026-12")} == {2e9}
    assert {s.value for s in results_query.samples_at(tmp_path, "@2026-12-19")} == {2e9, 3e9}
    with pytest.raises(UserError, match=r"no samples of campaign quick started then \(it ran on: 2026-11-21\)"):
        results_query.samples_at(tmp_path, "quick@2027")
    with pytest.raises(UserError, match="after @ give a date"):
        results_query.samples_at(tmp_path, "quick@yesterday")


def test_the_index_is_behind_but_the_run_is_not_failed(tmp_path, capsys):
    """An index that cannot be written (here: a directory in its place) costs a line on stderr, never the run."""
    (tmp_path / results_db.FILE).mkdir()
    store = results_store.open_store(tmp_path, "quick")
    run_into(store, "r1", 1e9)
    assert len(store.samples()) == 2
    err = capsys.readouterr().err
    assert "the results index" in err and "is behind" in err and "the next command catches it up" in err


def _campaign():
    from iolab.campaign.model import parse

    raw = {
        "name": "quick",
        "backends": [{"name": "tmpfs", "type": "tmpfs", "size": "64MiB"}],
        "workloads": [{"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s"}],
    }
    return parse(raw, "test", os.getcwd())


def test_the_ledger_keeps_its_id_and_start_and_names_its_plan(tmp_path):
    from iolab.campaign.model import expand

    spec = _campaign()
    store = ResultStore(tmp_path, "quick")
    first = ledger.begin(store, spec, expand(spec), ["localhost"], lease.record("campaign test"))
    again = ledger.begin(store, spec, expand(spec), ["localhost"], lease.record("campaign test"))
    assert (again["id"], again["started"]) == (first["id"], first["started"])
    assert [p["hosts"] for p in again["plan"]] == [["localhost"]]
    assert again["held_by"]["pid"] == os.getpid()
    assert json.loads((store.dir / ledger.FILE).read_text()) == again


def test_a_campaign_file_may_name_a_server_but_never_its_password():
    from iolab.campaign.model import parse

    raw = {
        "name": "quick",
        "backends": [{"name": "tmpfs", "type": "tmpfs", "size": "64MiB"}],
        "workloads": [{"name": "seq", "type": "fio", "profile": "seq-read-1m"}],
    }
    assert parse(raw | {"results_db": "postgresql://iolab@db/iolab"}, "c.yml", os.getcwd()).results_db
    with pytest.raises(UserError) as refused:
        parse(raw | {"results_db": "postgresql://iolab:s3cret@db/iolab"}, "c.yml", os.getcwd())
    assert "results_db" in str(refused.value) and "PGPASSWORD" in str(refused.value)
    assert "s3cret" not in str(refused.value)
    with pytest.raises(UserError, match="not a PostgreSQL URL"):
        parse(raw | {"results_db": "mysql://iolab@db/iolab"}, "c.yml", os.getcwd())


def test_a_server_is_named_without_its_secret():
    from iolab.campaign.results_url import parse

    target = parse("postgresql://iolab:s3cret@lab-db:6543/results", "--to")
    assert target.shown == "iolab@lab-db:6543/results" and "s3cret" not in target.key
    assert target.scrub('FATAL: password "s3cret" refused') == 'FATAL: password "***" refused'
    with pytest.raises(UserError) as refused:
        parse("postgresql://iolab:s3cret@lab-db:6543", "--to")  # no database
    assert "s3cret" not in str(refused.value)


SECRET = "Zz9secret"
UNPARSED = (
    f"postgresql://iolab:a@b:{SECRET}@127.0.0.1:55435/iolab",  # an @ then a : in the password: a "port" quoting it
    f"postgresql://iolab:a@{SECRET}@127.0.0.1:55435/iolab",  # an @: the password's tail in the "host"
    "postgresql://iolab@127.0.0.1:5432x/iolab",  # a port that is not a number
)


@pytest.mark.parametrize("url", UNPARSED)
def test_a_server_url_that_does_not_parse_is_one_line_without_its_secret(tmp_path, url):
    run_into(results_store.open_store(tmp_path, "quick"), "r1", 1e9)
    done = Cli(tmp_path)("results.publish", "--to", url, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and done.stdout == "" and len(lines) == 1, done.stderr
    assert "--to: not a PostgreSQL URL" in lines[0] and "an @ in it is written %40" in lines[0]
    assert SECRET not in done.stderr


def test_a_server_url_that_does_not_parse_never_stops_a_campaign(tmp_path, monkeypatch, capsys):
    """$IOLAB_RESULTS_DB is read as each run is stored: its failure is a line on stderr; every run is stored whole."""
    for url in UNPARSED:
        monkeypatch.setenv("IOLAB_RESULTS_DB", url)
        store = results_store.open_store(tmp_path, "quick")
        run_into(store, "r1", 1e9)
        run_into(store, "r2", 2e9)
    assert len(results_store.open_store(tmp_path, "quick").run_records()) == 2 * len(UNPARSED)
    err = capsys.readouterr().err
    assert err.count("$IOLAB_RESULTS_DB: not a PostgreSQL URL") == 6 * len(UNPARSED) and SECRET not in err


STORE_A_RUN = """
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from iolab.store import record
from iolab.results import store as results_store
from iolab.campaign.model import expand, parse
from support import sample
raw = {"name": "quick", "backends": [{"name": "tmpfs", "type": "tmpfs", "size": "64MiB"}],
       "workloads": [{"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s"}]}
run = expand(parse(raw, "test", os.getcwd()))[0]
store = results_store.open_store(Path(sys.argv[1]), "quick")
record.store_run(store, run, [sample("quick", run.run_id, 1e9)], {"localhost": None})
"""


def test_a_controller_killed_as_a_run_is_indexed_has_stored_its_status(tmp_path):
    """The index (and a server: seconds) hear of a run once its samples and its status are both on disk: killed
    there, the run's record is stored (a resume, seeing its samples, would never write it)."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, results_db.CRASH_ENV: "index", "PYTHONPATH": os.path.join(os.path.dirname(tests), "pyfiles")}
    done = subprocess.run([sys.executable, "-c", STORE_A_RUN, str(tmp_path), tests], env=env, capture_output=True)
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    store = ResultStore(tmp_path, "quick")
    assert len(store.samples()) == 1 and [r["status"] for r in store.run_records()] == ["ok"]
    assert agreement(tmp_path) == {"quick": (1, 1, True)}  # the next command indexes both


def test_a_line_written_twice_is_two_rows_as_the_files_count_it(tmp_path):
    store = results_store.open_store(tmp_path, "quick")
    run_into(store, "r1", 1e9)
    line = store.samples_path.read_bytes().splitlines(keepends=True)[0]
    with store.samples_path.open("ab") as handle:
        handle.write(line)
    assert agreement(tmp_path) == {"quick": (3, 1, True)}
    assert results_check.run(tmp_path, rebuild=True)[1].startswith("1 store(s): index and files agree")


COUNT = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c{}) SELECT {} FROM c"


def test_a_query_is_streamed_and_bounded_in_rows_time_and_memory(tmp_path):
    run_into(results_store.open_store(tmp_path, "quick"), "r1", 1e9)
    with pytest.raises(UserError, match=r"more than 10000 rows; .* --max-rows N \(0: none\)"):
        results_query.query(tmp_path, COUNT.format(" WHERE x <= 10000", "x"))  # 10001 rows
    assert len(results_query.query(tmp_path, COUNT.format(" WHERE x < 30000", "x"), max_rows=0)[1]) == 30000
    with results_query.answer(tmp_path, COUNT.format("", "x"), max_rows=0) as (_, rows):  # without end: as it comes
        assert [next(rows) for _ in range(3)] == [(1,), (2,), (3,)]
    started = time.monotonic()
    with pytest.raises(UserError, match=r"stopped after 1 s; .* --seconds N \(0: no limit\)") as stopped:
        results_query.query(tmp_path, COUNT.format("", "count(*)"), seconds=1)
    assert time.monotonic() - started < 10 and "\n" not in str(stopped.value)
    with pytest.raises(UserError, match="needs more memory than it may take .*; narrow it"):
        results_query.query(tmp_path, "SELECT length(randomblob(100000000))", seconds=0)  # 95 MiB, one value


def test_the_query_reads_a_colon_in_a_string_as_text(tmp_path):
    run_into(results_store.open_store(tmp_path, "quick"), "r1", 1e9)
    assert results_query.query(tmp_path, "SELECT ':name' AS t, count(*) FROM samples WHERE host != ':x'")[1] == [
        (":name", 2)
    ]
    cli = Cli(tmp_path)
    done = cli("results.query", "SELECT value FROM samples", "--format", "json", "--max-rows", "1", check=False)
    assert done.returncode != 0 and done.stderr.strip().splitlines() == [
        "iolab: results.query: more than 1 rows; narrow the statement (WHERE, LIMIT, GROUP BY) or give another cap: "
        "--max-rows N (0: none)"
    ]
    everything = json.loads(cli("results.query", "SELECT value FROM samples", "--format", "json").stdout)
    assert everything == [{"value": 1e9}, {"value": 1e9}]


@pytest.fixture
def read_only_results(small_tmpfs):
    """A results directory on its own tmpfs, made read-only (`remount_ro()`) once the test has written to it."""
    mnt = small_tmpfs("size=64m")

    def remount_ro() -> None:
        results_db.engine(results_db.path_of(mnt)).dispose()  # this process's connections closed: nothing busy
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)

    return mnt, remount_ro


@pytest.mark.parametrize("indexed", [True, False])
def test_read_commands_read_a_read_only_results_directory(read_only_results, indexed):
    results, remount_ro = read_only_results
    run_into(results_store.open_store(results, "quick"), "r1", 1e9, day="2026-11-21")
    run_into(ResultStore(results, "quick"), "r2", 2e9, day="2026-11-21")  # past the index
    if not indexed:
        for path in results.glob(f"{results_db.FILE}*"):
            path.unlink()
    remount_ro()
    cli = Cli(results)
    asked = cli("results.query", "SELECT count(*) AS n FROM samples", "--format", "json")
    said = asked.stderr.strip().splitlines()
    assert json.loads(asked.stdout) == [{"n": 2 if indexed else 4}] and len(said) == 1, asked.stderr
    assert (
        "is read-only: its index is read as it is, and may be behind its files" in said[0]
        if indexed
        else "is read-only and has no index: one is made from its files for now" in said[0]
    )
    assert "quick" in cli("status").stdout
    assert "quick" in cli("report.history", "--format", "json").stdout
    cli("report.compare", "quick@2026-11-21", "quick@2026-11-21")


def test_an_index_another_command_holds_is_said_so_not_deleted(tmp_path, monkeypatch):
    import sqlite3

    run_into(results_store.open_store(tmp_path, "quick"), "r1", 1e9)
    results_db.engine(results_db.path_of(tmp_path)).dispose()
    results_db.engine.cache_clear()
    monkeypatch.setattr(results_db, "BUSY_S", 1, raising=False)  # (054bd16 had none: it waited 60 s)
    holder = sqlite3.connect(results_db.path_of(tmp_path), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another command's write, in progress
    try:
        with pytest.raises(UserError, match=r"is held by another command .*run this again when that one") as held:
            results_index.open_index(tmp_path)
        assert "delete" not in str(held.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        results_db.engine.cache_clear()
