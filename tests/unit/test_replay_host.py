"""The host side of traces, as a host runs it: capture under real strace, stage, replay through real fio, parse."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.kinds.replay import parser as replay_parser
from iolab.parsers import ParseError
from iolab.shared import trace

ROOT = Path(__file__).resolve().parents[2]
JOB = """
import os, sys, time
root = sys.argv[1]
for name in sorted(os.listdir(root)):
    fd = os.open(os.path.join(root, name), os.O_RDONLY)
    os.read(fd, 1 << 20); os.lseek(fd, 100, 0); os.read(fd, 50); os.close(fd)
    time.sleep(0.01)
"""


def _host(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT / "pyfiles"), "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "iolab.host.trace", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def captured(tmp_path) -> trace.Trace:
    data = tmp_path / "data"
    data.mkdir()
    for i in range(12):
        (data / f"f{i:02d}.bin").write_bytes(bytes([i]) * (20_000 + i))
    (tmp_path / "job.py").write_text(JOB)
    done = _host("capture", "--root", str(data), "--out", str(tmp_path / "traces"), "--baseline", "--")
    assert done.returncode == 2 and "required: command" in done.stderr  # no command after --
    done = _host(
        "capture", "--root", str(data), "--out", str(tmp_path / "traces"), "--baseline", "--", sys.executable,
        str(tmp_path / "job.py"), str(data),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return trace.load(done.stdout.strip().splitlines()[-1].removeprefix("iolab-trace: "))


def test_capture_records_the_job_and_the_cost(captured):
    assert captured.bytes == {"read": sum(20_000 + i + 50 for i in range(12)), "write": 0}
    assert [size for _, size in captured.files] == [20_000 + i for i in range(12)]  # stat'ed on the host
    assert captured.header["tracer"]["version"].startswith("strace -- version")
    assert captured.header["capture"]["slowdown"] > 0 and captured.header["exit_status"] == 0
    assert captured.span_us > 11 * 10_000  # the job's sleeps between files


def test_stage_then_replay_moves_the_trace_s_bytes_exactly(captured, tmp_path):
    staged = tmp_path / "staged"
    first = _host("stage", "--trace", str(captured.path), "--root", str(staged), "--copies", "2")
    again = _host("stage", "--trace", str(captured.path), "--root", str(staged), "--copies", "2")
    assert json.loads(first.stdout)["staged"] is True and json.loads(again.stdout)["reason"] == "already staged"
    assert (staged / "copy-1" / "f11.bin").stat().st_size == 20_011
    for timing in ("recorded", "fast"):
        out = tmp_path / timing
        argv = ["replay", "--trace", str(captured.path), "--root", str(staged), "--out", str(out), "--timing", timing]
        done = _host(*argv, "--processes", "2", "--own-files")
        assert done.returncode == 0, done.stderr
        parsed = replay_parser.parse(out)
        figures = {m.metric: m.value for m in parsed.measurements}
        assert parsed.error is None and parsed.metadata["replay_bytes"] == {
            "read": 2 * captured.bytes["read"],
            "write": 0,
        }
        assert ("replay_stall_s" in figures) == (timing == "recorded")
        if timing == "recorded":
            assert figures["replay_s"] >= captured.span_us / 1e6 * 0.95  # the recorded gaps kept
        assert "startdelay" in (out / "job.fio").read_text() or timing == "fast"


def test_a_replay_that_moved_other_bytes_is_an_error(captured, tmp_path):
    staged, out = tmp_path / "staged", tmp_path / "out"
    _host("stage", "--trace", str(captured.path), "--root", str(staged))
    assert _host("replay", "--trace", str(captured.path), "--root", str(staged), "--out", str(out)).returncode == 0
    record = json.loads((out / "replay.json").read_text())
    record["recorded_bytes"]["read"] += 1
    (out / "replay.json").write_text(json.dumps(record))
    assert "it did not replay the trace" in (replay_parser.parse(out).error or "")
    (out / "fio.json").unlink()
    with pytest.raises(ParseError, match=r"fio\.json: missing, fio wrote no JSON"):
        replay_parser.parse(out)


def test_a_staged_path_longer_than_fio_reads_is_refused_in_one_line(captured, tmp_path):
    deep = tmp_path / ("d" * 200) / ("e" * 40)
    done = _host("replay", "--trace", str(captured.path), "--root", str(deep), "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "longer than the 256 characters fio's iolog reads of a name" in done.stderr


def test_a_data_set_the_file_system_cannot_hold_is_refused_before_a_file_is_written(tmp_path):
    """The room of a backend iolab cannot know from the controller (a local disk) is checked on the host."""
    huge = trace.write(tmp_path, {"root": "/data", "files": [["a.bin", 1 << 50]]}, [(1, "read", 0, 0, 4096, 0, 5)])
    done = _host("stage", "--trace", str(huge), "--root", str(tmp_path / "staged"), "--copies", "2")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "the trace's data set (2,251,799,813,685,248 B for 2 copies) does not fit" in done.stderr
    assert not any((tmp_path / "staged").iterdir())


def test_stage_as_a_runs_prepare_writes_the_trace_from_its_text_then_makes_the_run_directory_and_drops(
    captured, tmp_path
):
    """The prepare both run routes call (iolab.kinds.replay.workload.host_call): the trace's text from the argv written
    beside the run directory and checked, the files staged, then the run directory and the drop, recorded."""
    run_dir, staged = tmp_path / "runs" / "r1", tmp_path / "staged"
    file = Path(f"{run_dir}.trace")
    text = captured.path.read_text()
    argv = ["stage", "--trace", str(file), "--root", str(staged), "--text", text, "--dir", str(run_dir)]
    done = _host(*argv, "--drop-caches")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["staged"] is True and said["trace"] == captured.sha256 and said["started_at"] > 0
    assert file.read_text() == text and (staged / "f11.bin").stat().st_size == 20_011
    assert json.loads((run_dir / "drop_caches.json").read_text())["page_cache_after"] >= 0
    cut = _host("stage", "--trace", str(file), "--root", str(staged), "--text", text[:-80], "--dir", str(run_dir))
    assert cut.returncode == 1 and cut.stderr.startswith("trace stage: ") and len(cut.stderr.splitlines()) == 1
