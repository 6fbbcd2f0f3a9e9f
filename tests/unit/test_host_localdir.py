"""iolab.host.storage.localdir: a local backend's directory checked, and iolab's files below it removed at the end, in
one host-side call (issue 42), as storage_local's task and the fan-out's steps run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from iolab.host.storage import localdir
from iolab.shared import calls


def call(capsys, state: str, path: Path, *extra: str) -> tuple[int, dict | str]:
    code = localdir.main([state, "--name", "disk", "--path", str(path), "--host", "here", *extra])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else err.strip()


def test_an_existing_directory_is_used_and_only_this_hosts_files_below_it_are_removed(capsys, tmp_path):
    mine, other = tmp_path / "iolab-here", tmp_path / "iolab-there"
    for host in (mine, other):
        (host / "dataset" / "train").mkdir(parents=True)
        (host / "dataset" / "train" / "0.jpg").write_bytes(b"x" * 100)
    (tmp_path / "someone-elses.txt").write_text("kept")
    assert call(capsys, "mounted", tmp_path) == (0, {"kept": False, "changed": False})
    assert call(capsys, "unmounted", tmp_path) == (0, {"kept": False, "changed": True, "stopped": []})
    assert not mine.exists() and (other / "dataset" / "train" / "0.jpg").exists()  # another host's files stay
    assert (tmp_path / "someone-elses.txt").read_text() == "kept"
    assert call(capsys, "unmounted", tmp_path) == (0, {"kept": False, "changed": False, "stopped": []})


def test_refusals_are_one_line_naming_the_directory_the_host_and_the_fix(capsys, tmp_path):
    code, said = call(capsys, "mounted", tmp_path / "missing")
    assert (code, said) == (
        1,
        f"{tmp_path / 'missing'} does not exist on here; create it or point backend disk at an existing directory",
    )
    (tmp_path / "file").write_text("")
    code, said = call(capsys, "mounted", tmp_path / "file")
    assert code == 1 and said.startswith(f"{tmp_path / 'file'} does not exist on here (it is not a directory);")
    code, said = call(capsys, "mounted", tmp_path, "--check-target", "/etc", "--root", "/mnt/iolab", "--existing")
    assert code == 1 and "/etc" in str(said) and "\n" not in str(said)


def test_the_teardown_stops_the_commands_tools_and_removes_its_run_files_first(capsys, tmp_path):
    """What storage.yml's `hostrun stop` did before the role's removal, in the same call (--stop-dir)."""
    runs = tmp_path / "runs" / "owner" / "here"
    (runs / "run-1").mkdir(parents=True)
    (runs / "run-1" / "partial.json").write_text("{}")
    disk = tmp_path / "disk"
    (disk / "iolab-here").mkdir(parents=True)
    code, done = call(capsys, "unmounted", disk, "--stop-dir", str(runs))
    assert code == 0 and done["changed"] and not (disk / "iolab-here").exists()
    assert done["stopped"] == [f"removed what 1 interrupted run(s) left in {runs}"]
    assert not runs.exists()


def test_a_directory_the_stop_removed_already_is_no_failure(capsys, tmp_path):
    """The stop removes what an interrupted run noted it wrote on the storage, and a directory it leaves empty: here
    the host's own, which the call then finds gone."""
    from iolab.host.runs import SCRATCH

    runs, disk = tmp_path / "runs" / "owner" / "here", tmp_path / "disk"
    (runs / "run-1").mkdir(parents=True)
    (disk / "iolab-here").mkdir(parents=True)
    (disk / "iolab-here" / "data.fio").write_bytes(b"x")
    (runs / f"run-1.{SCRATCH}").write_text(json.dumps({"files": [str(disk / "iolab-here" / "data.fio")]}))
    code, done = call(capsys, "unmounted", disk, "--stop-dir", str(runs))
    assert code == 0 and not (disk / "iolab-here").exists() and done["changed"] is False, done
    assert any("removed 1 file(s) that run-1 wrote" in line for line in done["stopped"]), done


def test_both_routes_argv_is_one_the_host_program_takes(tmp_path):
    """shared.calls.local: the argv storage_local's task and the fan-out's steps run, here with this checkout."""
    variables = {"storage_local_state": "mounted", "storage_local_name": "disk", "storage_local_path": str(tmp_path)}
    variables |= {"storage_target": str(tmp_path), "storage_mount_root": "/mnt/iolab", "storage_existing": True}
    argv = calls.local(sys.executable, "here", variables, str(tmp_path / "runs"))
    assert argv[1:4] == ["-m", "iolab.host.storage.localdir", "mounted"] and "--stop-dir" not in argv
    env = {**os.environ, "PYTHONPATH": str(Path(localdir.__file__).parents[2])}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert (done.returncode, json.loads(done.stdout)) == (0, {"kept": False, "changed": False}), done.stderr
    teardown = calls.local(sys.executable, "here", {**variables, "storage_local_state": "unmounted"}, "/x/runs")
    stop = teardown.index("--stop-dir")
    assert (
        teardown[stop : stop + 3] == ["--stop-dir", "/x/runs", "--keep-archives"] and "--check-target" not in teardown
    )


def test_an_rbd_backends_work_directory_is_made_then_only_this_hosts_files_removed(tmp_path):
    """shared.calls.rbd: the same program makes an rbd backend's work directory (--make; nothing is mounted there) and
    clears this host's files from it at the end, as storage_rbd's second task and the fan-out's steps run it."""
    work = tmp_path / "mnt" / "blk"
    variables = {"storage_rbd_state": "mounted", "storage_rbd_name": "blk", "storage_rbd_mountpoint": str(work)}
    variables |= {"storage_target": str(work), "storage_mount_root": str(tmp_path / "mnt"), "storage_existing": False}
    env = {**os.environ, "PYTHONPATH": str(Path(localdir.__file__).parents[2])}

    def run(state: str) -> dict:
        argv = calls.rbd(sys.executable, "here", {**variables, "storage_rbd_state": state}, str(tmp_path / "runs"))
        assert ("--make" in argv) == (state == "mounted")
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert run("mounted") == {"kept": False, "changed": True} and work.is_dir()
    assert run("mounted") == {"kept": False, "changed": False}  # there already: used as it is
    (work / "iolab-here").mkdir()
    (work / "iolab-there").mkdir()
    assert run("unmounted") == {"kept": False, "changed": True, "stopped": []}
    assert not (work / "iolab-here").exists() and (work / "iolab-there").is_dir()
