"""MLPerf Storage v3.0's rules as a mode (`mlperf: true`), each rule obeyed and broken, and `report --format mlperf`.

The checkpoint records are the host program's own (real ranks writing, fsyncing and reading real files under
tmp_path); where the data and the results lie is read by iolab.host.facts from this machine's mounts.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.campaign import model as campaign_mod
from iolab.errors import UserError
from iolab.host import facts
from iolab.kinds.checkpoint import parser
from iolab.measures import host_flags, validity
from iolab.measures.samples import AGGREGATE_HOST, Sample
from iolab.report import mlperf as report_mlperf
from iolab.workloads import mlperf

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = [{"name": "m", "type": "tmpfs", "size": "1GiB"}]
RAM = [facts.meminfo()["MemTotal"]]  # this machine's, as bench.all reads each host's


def load(workloads: list[dict], dataset: dict | None = None, memory=None, **top) -> campaign_mod.Campaign:
    raw = {"name": "t", "backends": BACKENDS, "workloads": workloads, **top}
    if dataset is not None:
        raw["dataset"] = dataset
    return campaign_mod.parse(raw, "t.yml", ROOT, memory=memory)


# --- the mode: what `mlperf: true` fills in, and what it refuses -----------------------------------------------


def test_the_mode_on_the_campaign_runs_ten_checkpoints_of_the_models_process_count():
    spec = load([{"name": "ck", "type": "checkpoint", "model": "llama3-70b", "scale": 0.0001}], mlperf=True)
    workload = spec.workloads[0]
    assert (workload.mlperf_rules, workload.checkpoints, workload.ranks) == (True, 10, 64)
    assert workload.role_vars("/t")["bench_checkpoint_count"] == 10
    plain = load([{"name": "ck", "type": "checkpoint", "scale": 0.001}]).workloads[0]
    assert (plain.mlperf_rules, plain.checkpoints, plain.ranks) == (False, 1, None)


def test_the_mode_on_a_training_workload_asks_five_runs_after_a_warm_up():
    entry = {"name": "u", "type": "mlperf", "workload": "unet3d", "lab_scale": True, "mlperf": True}
    spec = load([entry], {"kind": "unet3d", "files": 8})
    assert spec.repetitions == 5 and spec.workloads[0].warmup and spec.workloads[0].mlperf_rules
    assert spec.workloads[0].mlperf == "unet3d"  # the preset it stands for, as before
    assert load([entry], {"kind": "unet3d", "files": 8}, repetitions=3).repetitions == 3  # said: flagged, not changed


def test_rule_3_1_2_refuses_a_data_set_below_the_hosts_ram_before_anything_runs():
    entry = {"name": "u", "type": "mlperf", "workload": "unet3d", "mlperf": True}
    with pytest.raises(UserError) as refused:
        load([entry], {"kind": "unet3d", "files": 10}, memory=lambda: RAM)
    line = str(refused.value)
    assert "\n" not in line and "rule 3.1.2 (trainingRecalculateDatasetSize)" in line
    assert "the data set has 10 files" in line and "files: auto" in line and "lab_scale: true" in line
    needed = mlperf.required_samples("unet3d", 7, 1, RAM)
    assert load([entry], {"kind": "unet3d", "files": needed}, memory=lambda: RAM).workloads[0].mlperf_rules
    assert load([{**entry, "lab_scale": True}], {"kind": "unet3d", "files": 10}).workloads[0].lab_scale


@pytest.mark.parametrize(
    "workload, says",
    [
        ({"name": "f", "type": "fio", "rw": "read", "size": "1M"}, "'fio' has none"),
        (
            {"name": "ck", "type": "checkpoint", "model": "llama3-70b", "ranks": 8, "subset": True, "scale": 0.001},
            "subset run for llama3-8b on 8 processes only (rule 4.3.5)",
        ),
        (
            {"name": "ck", "type": "checkpoint", "ranks": 16, "subset": True, "scale": 0.001},
            "subset run for llama3-8b on 8 processes only (rule 4.3.5)",
        ),
    ],
)
def test_what_the_mode_refuses_in_one_line(workload, says):
    with pytest.raises(UserError) as refused:
        load([workload], mlperf=True)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_subset_run_of_llama3_8b_on_8_processes_is_accepted():
    ck = {"name": "ck", "type": "checkpoint", "ranks": 8, "subset": True, "scale": 0.001}
    assert load([ck], mlperf=True).workloads[0].subset


# --- the host's record: 10 checkpoints written, each fsynced, then 10 read; the gap -------------------------------


@pytest.fixture(scope="module")
def ten_checkpoints(tmp_path_factory) -> Path:
    """The host program's record of 4 ranks writing 10 checkpoints of 1 MiB shards, then reading them back."""
    base = tmp_path_factory.mktemp("ckpt")
    env = {"PYTHONPATH": str(ROOT / "pyfiles")}
    common = ["--dir", str(base / "work"), "--out", str(base / "run"), "--world", "4", "--count", "10"]
    program = [sys.executable, "-m", "iolab.kinds.checkpoint.host"]
    subprocess.run([*program, "write", *common, "--bytes-per-rank", str(1 << 20)], check=True, env=env)
    assert len(list((base / "work").glob("ckpt-rank*"))) == 40  # 4 ranks × 10 checkpoints, each its own file
    subprocess.run([*program, "read", *common, "--remove"], check=True, env=env)
    assert not any((base / "work").iterdir())
    return base / "run"


