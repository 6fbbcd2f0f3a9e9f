"""A replay's bad input refused in one line while the campaign is read, before any host is touched (issue 45)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.campaign import model as campaign
from iolab.errors import UserError
from iolab.shared import trace

ROOT = Path(__file__).resolve().parents[2]
GOOD = [(7, "open", 0, 0, 0, 0, 5), (7, "read", 0, 0, 4096, 10, 5), (7, "close", 0, 0, 0, 20, 1)]


def _campaign(tmp_path: Path, trace_path: Path, size: str = "64MiB", extra: str = "") -> Path:
    path = tmp_path / "c.yml"
    path.write_text(
        "name: refusals\n"
        f"backends: [{{name: mem, type: tmpfs, size: {size}}}]\n"
        f"workloads: [{{name: r, type: replay, trace: {trace_path}{extra}}}]\n"
    )
    return path


def _refusal(tmp_path: Path, text: str, **kwargs: str) -> str:
    bad = tmp_path / "bad.trace"
    bad.write_text(text)
    with pytest.raises(UserError) as refused:
        campaign.load(_campaign(tmp_path, bad, **kwargs))
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'c.yml'}: ")
    return message


def test_a_file_that_is_not_a_trace_is_refused(tmp_path):
    assert "not an iolab trace" in _refusal(tmp_path, "Timestamp,Operation\n1,read\n")


def test_a_truncated_trace_is_refused(tmp_path):
    text = trace.render({"root": "/data", "files": [["a.jpg", 4096]]}, GOOD)
    assert "truncated (no end line)" in _refusal(tmp_path, text[: text.index("end\t")])
    assert "truncated or changed" in _refusal(tmp_path, text.replace("7\tclose\t0\t0\t0\t20\t1\n", ""))


def test_timestamps_going_backwards_are_refused(tmp_path):
    text = trace.render({"root": "/data", "files": [["a.jpg", 4096]]}, [GOOD[0], GOOD[2], GOOD[1]])
    assert "line 4: timestamps go backwards (10 µs after 20 µs)" in _refusal(tmp_path, text)


def test_a_file_outside_the_root_is_refused(tmp_path):
    text = trace.render({"root": "/data", "files": [["../../etc/shadow", 4096]]}, GOOD)
    assert "file '../../etc/shadow' is outside the trace's root" in _refusal(tmp_path, text)


def test_a_file_name_fio_s_iolog_cannot_carry_is_refused(tmp_path):
    text = trace.render({"root": "/data", "files": [["my photos/a.jpg", 4096]]}, GOOD)
    assert "file 'my photos/a.jpg' has a blank in its name" in _refusal(tmp_path, text)


def test_a_data_set_that_does_not_fit_the_tmpfs_is_refused(tmp_path):
    text = trace.render({"root": "/data", "files": [["a.jpg", 4096], ["big.bin", 3 << 20]]}, GOOD)
    message = _refusal(tmp_path, text, size="2MiB")
    assert "its trace's data set (3 MiB staged on each host) does not fit tmpfs backend mem (2 MiB)" in message
    copies = _refusal(tmp_path, text, size="8MiB", extra=", processes: 4, own_files: true")
    assert "(12 MiB staged on each host)" in copies and "or drop own_files" in copies
    good = tmp_path / "good.trace"
    good.write_text(text)
    assert campaign.load(_campaign(tmp_path, good, size="8MiB")).workloads[0].room == 4096 + (3 << 20)


def test_the_refusal_comes_before_any_host_is_reached(tmp_path):
    """bench.all (not a dry run) on a host no one answers for: the trace's line, not a connection's, and exit 2."""
    bad = tmp_path / "bad.trace"
    bad.write_text(trace.render({"root": "/data", "files": [["a", 1]]}, GOOD)[:-30])
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  hosts:\n    n1: {ansible_host: 127.0.0.1, ansible_port: 1, ansible_connection: ssh}\n"
    )
    argv = [sys.executable, "-m", "invoke", "bench.all", "--inventory", str(inventory)]
    done = subprocess.run(
        [*argv, "--campaign", str(_campaign(tmp_path, bad))], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "workloads[0]: trace: " in done.stderr and "truncated" in done.stderr


def test_a_capture_s_bad_command_is_refused_before_any_host(tmp_path):
    """trace.capture's refusals come before the lab is used (None here: nothing is played)."""
    from iolab.drive import traces

    for root, command, said in (
        ("data", ["python3", "job.py"], "give the absolute directory"),
        ("/data", [], "give the command to capture after --"),
        ("/data", ["python3", "{{ lookup('env', 'HOME') }}"], "Ansible would evaluate {{ or {% on the controller"),
    ):
        with pytest.raises(UserError, match=re.escape(said)):
            traces.capture(None, root, command, False, 60.0, tmp_path)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())


def test_the_dry_run_says_the_traces_route_and_size_not_its_text(tmp_path):
    """The trace's text is a role variable (it travels in the prepare's argv); --dry-run names it by its size."""
    from iolab.drive.execute import workload_vars

    path = trace.write(tmp_path, {"root": "/data", "files": [["a.jpg", 4096]]}, GOOD)
    (run,) = campaign.expand(campaign.load(_campaign(tmp_path, path)))
    variables = workload_vars(run)
    assert variables["bench_replay_text"] == path.read_text()  # what the call carries
    lines = "\n".join(run.workload.dry_run(variables))
    assert f"bench_replay_text: \"<the trace's {len(path.read_text()):,} characters, in the prepare's argv>\"" in lines
    assert "iolab.trace/1" not in lines and f'bench_replay_trace: "{path}"' in lines
