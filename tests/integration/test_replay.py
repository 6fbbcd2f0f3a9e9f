"""A job's I/O captured on localhost (strace), then replayed through fio on tmpfs and a local disk in one campaign.

The job: two processes reading 120 files of 48 KiB each (one whole read, then a pread of 4 KiB
at 8 KiB), 3 ms of "compute" after each file, and writing one file with fsync. Its trace
must replay the same bytes exactly on both backends, at recorded timing and as fast as possible,
and the report must say the answer per backend.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from iolab.shared import trace
from iolab.workloads.base import INLINE_TEXT

READER = """
import os, sys, time, multiprocessing
def work(names):
    for name in names:
        with open(name, "rb") as f:
            f.read()
        fd = os.open(name, os.O_RDONLY); os.pread(fd, 4096, 8192); os.close(fd)
        time.sleep(0.003)
if __name__ == "__main__":
    root = sys.argv[1]
    names = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".bin"))
    procs = [multiprocessing.Process(target=work, args=(names[i::2],)) for i in range(2)]
    [p.start() for p in procs]; [p.join() for p in procs]
    with open(os.path.join(root, "out", "summary.dat"), "wb") as f:
        f.write(b"s" * 10000); f.flush(); os.fsync(f.fileno())
"""
FILES, SIZE = 120, 48 << 10


def _job(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    for i in range(FILES):
        (data / f"d{i % 4}").mkdir(parents=True, exist_ok=True)
        (data / f"d{i % 4}" / f"{i:04d}.bin").write_bytes(os.urandom(SIZE))
    (data / "out").mkdir()
    (tmp_path / "reader.py").write_text(READER)
    return data, tmp_path / "reader.py"


def _capture(cli, *args: str) -> str:
    """trace.capture's output, waiting (up to 25 min) while another test run's campaign holds localhost's lease."""
    deadline = time.monotonic() + 1500
    while True:
        done = cli("trace.capture", *args, check=False)
        if "is held by campaign" not in done.stderr or time.monotonic() > deadline:
            assert done.returncode == 0, done.stdout + done.stderr
            return done.stdout
        time.sleep(5)


def test_capture_then_replay_on_tmpfs_and_disk_then_report(cli, write_campaign, tmp_path):
    data, reader = _job(tmp_path)
    captured = _capture(cli, "--root", str(data), "--baseline", "--", sys.executable, str(reader), str(data))
    path = Path(captured.strip().splitlines()[-1].split(": ", 1)[1])
    found = trace.load(path)
    assert path.parent == cli.results / "traces" and path.name == f"{found.sha256[:16]}.trace"
    assert path.with_suffix(".localhost.telemetry.jsonl").read_text().count("\n") >= 1  # the host while it ran
    assert found.bytes == {"read": FILES * (SIZE + 4096), "write": 10000}
    assert len(found.files) == FILES + 1 and len(found.processes) == 3
    header = found.header
    assert header["tracer"]["name"] == "strace" and header["command"][-1] == str(data)
    assert header["capture"]["untraced_s"] > 0 and header["capture"]["slowdown"] > 0
    disk = tmp_path / "disk"
    disk.mkdir()
    campaign = write_campaign(
        {
            "name": "itest-replay",
            "repetitions": 1,
            "backends": [
                {"name": "itest-replay-mem", "type": "tmpfs", "size": "64MiB"},
                {"name": "itest-replay-disk", "type": "local", "path": str(disk)},
            ],
            "workloads": [
                {"name": "as-recorded", "type": "replay", "trace": str(path)},
                {"name": "fast", "type": "replay", "trace": str(path), "timing": "fast", "processes": 2},
            ],
        }
    )
    cli.bench(campaign, wait=1500.0)
    by = {(s["backend"], s["workload"], s["host"], s["metric"]): s for s in cli.samples("itest-replay")}
    for backend in ("itest-replay-mem", "itest-replay-disk"):
        recorded = by[(backend, "as-recorded", "localhost", "replay_s")]
        assert recorded["metadata"]["replay_bytes"] == found.bytes  # exactly the trace's bytes
        assert recorded["metadata"]["cache_state"] == "dropped"
        raw = cli.results / "itest-replay" / "raw" / recorded["run_id"] / "localhost"
        assert (raw / "telemetry.jsonl").exists()
        assert json.loads((raw / "run.json").read_text())["launcher"] == "clustershell"  # the trace in the argv
        assert recorded["value"] >= found.span_us / 1e6 * 0.95  # the recorded gaps are kept
        assert (backend, "as-recorded", "*", "replay_stall_s") in by
        fast = by[(backend, "fast", "localhost", "replay_bw")]
        assert fast["metadata"]["replay_bytes"] == {op: 2 * moved for op, moved in found.bytes.items()}
        assert by[(backend, "fast", "localhost", "replay_s")]["value"] < recorded["value"]  # no waits
        assert by[(backend, "fast", "localhost", "read_clat_p99")]["unit"] == "ns"
    report = cli("report", "--campaign", "itest-replay").stdout
    for backend in ("itest-replay-mem", "itest-replay-disk"):
        line = next(line for line in report.splitlines() if line.startswith(f"{backend}: this job's I/O on it:"))
        assert "at recorded timing (stalls" in line
    assert "as fast as possible" in report.replace("\n", " ")
    page = Path(cli("report", "--campaign", "itest-replay", "--format", "html").stdout.strip()).read_text()
    assert "A job's I/O, replayed" in page and "itest-replay-disk: this job&#39;s I/O on it: finishes in" in page
    assert not (disk / "iolab-localhost").exists()  # the staged tree goes with the backend's unmount


def test_a_trace_too_long_for_the_argv_is_copied_by_the_bench_role_and_replays_the_same(cli, write_campaign, tmp_path):
    """A trace over INLINE_TEXT travels as a file: the run is Ansible's (iolab.drive.fanout.refusal), whose role
    copies it beside the run directory and runs the same prepare and replay as the fan-out's call."""
    records = [(7, "read", 0, (i % 256) * 4096, 4096, i * 20, 5) for i in range(4000)]
    path = trace.write(tmp_path / "traces", {"root": "/data", "files": [["a.bin", 1 << 20]]}, records)
    assert path.stat().st_size > INLINE_TEXT
    campaign = write_campaign(
        {
            "name": "itest-replay-long",
            "repetitions": 1,
            "backends": [{"name": "itest-replay-long-mem", "type": "tmpfs", "size": "16MiB"}],
            "workloads": [{"name": "long", "type": "replay", "trace": str(path), "timing": "fast"}],
        }
    )
    cli.bench(campaign, wait=1500.0)
    (sample,) = [s for s in cli.samples("itest-replay-long") if s["metric"] == "replay_s" and s["host"] != "*"]
    assert sample["metadata"]["replay_bytes"] == {"read": 4000 * 4096, "write": 0}
    assert sample["metadata"]["cache_state"] == "dropped"
    raw = cli.results / "itest-replay-long" / "raw" / sample["run_id"] / "localhost"
    assert json.loads((raw / "run.json").read_text())["launcher"] == "ansible"