def test_the_host_writes_ten_checkpoints_each_fsynced_then_reads_ten(ten_checkpoints):
    record = json.loads((ten_checkpoints / "checkpoint.json").read_text())
    for phase in ("write", "read"):
        assert record[phase]["count"] == 10
        assert sorted({(r["checkpoint"], r["rank"]) for r in record[phase]["ranks"]}) == [
            (k, r) for k in range(1, 11) for r in range(4)
        ]
    writes = record["write"]["ranks"]
    # each checkpoint starts when every rank has ended the one before (a barrier): they follow each other
    for k in range(1, 10):
        assert max(r["ended_at"] for r in writes if r["checkpoint"] == k) <= min(
            r["started_at"] for r in writes if r["checkpoint"] == k + 1
        )
    parsed = parser.parse(ten_checkpoints)
    assert parsed.metadata["checkpoint_count"] == {"write": 10, "read": 10}
    assert parsed.metadata["checkpoint"]["write"] == {"bytes": 4 << 20, "ranks": 4}  # one checkpoint's
    assert parsed.metadata["checkpoint_fsync"] is True
    assert 0 < parsed.metadata["checkpoint_read_gap_s"] < 30


def host_meta(run_dir: Path, data: Path | str, results: Path | str, memory: int) -> dict:
    """A host's sample metadata as record.py makes it: the parser's, the host's facts, the cache drop."""
    meta = dict(parser.parse(run_dir).metadata)
    meta["host"] = {**facts.collect(str(data), results), "memory_bytes": memory}
    meta["cache_state"] = "dropped"
    meta["checkpoint_resident_before_read_bytes"] = 0  # what fincore says of a cold read
    return meta


RULES_ON = {"mlperf_rules": True, "model": "llama3-8b", "accelerator": "b200"}


def test_a_run_that_obeys_the_host_rules_is_not_flagged(ten_checkpoints, tmp_path):
    meta = host_meta(ten_checkpoints, "/dev/shm", tmp_path, 64 << 30)  # a tmpfs beside the root's results
    assert meta["host"]["mount"]["target"] != meta["host"]["results_mount"]["target"]
    assert mlperf.host_rules(meta, RULES_ON, "h1") == []
    assert mlperf.host_rules({}, {"mlperf_rules": False}, "h1") == []  # not asked for: not checked


