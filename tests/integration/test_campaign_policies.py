"""Campaign policies on localhost (issue 6): cold and warm runs, warm-up runs, the warm command, timeouts."""

from __future__ import annotations

import json
import time
from pathlib import Path

from support import mounted

FIO_1S = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s", "size": "32MiB"}


def test_cache_warm_reports_cold_and_warm_side_by_side(cli, write_campaign, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    marker = "warmed; touch pwned"  # one argv word: no shell ever sees it
    data = {
        "name": "itest-warm",
        "cache": "warm",
        "backends": [{"name": "itest-disk", "type": "local", "path": str(disk)}],
        "workloads": [
            {**FIO_1S, "name": "cmd", "warm_command": ["touch", marker]},
            {**FIO_1S, "name": "plain", "warmup": True},
        ],
    }
    done = cli("bench.all", "--campaign", str(write_campaign(data)), "--allow-commands")
    out = done.stdout + done.stderr
    assert "4 to run" in out
    assert out.count("warm-up run (warmup: true) of plain on itest-disk") == 1  # once per point and mount

    bw = {
        (s["workload"], s["params"]["cache"]): s
        for s in cli.samples("itest-warm")
        if s["metric"] == "read_bw" and s["host"] == "localhost"
    }
    assert set(bw) == {(w, c) for w in ("cmd", "plain") for c in ("cold", "warm")}
    assert bw[("cmd", "cold")]["metadata"]["cache_state"] == "dropped"
    assert bw[("cmd", "warm")]["metadata"]["cache_state"] == f"warm: after the warm_command touch {marker}"
    assert (
        bw[("plain", "warm")]["metadata"]["cache_state"]
        == "warm: right after the cold run of the same repetition, caches not dropped"
    )
    assert (disk / marker).exists() and not (disk / "pwned").exists()
    # The verdict is recorded with every sample (the repeats rule is the report's).
    assert all("valid" in s["metadata"]["validity"] for s in cli.samples("itest-warm"))
    # Warm-up runs leave nothing among the results.
    raw = {p.name for p in (cli.results / "itest-warm" / "raw").iterdir()}
    assert raw == {s["run_id"] for s in bw.values()}
    # The warm_command's run, played alone, takes the fan-out's calls (fanout_run.warm, then the run's), its files
    # beside the run's (warm/)
    cmd_warm = cli.results / "itest-warm" / "raw" / bw[("cmd", "warm")]["run_id"] / "localhost"
    assert json.loads((cmd_warm / "run.json").read_text())["launcher"] == "clustershell"
    assert (cmd_warm / "warm" / "run.json").exists()
    assert mounted() == [] and not (disk / "iolab-localhost").exists()
    # Issue 37: the samples are made again from the runs' files (and what was recorded with them, how a warm run
    # was warmed among it), the same as the store.
    again = cli("results.reparse", "--campaign", "itest-warm")
    assert "itest-warm: the samples of 4 runs made again from their files: the same as the store" in again.stdout


def test_a_run_past_its_timeout_is_stopped_and_recorded_failed(cli, write_campaign, tmp_path):
    data = {
        "name": "itest-timeout",
        "timeout": "3s",
        "backends": [{"name": "itest-mem", "type": "tmpfs", "size": "64MiB"}],
        "workloads": [{**FIO_1S, "runtime": "60s"}],
    }
    started = time.monotonic()
    done = cli("bench.all", "--campaign", str(write_campaign(data)), check=False)
    assert done.returncode != 0 and time.monotonic() - started < 45
    assert "timeout of 3 s" in done.stdout + done.stderr and "Traceback" not in done.stderr
    records = cli.runs("itest-timeout")
    assert [r["status"] for r in records] == ["failed"] and "timeout of 3 s" in records[0]["error"]
    assert cli.samples("itest-timeout") == [] and mounted() == []
    assert not Path("/mnt/iolab/itest-mem").exists() or not any(Path("/mnt/iolab/itest-mem").iterdir())
