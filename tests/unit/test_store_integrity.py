"""No sample lost silently: a full or read-only results disk, a torn line, checked before the first run.

A full disk is made real two ways: a file-size limit (RLIMIT_FSIZE, so write(2) comes up
short and then fails, as on a disk that fills mid-write) in a child process, and a small
tmpfs (root).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.measures.samples import ResultStore, Sample, StoreError
from support import plain_sample

ROOT = Path(__file__).resolve().parents[2]


def sample(run_id: str, metric: str = "read_bw") -> Sample:
    return plain_sample(campaign="integrity", run_id=run_id, metric=metric, params={"pad": "x" * 500})


CHILD = """
import resource, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from iolab.measures.samples import ResultStore, Sample, StoreError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # EFBIG instead of a signal, as ENOSPC comes
store = ResultStore(Path(sys.argv[1]), "integrity")
limit = store.samples_path.stat().st_size + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
samples = [Sample(campaign="integrity", run_id="r2", repetition=1, host="h1", backend="b", workload="w",
                  metric=f"m{i}", value=1.0, unit="B/s", started_at="t0", ended_at="t1",
                  params={"pad": "x" * 500}, metadata={}) for i in range(8)]
try:
    store.add_samples(samples, "the samples of run r2")
    print("stored")
except StoreError as exc:
    print(exc)