@pytest.mark.parametrize(
    "change, flag, rule",
    [
        (lambda m: m.update(checkpoint_count={"write": 1, "read": 1}), "mlperf_checkpoints", "4.7.1"),
        (lambda m: m.update(checkpoint_fsync=False), "mlperf_fsync", "4.3.2"),
        (lambda m: m.update(cache_state="not dropped (cache: keep)"), "mlperf_cache_cleared", "4.3.1"),
        (lambda m: m.update(checkpoint_resident_before_read_bytes=1 << 20), "mlperf_cache_cleared", "4.3.1"),
        (lambda m: m.update(checkpoint_read_gap_s=31.0), "mlperf_read_gap", "4.7.1"),
        (lambda m: m["checkpoint"]["write"].update(ranks=3), "mlperf_per_host", "4.6.2"),
        (lambda m: m["host"].update(results_mount=m["host"]["mount"]), "mlperf_filesystems", "3.4.2/4.4.2"),
        (lambda m: m["host"].pop("results_mount"), "mlperf_filesystems", "3.4.2/4.4.2"),
    ],
)
def test_each_host_rule_broken_is_flagged_with_its_number(ten_checkpoints, tmp_path, change, flag, rule):
    meta = copy.deepcopy(host_meta(ten_checkpoints, "/dev/shm", tmp_path, 64 << 30))
    change(meta)
    assert [name for name, _ in mlperf.host_rules(meta, RULES_ON, "h1")] == [flag]
    sample = Sample("c", "r1", 1, "h1", "b", "ck", "checkpoint_write_bw", 1.0, "B/s", "t0", "t1", RULES_ON, meta)
    flags, _ = host_flags.host_run_check([sample])
    assert [f.name for f in flags] == [flag]
    assert flags[0].reason.startswith(f"MLPerf Storage rule {rule} (") and not flags[0].blocking


def test_a_client_writing_3x_its_ram_needs_no_cold_read(ten_checkpoints, tmp_path):
    meta = host_meta(ten_checkpoints, "/dev/shm", tmp_path, 1 << 20)  # 40 MiB written, 1 MiB of "RAM"
    meta["cache_state"] = "not dropped (cache: keep)"
    assert mlperf.host_rules(meta, RULES_ON, "h1") == []


def test_the_local_disk_under_the_results_breaks_rule_4_4_2(ten_checkpoints, tmp_path):
    meta = host_meta(ten_checkpoints, tmp_path, tmp_path / "run", 64 << 30)  # this machine: one file system
    assert [name for name, _ in mlperf.host_rules(meta, RULES_ON, "h1")] == ["mlperf_filesystems"]


@pytest.mark.parametrize(
    "params, ranks, flags",
    [
        ({"model": "llama3-8b"}, 8, []),
        ({"model": "llama3-8b"}, 6, ["mlperf_processes"]),
        ({"model": "llama3-1t", "accelerator": "mi355"}, 1024, []),
        # 200 H100s hold 16 TB, less than llama3-1t's 18 TB checkpoint (and 200 is not its 1,024)
        ({"model": "llama3-1t", "accelerator": "h100"}, 200, ["mlperf_processes", "mlperf_accelerator_memory"]),
    ],
)
def test_the_jobs_process_count_and_accelerator_memory(params, ranks, flags):
    assert [name for name, _ in mlperf.checkpoint_run_rules({**RULES_ON, **params}, ranks)] == flags


# --- the training rules over the runs, the mean of five, and the MLPerf-shaped report ---------------------------

TRAIN = {"mlperf": "unet3d", "mlperf_rules": True, "batch_size": 7, "accelerators": 2, "warmup": True, "reseed": True}


def train_run(run_id: str, rep: int, minute: int, read_gib: float, backend: str = "b", **params) -> list[Sample]:
    """One training run on two hosts: each host's AU and read_bw, and the aggregate's."""
    at = (f"2026-11-25T10:{minute:02d}:00.000000Z", f"2026-11-25T10:{minute:02d}:50.000000Z")
    places = {
        "mount": {"target": "/mnt/iolab/b", "source": "tmpfs"},
        "results_mount": {"target": "/", "source": "/dev/vda"},
    }
    meta = {"host": {"memory_bytes": 1 << 30, **places}, "dataset_samples": 10**6}
    make = dict(campaign="c", run_id=run_id, repetition=rep, backend=backend, workload="u", metadata=meta)
    out = []
    for host, au in (("h1", 95.0 - rep), ("h2", 97.0)):
        out += [
            Sample(host=host, metric="au", value=au, unit="%", started_at=at[0], ended_at=at[1], **make),
            Sample(
                host=host,
                metric="read_bw",
                value=read_gib / 2 * (1 << 30),
                unit="B/s",
                started_at=at[0],
                ended_at=at[1],
                **make,
            ),
        ]
    out += [
        Sample(
            host=AGGREGATE_HOST,
            metric="read_bw",
            value=read_gib * (1 << 30),
            unit="B/s",
            started_at=at[0],
            ended_at=at[1],
            **make,
        ),
        Sample(
            host=AGGREGATE_HOST,
            metric="samples_per_s",
            value=10.0 * read_gib,
            unit="samples/s",
            started_at=at[0],
            ended_at=at[1],
            **make,
        ),
    ]
    for s in out:
        s.params.update({**TRAIN, **params})
    return out


