"""Questions answered from the results index: report.history's series, report.compare between dates, status.

Three campaigns of one workload, a month apart; the third reads 20 % slower on one backend.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from iolab.drive import lease
from iolab.errors import UserError
from iolab.measures.samples import AGGREGATE_HOST
from iolab.report import compare, history_series, status
from iolab.results import store as results_store
from iolab.store import ledger
from support import Cli, record, sample

GIB = 1 << 30
MONTHS = ("2026-10-01", "2026-11-01", "2026-12-01")


def campaign(results, name: str, day: str, values: dict[str, list[float]], flags=(), plan=None):
    """A store of `name` with each backend's repeats of seq's read_bw (a host's and the aggregate)."""
    store = results_store.open_store(results, name)
    store.dir.mkdir(parents=True, exist_ok=True)
    found = {
        "schema": ledger.SCHEMA,
        "id": f"{name}-{day}".ljust(32, "0"),
        "name": name.split(".")[0],
        "started": f"{day}T06:00:00.000000Z",
        "iolab_version": "0.1.0",
        "plan": plan or [],
        "controller": "elsewhere",
    }
    (store.dir / ledger.FILE).write_text(json.dumps(found))
    for backend, repeats in values.items():
        for rep, value in enumerate(repeats, 1):
            run_id = f"{name}-{backend}-{rep}"
            why = [f"localhost: {f} (recorded with the run)" for f in flags]
            meta = {"flags": list(flags), "flag_reasons": why, "validity": {"valid": not flags, "flags": list(flags)}}
            for host in ("localhost", AGGREGATE_HOST):
                store.add_samples(
                    [
                        sample(
                            found["name"],
                            run_id,
                            value,
                            host=host,
                            day=day,
                            backend=backend,
                            repetition=rep,
                            metadata=meta,
                        )
                    ]
                )
            store.add_run_records([record(run_id)])
    return store


@pytest.fixture
def months(tmp_path):
    campaign(tmp_path, "vendors", MONTHS[0], {"a": [4 * GIB, 4.1 * GIB, 3.9 * GIB], "b": [2 * GIB, 2.02 * GIB]})
    campaign(tmp_path, "vendors.20261201T000000Z", MONTHS[1], {"a": [4 * GIB, 4 * GIB], "b": [2 * GIB, 2 * GIB]})
    campaign(
        tmp_path,
        "vendors-dec",
        MONTHS[2],
        {"a": [3.2 * GIB, 3.2 * GIB], "b": [2 * GIB, 2.01 * GIB]},
        ["potential_caching"],
    )
    return tmp_path


def test_history_draws_each_backend_over_time_with_its_spread_and_regressions(months):
    found = {s.backend: s for s in history_series.build(months, ["read_bw"])}
    assert set(found) == {"a", "b"}
    a = found["a"]
    assert [p.store for p in a.points] == ["vendors", "vendors.20261201T000000Z", "vendors-dec"]
    assert [p.when[:10] for p in a.points] == list(MONTHS)
    first = a.points[0]
    assert (first.median, min(first.values), max(first.values), len(first.values)) == (4 * GIB, 3.9 * GIB, 4.1 * GIB, 3)
    assert first.iqr == (3.95 * GIB, 4.05 * GIB)
    assert [p.regressions for p in a.points] == [[], [], ["read_bw >= -5%"]]  # the default rule: 5 % the worse way
    assert a.points[2].change == pytest.approx(-0.2) and a.points[2].flagged
    assert not any(p.regressions for p in found["b"].points)


def test_history_judges_by_the_rules_given_as_report_compare_does(months):
    lenient = [compare.parse_rule("read_bw >= -25%")]
    assert not any(p.regressions for s in history_series.build(months, ["read_bw"], rules=lenient) for p in s.points)
    shown = json.loads(history_series.to_json(history_series.build(months, ["read_bw"], backend="a")))
    assert [p["regressions"] for p in shown[0]["points"]] == [[], [], ["read_bw >= -5%"]]
    with pytest.raises(UserError, match="no samples of read_bw on backend 'c'"):
        history_series.build(months, ["read_bw"], backend="c")


def test_compare_between_two_dates_uses_the_same_rules(months):
    a, b = compare.sides(months, "vendors@2026-10", "vendors-dec@2026-12-01")
    result = compare.compare(a, b, [compare.parse_rule("read_bw >= -5%")])
    broken = result.violations()
    assert len(broken) == 1 and broken[0].startswith("REGRESSION read_bw of seq on a:")


def test_status_counts_runs_and_names_the_rules_they_break(months):
    plan = [{"run_id": f"p-{i}", "hosts": ["localhost"], "config_hash": "c1"} for i in range(4)]
    store = campaign(months, "planned", "2027-01-01", {"a": [1 * GIB]}, plan=plan)
    store.add_samples([sample("planned", "p-0", 1.0)])  # p-0: stored
    store.add_run_records([record("p-1", "failed")])  # p-1 failed; p-2, p-3: missing
    found = {s.store: s for s in status.collect(months)}
    assert found["planned"].counts == {"ok": 1, "failed": 1, "running": 0, "missing": 2}
    assert found["vendors"].counts == {"ok": 5, "failed": 0, "running": 0, "missing": 0}
    runs, why = found["vendors-dec"].rules["potential_caching"]  # the flag recorded with its runs
    assert runs == 4 and why == "localhost: potential_caching (recorded with the run)"
    assert "repeats_disagree" not in found["vendors"].rules  # within ±5 %


def test_a_campaign_held_by_a_live_command_is_running(months):
    plan = [{"run_id": "p-0", "hosts": ["localhost"], "config_hash": "c1"}]
    store = campaign(months, "live", "2027-01-01", {}, plan=plan)
    found = ledger.read(store.dir) | {"held_by": lease.record("campaign live")}  # this process: alive
    (store.dir / ledger.FILE).write_text(json.dumps(found))
    (shown,) = status.collect(months, "live")
    assert shown.counts["running"] == 1 and f"PID {os.getpid()}" in shown.held_by
    found["held_by"]["pid_start"] = str(time.time())  # a PID that is not that process any more: gone
    (store.dir / ledger.FILE).write_text(json.dumps(found))
    (shown,) = status.collect(months, "live")
    assert shown.counts == {"ok": 0, "failed": 0, "running": 0, "missing": 1} and not shown.held_by


def test_status_says_which_campaigns_compare(months):
    same = [{"run_id": "x", "config_hash": "c1"}]
    campaign(months, "jan", "2027-01-01", {"a": [GIB]}, plan=same)
    campaign(months, "feb", "2027-02-01", {"a": [GIB]}, plan=same)
    campaign(months, "mar", "2027-03-01", {"a": [GIB]}, plan=[{"run_id": "y", "config_hash": "c2"}])
    found = {s.store: s for s in status.collect(months)}
    assert found["jan"].comparable["feb"] == ""
    assert found["jan"].comparable["mar"] == "workloads differ (0 of 2 workload points shared)"
    assert "a store without a ledger" in found["jan"].comparable["vendors"]
    with pytest.raises(UserError, match="no campaign 'nope'"):
        status.collect(months, "nope")


def test_a_campaign_the_fault_preflight_refuses_leaves_no_store(tmp_path):
    """Refused before anything runs (a fault on a host that is not the run's): no ledger, so no campaign in status."""
    fio = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "10s", "ramp": "0s", "size": "16MiB"}
    faulted = {**fio, "faults": [{"at": "5s", "what": "tool_kill", "host": "gpu02"}]}
    path = tmp_path / "refused.yml"
    backend = {"name": "itest-refused", "type": "tmpfs", "size": "48MiB"}
    path.write_text(json.dumps({"name": "refused", "workloads": [faulted], "backends": [backend]}))
    cli = Cli(tmp_path / "results")
    done = cli.bench(path, check=False)  # (after another test run's campaign that holds localhost)
    assert done.returncode != 0 and "not a host of the run" in done.stderr, done.stdout + done.stderr
    assert not (tmp_path / "results" / "refused" / ledger.FILE).exists()
    assert "refused" not in cli("status").stdout
