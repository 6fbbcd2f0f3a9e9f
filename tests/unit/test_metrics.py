"""The metric catalogue (iolab.measures.metrics): every metric a parser emits is declared there, in its unit.

Each parser runs over the tests' fixtures (fio's and telemetry's captured runs) and over
documents shaped as the host-side tools write them (the loader, the checkpoint, object and
metadata benchmarks); a metric one of them emits that no METRICS tuple declares, or declares
in another unit, fails here before it can be a silent report error.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from iolab.kinds.checkpoint import parser as checkpoint
from iolab.kinds.metadata import parser as metadata_parser
from iolab.kinds.objects import parser as objects
from iolab.kinds.pytorch import parser as pytorch
from iolab.measures import metrics
from iolab.measures.samples import ResultStore
from iolab.parsers import Measurement, fio, telemetry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def undeclared(found: list[tuple[str, str]]) -> list[str]:
    """'name (unit)' of each (metric, unit) the catalogue lacks, or declares in another unit."""
    return [f"{name} ({unit})" for name, unit in found if metrics.of(name).unit != unit]


def emitted(measurements: list[Measurement]) -> list[tuple[str, str]]:
    return [(m.metric, m.unit) for m in measurements]


@pytest.mark.parametrize("case", sorted(p.name for p in (FIXTURES / "fio").iterdir() if (p / "fio.json").exists()))
def test_fio_declares_what_it_emits(case: str) -> None:
    try:
        parsed = fio.parse(FIXTURES / "fio" / case)
    except fio.ParseError:
        pytest.skip(f"{case}: a fixture of fio's failures, no figures")
    assert undeclared(emitted(parsed.measurements)) == []


@pytest.mark.parametrize("case", sorted(p.parent.name for p in (FIXTURES / "telemetry").glob("*/telemetry.jsonl")))
def test_telemetry_declares_its_summaries_and_its_series(case: str) -> None:
    host_dir = FIXTURES / "telemetry" / case
    found, _ = telemetry.merge(host_dir, [])
    series = sorted({name.split("{")[0] for name in telemetry.load_series(host_dir)})
    assert found and series
    assert undeclared(emitted(found)) == []
    assert [name for name in series if metrics.of(name) is metrics.UNDECLARED] == []


def loader_document(tmp_path: Path) -> Path:
    """A loader.json as iolab.host.loader writes it: one emulated-accelerator rank, two epochs, a GPU, strace."""
    records = [[0, step, 100.0 + step, 100.5 + step, 0.4, 0, 10, 1000] for step in range(4)]
    rank = {
        "rank": 0,
        "records": records,
        "window": {"start": 100.5, "end": 104.0},
        "cpu_seconds": 1.0,
        "epochs": [{"epoch": e, "started_at": 100.0 + 2 * e, "ended_at": 102.0 + 2 * e} for e in (0, 1)],
        "gpu": {"name": "stand-in", "utilization": [[101.0, 50.0], [102.0, 70.0]]},
        "strace": "strace.txt",
    }
    shutil.copy(FIXTURES / "strace" / "loader-packed.txt", tmp_path / "strace.txt")
    document = {
        "kind": pytorch.KIND,
        "columns": ["epoch", "step", "requested_at", "ready_at", "compute_s", "sync_s", "samples", "bytes"],
        "config": {"accelerator": "emulated"},
        "ranks": [rank],
    }
    (tmp_path / "loader.json").write_text(json.dumps(document))
    return tmp_path


def test_the_loaders_parser_declares_what_it_emits(tmp_path: Path) -> None:
    found = emitted(pytorch.parse(loader_document(tmp_path)).measurements)
    assert {"au", "gpu_util", "epoch_time", "syscalls_per_sample"} <= {name for name, _ in found}
    assert undeclared(found) == []


def test_the_checkpoint_object_and_metadata_parsers_declare_what_they_emit(tmp_path: Path) -> None:
    ranks = [{"started_at": 0.0, "ended_at": 2.0, "bytes": 1 << 20}]
    (tmp_path / "checkpoint.json").write_text(
        json.dumps({"write": {"ranks": ranks, "fsync": True}, "read": {"ranks": ranks, "resident_before_bytes": 0}})
    )
    phase = {
        "window": [0.0, 2.0],
        "bytes": 1 << 20,
        "requests": 16,
        "latency_ns": {"p50": 1e6, "p90": 2e6, "p99": 3e6, "p999": 4e6},
        "series": [[1.0, 1 << 19, 8], [2.0, 1 << 19, 8]],
    }
    shape = {"size": 65536, "threads": 1, "objects": 16, "endpoint": "http://127.0.0.1:9", "bucket": "b"}
    (tmp_path / objects.FILE).write_text(json.dumps({"phases": {"put": phase, "get": phase}, **shape}))
    operation = {"ops": 100, "seconds": 0.5}
    (tmp_path / "metadata.json").write_text(
        json.dumps({"kind": metadata_parser.KIND, "operations": dict.fromkeys(("readdir", "stat", "open"), operation)})
    )
    for parse in (checkpoint.parse, objects.parse, metadata_parser.parse):
        found = emitted(parse(tmp_path).measurements)
        assert found and undeclared(found) == [], parse.__module__


@pytest.mark.parametrize("campaign", ["fio-tmpfs", "report-fixture"])
def test_every_stored_metric_of_the_report_fixtures_is_declared(campaign: str) -> None:
    samples = ResultStore(FIXTURES / "report", campaign).samples()
    assert samples and undeclared(sorted({(s.metric, s.unit) for s in samples})) == []


def test_an_undeclared_metric_is_found() -> None:
    assert undeclared([("read_bw", "B/s"), ("read_bw", "IOPS"), ("made_up_per_s", "ops/s")]) == [
        "read_bw (IOPS)",
        "made_up_per_s (ops/s)",
    ]


def test_a_family_is_one_pattern_entry_and_an_exact_name_wins_over_it() -> None:
    assert metrics.of("read_clat_p90").unit == "ns" and metrics.of("read_clat_p90").table is None
    assert metrics.of("read_clat_p99").table is not None
    assert metrics.of("dev_read_await") is metrics.of("dev_write_await")


def test_every_tool_has_one_parser_from_the_one_registry():
    """Issue 37: workloads.parser_for kept a hand dict of parsers beside the catalogue's list of parser modules;
    both read iolab.kinds.registry's parser modules now, each module naming its tools."""
    from iolab.kinds.registry import registry

    tools = registry()
    assert {"fio", "pytorch", "tensorflow", "metadata", "checkpoint", "objects", "dlio"} <= set(tools)
    assert tools["tensorflow"] is tools["pytorch"]  # the tf loader writes the loader.json of every iolab loader