def five_runs(between: bool = False) -> list[Sample]:
    samples = [s for rep in range(1, 6) for s in train_run(f"r{rep}", rep, rep * 2, float(rep))]
    if between:  # another workload's run on the same backend, between the third and the fourth
        samples += [s.__class__(**{**s.__dict__, "workload": "other", "params": {}}) for s in train_run("x", 1, 7, 1.0)]
    return samples


def flags_of(samples: list[Sample], run_id: str = "r1") -> dict[str, str]:
    return {f.name: f.reason for f in validity.assess(samples).of(run_id) if f.name.startswith("mlperf_")}


def test_five_consecutive_runs_after_a_warm_up_obey_the_run_rules():
    assert flags_of(five_runs()) == {}


def test_a_run_between_the_measured_ones_breaks_rule_2_1_18():
    flags = flags_of(five_runs(between=True))
    assert list(flags) == ["mlperf_consecutive"]
    assert flags["mlperf_consecutive"].startswith("MLPerf Storage rule 2.1.18 (runTimestampGap): u: 1 other run(s)")


def test_fewer_than_five_runs_and_no_warm_up_break_rule_2_1_17():
    samples = [s for rep in range(1, 4) for s in train_run(f"r{rep}", rep, rep * 2, 1.0, warmup=False)]
    flags = flags_of(samples)
    assert set(flags) == {"mlperf_repetitions", "mlperf_warmup"}
    assert all(reason.startswith("MLPerf Storage rule 2.1.17 (runTimestamps)") for reason in flags.values())
    row = next(r for r in validity.annotate(samples) if r["run_id"] == "r1")
    assert (
        row["mlperf_rules_followed"] is False and row["valid"] is True
    )  # comparable with each other, not with MLPerf's


def test_the_result_is_the_mean_of_the_five_runs():
    runs = [[s for s in five_runs() if s.run_id == f"r{rep}"] for rep in range(1, 6)]
    assert report_mlperf.mean_of_runs(runs, "read_bw") == 3 * (1 << 30)  # (1 + 2 + 3 + 4 + 5) / 5 GiB/s
    assert report_mlperf.mean_of_runs(runs, "au", min) == 92.0  # each run's lowest host: 94, 93, 92, 91, 90


def test_report_format_mlperf_lays_out_training_and_checkpointing_rows(ten_checkpoints, tmp_path):
    meta = host_meta(ten_checkpoints, "/dev/shm", tmp_path, 64 << 30)
    ckpt_params = {**RULES_ON, "checkpoints": 10}
    checkpoint = [
        Sample("c", "k1", 1, "h1", "b", "ck", f"checkpoint_{m}", v, u, "t0", "t1", ckpt_params, meta)
        for m, v, u in (
            ("write_bw", 2 * (1 << 30), "B/s"),
            ("read_bw", 4 * (1 << 30), "B/s"),
            ("write_s", 2.0, "s"),
            ("read_s", 1.0, "s"),
        )
    ]
    text = report_mlperf.text(five_runs(between=True) + checkpoint)
    training, checkpointing = text.split("\n\n")
    assert training.splitlines()[1] == "| " + " | ".join(report_mlperf.TRAINING) + " |"
    assert "| u | b | — | 2 | 4 | 3.00 | 30.0 | 92.0 | 5 | 2.1.18 |" in training
    assert checkpointing.splitlines()[0].startswith("MLPerf-Storage-style checkpointing (each figure the mean")
    # one host of 4 ranks, both below rule 4.6.1's 8 processes for llama3-8b
    assert "| ck | b | llama3-8b | 1 | 4 | 2.00 | 4.00 | 2.00 | 1.00 | 1 | 4.6.1 |" in checkpointing
    with pytest.raises(UserError, match="^no MLPerf-Storage-style workload in this campaign \\(0 samples;"):
        report_mlperf.text([])  # issue 37: an empty store was exit 0


