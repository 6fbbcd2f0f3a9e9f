"""Faults of a real lab on simulated hosts: a full results disk, a controller killed outright, storage that hangs.

(A host that dies mid-run and comes back: test_multihost.py.) Each test says what a user sees
(docs/LAB_PITFALLS.md, "Faults") and checks that nothing of the campaign is left on the hosts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from iolab import sim
from iolab.shared.processes import alive
from support import ROOT, Cli

pytestmark = pytest.mark.lab

RUNS = Path("/opt/iolab/runs")  # runs/<command's owner key>/<host>/<run>/ (one file system for every host)
FIO = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "2s", "ramp": "0s", "size": "16MiB"}


def campaign(tmp_path, name: str, backend: dict, **extra) -> str:
    data = {"name": name, "repetitions": 1, "backends": [backend], "workloads": [FIO], **extra}
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def tmpfs(name: str) -> dict:
    return {"name": name, "type": "tmpfs", "size": "64MiB"}


def host(sim_hosts, name: str) -> sim.SimHost:
    return next(h for h in sim_hosts.hosts if h.name == name)


def running(cli: Cli, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        cli.argv(*args), cwd=ROOT, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(proc: subprocess.Popen, what, message: str, timeout: float = 120.0):
    """What `what()` returns once true, while the campaign `proc` still runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        found = what()
        if found:
            return found
        time.sleep(0.1)
    out, err = proc.communicate() if proc.poll() is not None else ("", "")
    raise AssertionError(f"no {message}: exit {proc.returncode}\n{out}\n{err}")


def tool_running(name: str) -> list[Path]:
    """PID files of tools running now on host `name` (any command's)."""
    return sorted(RUNS.glob(f"*/{name}/*/hostrun.pid"))


# --- a full results disk ---------------------------------------------------------------------------