"""


def test_a_short_write_is_undone_and_said(tmp_path):
    store = ResultStore(tmp_path, "integrity")
    store.add_samples([sample("r1")])
    before = store.samples_path.read_bytes()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), "1500", str(ROOT / "pyfiles")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "could not store the samples of run r2" in out.stdout and "a resume runs it again" in out.stdout
    assert store.samples_path.read_bytes() == before  # cut back: no torn line, no partial run
    assert store.completed() == {("r1", "h1")}  # so the resume runs r2 again


def test_a_torn_last_line_is_cut_before_the_first_run(tmp_path):
    store = ResultStore(tmp_path, "integrity")
    store.add_samples([sample("r1")])
    with store.samples_path.open("ab") as handle:
        handle.write(b'{"campaign": "integrity", "run_id": "r2", "ho')  # a crash mid-append
    assert [s.run_id for s in store.samples()] == ["r1"]  # never half a record
    notes = store.preflight()
    assert notes and "cut a torn last line" in notes[0]
    assert store.samples_path.read_bytes().endswith(b"\n")
    assert all(json.loads(line) for line in store.samples_path.read_text().splitlines())
    assert store.preflight() == []


def test_an_unwritable_results_directory_is_found_before_the_first_run(small_tmpfs):
    store = ResultStore(small_tmpfs("ro", "size=1m"), "integrity")
    with pytest.raises(StoreError, match="is not writable .*Read-only file system"):
        store.preflight()


def test_a_results_disk_without_room_is_found_before_the_first_run(small_tmpfs):
    store = ResultStore(small_tmpfs("size=8m"), "integrity")
    with pytest.raises(StoreError, match="has [78] MiB free, less than the 64 MiB"):
        store.preflight()
    assert store.preflight(min_free=1 << 20) == []


def test_a_full_disk_keeps_every_line_whole(small_tmpfs):
    store = ResultStore(small_tmpfs("size=64k"), "integrity")
    stored = 0
    with pytest.raises(StoreError, match="No space left on device"):
        for index in range(1000):
            store.add_samples([sample(f"r{index}")])
            stored += 1
    assert stored > 10
    assert store.samples_path.read_bytes().endswith(b"\n")
    assert len(store.samples()) == stored


# --- a line that is not a sample ---------------------------------------------------------------------

GOOD = json.loads(sample("r1").to_json())
BAD_LINES = {
    "not JSON": (b"this is not json\n", "not JSON"),
    "an empty object": (b"{}\n", "missing field(s) campaign, run_id"),
    "a list": (b"[1, 2]\n", "a JSON array, not a sample object"),
    "an unknown unit": (json.dumps({**GOOD, "unit": "furlongs"}).encode() + b"\n", "unknown unit 'furlongs'"),
    "bad UTF-8": (b'{"campaign": "\xff\xfe"}\n', "not UTF-8"),
    "very deep JSON": (b"[" * 200_000 + b"]" * 200_000 + b"\n", "JSON nested too deep"),
    "params as a list": (json.dumps({**GOOD, "params": [1]}).encode() + b"\n", "params is [1], not an object"),
    "NaN": (json.dumps({**GOOD, "value": float("nan")}).encode() + b"\n", "NaN is not a finite number"),
    "Infinity": (json.dumps({**GOOD, "value": float("-inf")}).encode() + b"\n", "-Infinity is not a finite number"),
    "NaN in metadata": (json.dumps({**GOOD, "metadata": {"x": float("nan")}}).encode() + b"\n", "NaN is not"),
    "a text value": (json.dumps({**GOOD, "value": "12"}).encode() + b"\n", "value is '12', not a number"),
    "a boolean value": (json.dumps({**GOOD, "value": True}).encode() + b"\n", "value is True, not a number"),
    "a huge whole number": (json.dumps({**GOOD, "value": 10**400}).encode() + b"\n", "is not a finite number"),
    "another schema": (json.dumps({**GOOD, "schema": "x/9"}).encode() + b"\n", "schema 'x/9', not iolab.sample/1"),
    # Issue 37: a known unit, wrong for its metric, was mixed into the median.
    "a unit wrong for its metric": (
        json.dumps({**GOOD, "unit": "ns"}).encode() + b"\n",
        f"{GOOD['metric']} in ns: the catalogue's unit for it is B/s",
    ),
}


def store_with(tmp_path: Path, bad: bytes) -> ResultStore:
    """r1, the bad line (line 2), r3."""
    store = ResultStore(tmp_path, "integrity")
    store.add_samples([sample("r1")])
    with store.samples_path.open("ab") as handle:
        handle.write(bad)
    store.add_samples([sample("r3")])
    return store


@pytest.mark.parametrize("kind", BAD_LINES)
def test_a_line_that_is_not_a_sample_is_skipped_counted_and_named(tmp_path, kind):
    bad, why = BAD_LINES[kind]
    store = store_with(tmp_path, bad)
    assert [s.run_id for s in store.samples()] == ["r1", "r3"]
    assert [(b.number, why in b.why) for b in store.skipped] == [(2, True)], store.skipped
    note = store.skipped_note()
    assert note is not None and "\n" not in note and note.startswith(f"skipped 1 line(s) of {store.dir}")
    assert "samples.jsonl line 2: " in note
    store.samples()
    assert len(store.skipped) == 1  # read twice, counted once


def test_a_resume_refuses_a_store_with_a_bad_line_before_anything_runs(tmp_path):
    """run_campaign (bench.all's loop) and next_repetition (bench.fio's) stop in one line naming the line."""
    import io

    from rich.console import Console

    from iolab.campaign.model import parse
    from iolab.drive.execute import Lab
    from iolab.measures.samples import CorruptStore
    from iolab.run import bench

    class NoAnsible(Lab):
        def play(self, *args, **kwargs):
            raise AssertionError("nothing may run on a store a resume cannot read")

    spec = parse(
        {
            "name": "integrity",
            "backends": [{"name": "b", "type": "tmpfs", "size": "64MiB", "mountpoint": str(tmp_path / "m")}],
            "workloads": [{"name": "w", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s"}],
        },
        "test",
        tmp_path,
    )
    store = store_with(tmp_path / "results", BAD_LINES["not JSON"][0])
    lab = NoAnsible(inventory=None, hosts=["h1"], console=Console(file=io.StringIO()))  # type: ignore[arg-type]
    for attempt in (lambda: bench.run_campaign(spec, lab, store), lambda: bench.next_repetition(spec, store)):
        with pytest.raises(CorruptStore) as refused:
            attempt()
        message = str(refused.value)
        assert f"{store.samples_path} line 2: not JSON" in message and "\n" not in message
        assert "--no-resume" in message and refused.value.exit_code == 2


def test_a_torn_line_longer_than_a_mebibyte_is_cut_whole(tmp_path):
    store = ResultStore(tmp_path, "integrity")
    store.add_samples([sample("r1")])
    with store.samples_path.open("ab") as handle:
        handle.write(b'{"campaign": "integrity", "params": {"pad": "' + b"x" * (3 << 19))  # 1.5 MiB, no newline
    store.add_samples([sample("r2")])  # cuts it before appending: never glued onto it
    assert [s.run_id for s in store.samples()] == ["r1", "r2"] and store.skipped == []
    with store.samples_path.open("ab") as handle:
        handle.write(b"x" * (3 << 19))
    notes = store.preflight()
    assert notes and f"cut a torn last line ({3 << 19} bytes)" in notes[0]
    assert [s.run_id for s in store.samples()] == ["r1", "r2"] and store.skipped == []


@pytest.mark.parametrize(
    ("field", "value"), [("value", float("nan")), ("value", float("inf")), ("metadata", {"x": float("nan")})]
)
def test_a_number_that_is_not_finite_is_never_written(tmp_path, field, value):
    store = ResultStore(tmp_path, "integrity")
    store.add_samples([sample("r1")])
    before = store.samples_path.read_bytes()
    odd = dataclasses.replace(sample("r2"), **{field: value})
    with pytest.raises(StoreError, match="read_bw on h1 has a number that is not finite.*nothing of it was kept"):
        store.add_samples([sample("r2", "write_bw"), odd], "the samples of run r2")
    assert store.samples_path.read_bytes() == before


def test_the_store_reads_only_what_was_appended_since_and_all_again_when_rewritten(tmp_path, monkeypatch):
    """Issue 37, structure 6: the campaign's loop asks for the samples after each run; each ask reads the lines
    appended since the last, and a file rewritten under it (another inode, cut, other bytes) whole again."""
    import iolab.measures.samples as samples_mod

    store = ResultStore(tmp_path, "c")
    store.add_samples([sample("r1"), sample("r2")])
    assert [s.run_id for s in store.samples()] == ["r1", "r2"]
    read_from: list[int] = []
    real = samples_mod._read_tail
    monkeypatch.setattr(samples_mod, "_read_tail", lambda *a: read_from.append(a[2]) or real(*a))
    store.add_samples([sample("r3")])
    assert [s.run_id for s in store.samples()] == ["r1", "r2", "r3"] and read_from[-1] > 0  # the new line only
    assert [s.run_id for s in store.samples()] == ["r1", "r2", "r3"] and len(read_from) == 1  # nothing new
    lines = store.samples_path.read_text().splitlines(keepends=True)
    store.samples_path.write_text(lines[2].replace('"r3"', '"r9"') + lines[1] + lines[0])  # same inode, rewritten
    assert [s.run_id for s in store.samples()] == ["r9", "r2", "r1"] and read_from[-1] == 0
    store.samples_path.unlink()
    assert store.samples() == []