def test_a_resumed_run_without_an_aggregate_adds_its_hosts_up_as_the_catalogue_does():
    """Issue 37: a run resumed to fill one host's gap has no host "*": its hosts' read_bw was averaged."""
    meta = {"validity": {"valid": True, "flags": [], "reasons": []}}
    run = [
        Sample("c", "r1", 1, host, "b", "u", metric, value, unit, "t0", "t1", RULES_ON, meta)
        for host in ("h1", "h2")
        for metric, value, unit in (("read_bw", float(1 << 30), "B/s"), ("au", 95.0 if host == "h1" else 91.0, "%"))
    ]
    assert report_mlperf.mean_of_runs([run], "read_bw") == 2 * (1 << 30)  # summed, not their mean
    assert report_mlperf.mean_of_runs([run], "au", min) == 91.0  # not added up: the lowest host


def test_a_tmpfs_must_hold_all_ten_checkpoints_at_once():
    """Every checkpoint is written before the first is read: ten of 10.5 MB need 105 MB, more than 64 MiB."""
    small = [{"name": "m", "type": "tmpfs", "size": "64MiB"}]
    ck = {"name": "ck", "type": "checkpoint", "scale": 0.0001}
    assert campaign_mod.parse({"name": "t", "backends": small, "workloads": [ck]}, "t.yml", ROOT).workloads
    with pytest.raises(UserError, match=r"its checkpoint \(105 MB\) does not fit tmpfs backend m \(64 MiB\)"):
        campaign_mod.parse({"name": "t", "backends": small, "workloads": [ck], "mlperf": True}, "t.yml", ROOT)


def test_the_dry_run_says_which_workloads_the_rules_apply_to(tmp_path):
    from iolab.run import bench
    from iolab.run import cli as cli_mod

    spec = load([{"name": "ck", "type": "checkpoint", "scale": 0.0001, "mlperf": True}])
    said = bench.describe(spec, cli_mod.lab(None, "localhost"))
    assert "MLPerf Storage v3.0's rules (mlperf: true) for ck: each rule a run breaks is flagged" in said
    assert "bench_checkpoint_count: 10" in said and "bench_checkpoint_ranks: 8" in said


def test_mlperf_v3s_llama3_file_under_the_rules_is_one_run_of_ten_checkpoints():
    """The file's num_checkpoints_write: 10 asks for ten repetitions of one checkpoint; under the rules one run
    writes its ten, then reads them back."""
    entry = {"name": "ck", "type": "dlio", "config": "mlperf-v3-llama3_8b.yaml", "scale": 0.001, "mlperf": True}
    raw = {"name": "t", "backends": [{"name": "m", "type": "tmpfs", "size": "4GiB"}], "workloads": [entry]}
    spec = campaign_mod.parse(raw, "t.yml", ROOT / "tests" / "fixtures" / "dlio")
    workload = spec.workloads[0]
    assert (spec.repetitions, workload.checkpoints, workload.ranks, workload.mlperf_rules) == (1, 10, 8, True)
    with pytest.raises(UserError, match="set the campaign's repetitions: 10"):  # without the rules, as before
        campaign_mod.parse({**raw, "workloads": [{**entry, "mlperf": False}]}, "t.yml", ROOT / "tests/fixtures/dlio")


def test_the_data_set_rule_takes_the_largest_point_of_a_sweep():
    entry = {"name": "u", "type": "mlperf", "workload": "unet3d", "accelerators": [1, 4], "mlperf": True}
    needed = mlperf.required_samples("unet3d", 7, 4, RAM)
    with pytest.raises(UserError, match=f"asks for {needed:,} on the 1 selected host"):
        load([entry], {"kind": "unet3d", "files": needed - 1}, memory=lambda: RAM)
    assert len(load([entry], {"kind": "unet3d", "files": needed}, memory=lambda: RAM).workloads) == 2
    swept = load(
        [{"name": "ck", "type": "checkpoint", "model": ["llama3-8b", "llama3-70b"], "scale": 0.0001}], mlperf=True
    )
    assert [(w.model, w.writers, w.checkpoints) for w in swept.workloads] == [
        ("llama3-8b", 8, 10),
        ("llama3-70b", 8, 10),
    ]