@contextlib.contextmanager
def small_disk(size: str) -> Path:
    """A tmpfs of `size` on the controller, for results (unmounted afterwards)."""
    path = Path(tempfile.mkdtemp(prefix="iolab-full-", dir="/tmp"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "iolab-test-full", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
        path.rmdir()


def fill(path: Path) -> None:
    """Fill the file system of `path` to the last block."""
    subprocess.run(["dd", "if=/dev/zero", f"of={path / 'filler'}", "bs=64k"], capture_output=True, check=False)


def test_a_results_disk_that_fills_during_collection_stops_the_campaign_naming_host_and_path(sim_hosts, tmp_path):
    with small_disk("80M") as disk:  # room for the preflight (64 MiB), no more
        cli = Cli(disk / "results")
        path = campaign(tmp_path, "fault-full", tmpfs("itest-full"), repetitions=2)
        proc = running(
            cli, "bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu[01-02]", "--campaign", path
        )
        # run 1 stored whole (its samples, then its status line), so that the disk fills while run 2 runs
        wait_for(
            proc,
            lambda: [s for s in cli.samples("fault-full") if s["host"] == "*"] and cli.runs("fault-full"),
            "run 1's samples and status",
        )
        kept = (disk / "results" / "fault-full" / "samples.jsonl").read_text()
        fill(disk)  # the disk fills while run 2 runs
        _, err = proc.communicate(timeout=180)
        said = " ".join(err.split())
        assert proc.returncode != 0 and "Traceback" not in err, err
        assert "No space left on device" in said
        # Names the host and where its files were to go, and what to do.
        assert any(
            f"could not store the files of {h} in {disk}/results/fault-full/raw/" in said for h in ("gpu01", "gpu02")
        ), said
        assert "free space on the results disk" in said
        assert (disk / "results" / "fault-full" / "samples.jsonl").read_text().startswith(kept)  # nothing lost
        assert sim_hosts.mounts_left() == {}  # torn down all the same

        (disk / "filler").unlink()  # room again: a resume runs exactly what is missing
        cli("bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu[01-02]", "--campaign", path)
        pairs = [(s["run_id"], s["host"]) for s in cli.samples("fault-full") if s["metric"] == "read_bw"]
        assert len(pairs) == len(set(pairs)) == 2 * 3  # 2 runs × (2 hosts + the aggregate), no duplicates


# --- the controller killed outright ----------------------------------------------------------------


def test_a_controller_killed_outright_is_cleaned_up_after_by_the_next_command(sim_hosts, cli, tmp_path):
    path = campaign(tmp_path, "fault-kill", tmpfs("itest-kill"), repetitions=2, workloads=[{**FIO, "runtime": "60s"}])
    args = ["bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu[03-04]", "--campaign", path]
    proc = running(cli, *args)
    pidfiles = wait_for(
        proc,
        lambda: (
            len(tool_running("gpu03") + tool_running("gpu04")) == 2 and tool_running("gpu03") + tool_running("gpu04")
        ),
        "fio on gpu03 and gpu04",
    )
    tools = [int(p.read_text()) for p in pidfiles]
    (owner,) = {p.parents[2] for p in pidfiles}  # runs/<owner>/<host>/<run>/hostrun.pid
    proc.kill()  # SIGKILL: no teardown, no lease release
    proc.communicate(timeout=30)
    for name in ("gpu03", "gpu04"):
        found = sim_hosts.ssh(host(sim_hosts, name), "findmnt -rn -o SOURCE /mnt/iolab/itest-kill").stdout
        assert found.strip() == "iolab:itest-kill"  # the dead campaign's mount is still there

    # The next command on those hosts (here: an unmount by hand) takes the lease over and cleans first.
    again = cli("storage.unmount", "--backend", "itest-kill", *args[1:])
    said = " ".join(again.stderr.split())
    for name in ("gpu03", "gpu04"):
        assert (
            f"{name}: the lease of campaign fault-kill (since " in said
            and "was never released (its command, or this host, ended first); taken over; cleaned what it left:" in said
        )
    assert said.count("unmounted /mnt/iolab/itest-kill (tmpfs iolab:itest-kill)") == 2, said
    # A tool whose Ansible task went away may have ended and packed its run already: then only its mount is left.
    assert f"interrupted run(s) left in {owner}/gpu0" in said or not any(alive(pid) for pid in tools), said
    assert not any(alive(pid) for pid in tools)
    assert not owner.exists()  # the dead command's files, every host's
    assert sim_hosts.mounts_left() == {}


def test_a_takeover_while_the_dead_commands_calls_still_prepare_or_wait_for_the_start_ends_them(
    sim_hosts, cli, tmp_path
):
    """Issue 37, defect 9: the controller is killed while its hosts prepare (their ssh sessions live on through
    Ansible's ControlPersist masters, so each hostrun goes on: prepares, then waits for a start that will never
    come, up to its run's timeout). The takeover said "still running after SIGKILL" (nothing was killed: no tool
    ran yet), ran over the old mount and left the old run directories; it now ends those calls by the PIDs they
    noted, and cleans all of it."""
    path = campaign(tmp_path, "fault-wait", tmpfs("itest-wait"), workloads=[{**FIO, "runtime": "60s"}])
    args = ["bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu[03-04]", "--campaign", path]
    proc = running(cli, *args)
    calls = wait_for(
        proc,
        lambda: (
            all(list(RUNS.glob(f"*/{h}/.calls/[0-9]*")) for h in ("gpu03", "gpu04"))
            and [c for h in ("gpu03", "gpu04") for c in RUNS.glob(f"*/{h}/.calls/[0-9]*")]
        ),
        "hostrun calls on gpu03 and gpu04",
    )
    proc.kill()  # SIGKILL: no teardown, no lease release, no start ever sent
    proc.communicate(timeout=30)
    pids = [int(c.name) for c in calls]
    (owner,) = {c.parents[2] for c in calls}  # runs/<owner>/<host>/.calls/<pid>
    again = cli("storage.unmount", "--backend", "itest-wait", *args[1:])
    said = " ".join(again.stderr.split())
    assert "still running after SIGKILL" not in said and "cleaning what it left failed" not in said, said
    assert said.count("ended 1 call(s) of iolab.host.hostrun still running there") == 2, said
    assert not any(alive(pid) for pid in pids)
    assert not owner.exists()
    assert sim_hosts.mounts_left() == {}


# --- storage that hangs ------------------------------------------------------------------------------


def processes_of(sim_hosts, name: str) -> list[int]:
    """Every process of a simulated host (its network namespace), its sshd and its sessions included."""
    (status,) = [s for s in sim.status(sim_hosts.lab) if s.host.name == name]
    netns = os.readlink(f"/proc/{status.sshd_pid}/ns/net")
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and os.readlink(entry / "ns" / "net") == netns:
                found.append(int(entry.name))
    return found


def test_storage_that_hangs_times_the_run_out_and_teardown_does_not_hang(sim_hosts, cli, tmp_path):
    """The storage goes away a second into the run: the run's timeout (6 s) stops fio, and teardown's umount gets
    the inventory's storage_unmount_wait (5 s here, 20 s by default) before it detaches the mount lazily."""
    served = Path(tempfile.mkdtemp(prefix="iolab-hang-", dir="/tmp"))
    backend = {"name": "itest-hang", "type": "sshfs", "host": "gpu01", "path": str(served)}
    path = campaign(tmp_path, "fault-hang", backend, workloads=[{**FIO, "runtime": "60s", "timeout": "6s"}])
    inventory = yaml.safe_load(sim_hosts.inventory.read_text())
    inventory["all"]["children"]["gpu"]["vars"]["storage_unmount_wait"] = 5
    impatient = tmp_path / "impatient.yml"
    impatient.write_text(yaml.safe_dump(inventory))
    proc = running(cli, "bench.all", "--inventory", str(impatient), "--hosts", "gpu02", "--campaign", path)
    stopped: list[int] = []
    try:
        wait_for(proc, lambda: tool_running("gpu02"), "fio on gpu02")
        time.sleep(1)
        stopped = processes_of(sim_hosts, "gpu01")  # gpu01's sshd: the storage is gone, not refused
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        _, err = proc.communicate(timeout=240)
        took = time.monotonic() - started
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(served, ignore_errors=True)
    said = " ".join(err.split())
    assert proc.returncode == 1 and "Traceback" not in err, err
    (run,) = cli.runs("fault-hang")
    assert run["status"] == "failed" and "fio stopped: it ran past its timeout of 6 s" in run["error"], run
    assert "fio stopped: it ran past its timeout of 6 s" in said
    # fio, blocked in sshfs, keeps the mount busy or umount waits: detached lazily, sshfs stopped, said so.
    assert "umount /mnt/iolab/itest-hang on gpu02 failed" in said and "detached lazily (umount -l)" in said
    assert "no answer in 20 s" not in said  # the inventory's wait, where umount did not answer
    assert took < 150, f"the campaign took {took:.0f} s after the storage went away"
    assert sim_hosts.mounts_left() == {}
    assert not tool_running("gpu02")


# --- a warm_command that never ends --------------------------------------------------------------------


def warm_hung(tmp_path, name: str, timeout: str) -> str:
    """A campaign whose warm run first runs `sleep 600` in the backend (cache: warm, needs --allow-commands)."""
    workload = {**FIO, "cache": "warm", "timeout": timeout, "warm_command": ["sleep", "600"]}
    return campaign(tmp_path, name, tmpfs(f"itest-{name}"), workloads=[workload])


def of_results(cli: Cli, what: str) -> list[int]:
    """Processes started by this test's commands (their environment names its results) whose command line
    holds `what`: none may outlive a command."""
    mark = f"IOLAB_RESULTS={cli.results}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and mark in (entry / "environ").read_bytes().split(b"\0"):
                if what.encode() in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                    found.append(int(entry.name))
    return found


def sleeping(sim_hosts, name: str) -> list[int]:
    """The warm_command's processes (`sleep 600`) running now on host `name`."""
    found = []
    for pid in processes_of(sim_hosts, name):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00600\x00" and alive(pid):
                found.append(pid)
    return found


def test_a_warm_command_that_never_ends_is_stopped_at_the_runs_timeout(sim_hosts, cli, tmp_path):
    path = warm_hung(tmp_path, "fault-warm", "6s")
    args = ["bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu01", "--campaign", path]
    started = time.monotonic()
    done = cli(*args, "--allow-commands", check=False)
    took = time.monotonic() - started
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert took < 120, f"the campaign took {took:.0f} s with a 6 s timeout"
    cold, warm = sorted(cli.runs("fault-warm"), key=lambda r: r["status"] != "ok")
    assert cold["status"] == "ok"
    assert warm["status"] == "failed" and "sleep stopped: it ran past its timeout of 6 s" in warm["error"], warm
    assert not sleeping(sim_hosts, "gpu01")
    assert sim_hosts.mounts_left() == {}


def test_ctrl_c_during_a_warm_command_leaves_no_process_mount_or_lease(sim_hosts, cli, tmp_path):
    """It left the command, the tmpfs ("target is busy"), an orphaned ansible-playbook, and released the lease."""
    path = warm_hung(tmp_path, "fault-warm-int", "5m")
    args = ["bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu02", "--campaign", path]
    proc = running(cli, *args, "--allow-commands")
    try:
        wait_for(proc, lambda: sleeping(sim_hosts, "gpu02"), "the warm_command on gpu02")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted: teardown done" in " ".join(err.split()), err
    assert not sleeping(sim_hosts, "gpu02")
    assert not of_results(cli, "ansible-playbook")
    assert sim_hosts.mounts_left() == {}
    leases = Path("/opt/iolab/leases")
    assert not [p for p in leases.glob("*.json") if "fault-warm-int" in p.read_text()]  # released, after teardown


def test_a_takeover_ends_a_killed_campaigns_checkpoint_writer_and_removes_its_shards(sim_hosts, cli, tmp_path):
    """The writer ran on after the kill, and the takeover cleaned only the run directory: the shards stayed."""
    target = Path(tempfile.mkdtemp(prefix="iolab-ckpt-", dir="/var/tmp"))
    backend = {"name": "itest-ckpt-kill", "type": "local", "path": str(target)}
    workload = {"name": "ckpt", "type": "checkpoint", "model": "llama3-8b", "scale": 0.01, "writers": 2}
    path = campaign(tmp_path, "fault-ckpt-kill", backend, workloads=[workload])
    args = ["bench.all", "--inventory", str(sim_hosts.inventory), "--hosts", "gpu04", "--campaign", path]
    shards = target / "iolab-gpu04" / "checkpoint"
    proc = running(cli, *args)
    try:
        wait_for(proc, lambda: list(shards.glob("ckpt-rank*.bin")), "a checkpoint shard on gpu04", timeout=180)
        writers = [p for p in processes_of(sim_hosts, "gpu04") if b"iolab.kinds.checkpoint.host" in cmdline(p)]
        assert writers
        proc.kill()  # SIGKILL: no teardown, no lease release
        proc.communicate(timeout=30)
        again = cli("storage.unmount", "--backend", "itest-ckpt-kill", *args[1:])
        said = " ".join(again.stderr.split())
        assert "gpu04: the lease of campaign fault-ckpt-kill" in said and "cleaned what it left:" in said, said
        assert f"wrote in {shards}" in said, said
        assert not any(alive(pid) for pid in writers)
        assert not shards.exists() or not list(shards.iterdir())
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(target, ignore_errors=True)


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
