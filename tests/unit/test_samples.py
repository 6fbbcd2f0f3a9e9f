import json

import pytest

from iolab.measures.samples import AGGREGATE_HOST, ResultStore
from support import plain_sample


def sample(run_id="r1", host="h1", metric="read_bw", value=1.0):
    return plain_sample(run_id=run_id, host=host, metric=metric, value=value)


def test_samples_round_trip_with_every_contract_field(tmp_path):
    store = ResultStore(tmp_path, "c")
    store.add_samples([sample(), sample(host=AGGREGATE_HOST)])
    line = json.loads(store.samples_path.read_text().splitlines()[0])
    assert set(line) == {
        "schema",
        "campaign",
        "run_id",
        "repetition",
        "host",
        "backend",
        "workload",
        "metric",
        "value",
        "unit",
        "started_at",
        "ended_at",
        "params",
        "metadata",
    }
    assert store.samples() == [sample(), sample(host=AGGREGATE_HOST)]


def test_completed_counts_hosts_not_the_aggregate(tmp_path):
    store = ResultStore(tmp_path, "c")
    store.add_samples([sample(host="h1"), sample(host=AGGREGATE_HOST), sample(run_id="r2", host="h2")])
    assert store.completed() == {("r1", "h1"), ("r2", "h2")}


def test_a_line_torn_by_a_crash_is_ignored_then_cut(tmp_path):
    store = ResultStore(tmp_path, "c")
    store.add_samples([sample()])
    with store.samples_path.open("a") as handle:
        handle.write('{"campaign": "c", "run_id": "half')  # what a crash mid-write leaves
    assert store.samples() == [sample()]
    store.add_samples([sample(run_id="r2")])
    assert [s.run_id for s in store.samples()] == ["r1", "r2"]
    assert all(json.loads(line) for line in store.samples_path.read_text().splitlines())


def test_units_are_canonical():
    with pytest.raises(ValueError, match="unit 'MB/s'"):
        plain_sample(unit="MB/s")
