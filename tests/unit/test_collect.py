"""How a run's files come back: returned in the run's own output, or left for collect.yml."""

from __future__ import annotations

import io
import sys
import tarfile

import yaml

from iolab.drive import runner, unpack
from support import ROOT, hostrun


def _members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_hostrun_returns_a_small_run_in_its_output_and_leaves_nothing_on_the_host(tmp_path):
    run_dir = tmp_path / "run-1"
    done = hostrun("run", "--dir", str(run_dir), "--pack", "--", "/bin/echo", "hello")
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []  # no directory, no archive, no temporary file
    # What the controller makes of the task's result: the archive, and an output without it.
    archives: list[bytes] = []
    res = runner._take_archives({"stdout": done.stdout.rstrip("\n"), "rc": 0}, archives)
    assert len(archives) == 1 and res["stdout"] == "" and res["stdout_lines"] == []
    files = _members(archives[0])
    assert {"./run.json", "./stdout.txt", "./stderr.txt"} <= set(files) and files["./stdout.txt"] == b"hello\n"


def test_an_archive_near_the_inline_limit_comes_back_through_ansible_runner(tmp_path):
    """ansible-runner empties a task's result over MAX_EVENT_RES characters (700,000 by default): a 1 MiB archive
    returned in the output (base64, twice: stdout and stdout_lines) was dropped without a word before iolab.drive.runner
    raised that limit above what a run returns."""
    run_dir = tmp_path / "run-1"
    hostrun_argv = [sys.executable, "-m", "iolab.host.hostrun", "run", "--dir", str(run_dir), "--pack", "--"]
    task = {
        "name": "A run with 1 MiB of incompressible files",
        "ansible.builtin.command": {"argv": [*hostrun_argv, "dd", "if=/dev/urandom", "of=big", "bs=64k", "count=16"]},
        "environment": {"PYTHONPATH": str(ROOT / "pyfiles")},
    }
    playbook = tmp_path / "big.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [task]}]))
    result = runner.run(runner.Phase(str(playbook)), ROOT / "inventory" / "local.yml", ["localhost"])
    outcome = result.hosts["localhost"]
    assert outcome.ok == 1 and not outcome.failed
    assert len(outcome.archives) == 1 and len(_members(outcome.archives[0])["./big"]) == 2**20
    assert not run_dir.exists() and not (tmp_path / "run-1.tar.gz").exists()


def test_a_large_run_stays_for_collect_and_pack_merges_a_later_failure_record(tmp_path):
    from iolab.shared.protocol import INLINE_MAX

    run_dir = tmp_path / "run-1"
    count = INLINE_MAX // 2**20 + 1  # MiB of incompressible data: an archive too large to return
    done = hostrun(
        "run",
        "--dir",
        str(run_dir),
        "--pack",
        "--",
        "/bin/dd",
        "if=/dev/urandom",
        "of=big",
        "bs=1M",
        f"count={count}",
        "status=none",
    )
    assert done.returncode == 0, done.stderr
    assert "iolab-archive:" not in done.stdout
    archive = tmp_path / "run-1.tar.gz"
    assert not run_dir.exists() and archive.exists()
    # A later task fails: run.yml's rescue writes error.json in a fresh directory, then packs again.
    run_dir.mkdir()
    (run_dir / "error.json").write_text('{"task": "later"}')
    done = hostrun("pack", "--dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    assert "iolab-archive:" not in done.stdout
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        assert {"./run.json", "./big", "./error.json"} <= names
        assert tar.getmember("./big").size == count * 2**20
    assert not run_dir.exists() and not list(tmp_path.glob("*.tmp"))


def test_the_controller_unpacks_a_returned_archive_and_fails_the_host_on_an_unreadable_one(tmp_path):
    done = hostrun("run", "--dir", str(tmp_path / "run"), "--pack", "--", "/bin/echo", "hello")
    archives: list[bytes] = []
    runner._take_archives({"stdout": done.stdout}, archives)
    result = runner.Result(
        status="successful", rc=0, hosts={h: runner.HostOutcome(h, ok=3) for h in ("a", "b")}, log=""
    )
    unpack.extract(result, "a", io.BytesIO(archives[0]), tmp_path / "raw" / "a")
    assert (tmp_path / "raw" / "a" / "stdout.txt").read_text() == "hello\n" and not result.failures()
    unpack.extract(result, "b", io.BytesIO(archives[0][:100]), tmp_path / "raw" / "b")  # cut short
    assert [o.host for o in result.failures()] == ["b"]
    assert "unreadable" in result.hosts["b"].message
