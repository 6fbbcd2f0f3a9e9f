"""More repetitions where repeats disagree (issue 6): decided from the samples in a real store."""

from __future__ import annotations

from pathlib import Path

from iolab.campaign import model as campaign
from iolab.campaign.repeats import more_repetitions
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample

SPEC = {
    "name": "rep",
    "repetitions": 2,
    "max_repetitions": 4,
    "backends": [{"name": "mem", "type": "tmpfs", "size": "64MiB"}],
    "workloads": [{"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "numjobs": [1, 2]}],
}


def store_values(store: ResultStore, runs: list[campaign.Run], values: list[float]) -> None:
    store.add_samples(
        Sample(
            campaign="rep",
            run_id=r.run_id,
            repetition=r.repetition,
            host=AGGREGATE_HOST,
            backend=r.backend.name,
            workload=r.workload.name,
            metric="read_bw",
            value=v,
            unit="B/s",
            started_at="",
            ended_at="",
            params=r.params,
        )
        for r, v in zip(runs, values, strict=False)
    )


def test_disagreeing_repeats_get_one_more_repetition_at_a_time_up_to_the_cap(tmp_path: Path):
    spec = campaign.parse(SPEC, "test", tmp_path)
    runs = campaign.expand(spec)
    one, two = [r for r in runs if r.params["numjobs"] == 1], [r for r in runs if r.params["numjobs"] == 2]
    store = ResultStore(tmp_path, "rep")
    store_values(store, one, [100.0, 100.0])  # agree
    store_values(store, two, [100.0, 130.0])  # ±13%: disagree
    more = more_repetitions(spec, store.samples(), runs, "mem")
    assert [(r.params["numjobs"], r.repetition) for r in more] == [(2, 3)]
    assert more[0].run_id not in {r.run_id for r in runs}

    store_values(store, more, [101.0])  # still ±13% around the median of three
    fourth = more_repetitions(spec, store.samples(), runs, "mem")
    assert [(r.params["numjobs"], r.repetition) for r in fourth] == [(2, 4)]
    store_values(store, fourth, [129.0])
    assert more_repetitions(spec, store.samples(), runs, "mem") == []  # the cap: the report flags them


def test_a_missing_repetition_is_filled_before_any_extra_one(tmp_path: Path):
    spec = campaign.parse(SPEC, "test", tmp_path)
    runs = campaign.expand(spec)
    two = [r for r in runs if r.params["numjobs"] == 2]
    store = ResultStore(tmp_path, "rep")
    store_values(store, two[:1], [100.0])
    assert more_repetitions(spec, store.samples(), runs, "mem") == []


def test_without_a_cap_above_repetitions_nothing_more_runs(tmp_path: Path):
    spec = campaign.parse({**SPEC, "max_repetitions": None}, "test", tmp_path)
    runs = campaign.expand(spec)
    store = ResultStore(tmp_path, "rep")
    store_values(store, runs, [100.0, 200.0, 100.0, 300.0])
    assert more_repetitions(spec, store.samples(), runs, "mem") == []
