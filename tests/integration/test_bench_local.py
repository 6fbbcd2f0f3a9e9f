"""bench.all / bench.fio / report on localhost: real Ansible, real fio, real tmpfs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from iolab.shared.processes import alive
from support import ROOT, cmdline, mounted

FIO_1S = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "1s", "ramp": "0s", "size": "32MiB"}


def small_campaign(tmp_path: Path, name: str = "itest", repetitions: int = 2, workloads=None) -> dict:
    local = tmp_path / "disk"
    local.mkdir(exist_ok=True)
    return {
        "name": name,
        "repetitions": repetitions,
        "backends": [
            {"name": "itest-mem", "type": "tmpfs", "size": "128MiB"},
            {"name": "itest-disk", "type": "local", "path": str(local)},
        ],
        "workloads": workloads or [FIO_1S],
    }


def test_a_campaign_runs_end_to_end_and_resumes(cli, write_campaign, tmp_path):
    path = write_campaign(small_campaign(tmp_path))
    done = cli("bench.all", "--campaign", str(path))
    assert "4 to run" in done.stderr + done.stdout

    samples = cli.samples("itest")
    hosts = {s["host"] for s in samples}
    assert hosts == {"localhost", "*"}
    bw = [s for s in samples if s["metric"] == "read_bw" and s["host"] == "localhost"]
    assert len(bw) == 4 and all(s["unit"] == "B/s" and s["value"] > 10e6 for s in bw)
    assert {(s["backend"], s["repetition"]) for s in bw} == {
        (b, r) for b in ("itest-mem", "itest-disk") for r in (1, 2)
    }
    p99 = [s for s in samples if s["metric"] == "read_clat_p99"]
    assert p99 and all(s["unit"] == "ns" and s["value"] > 0 for s in p99)
    meta = bw[0]["metadata"]
    assert meta["fio_version"].startswith("fio-3")
    assert meta["cache_state"] == "dropped"
    assert meta["host"]["kernel"] == os.uname().release
    mem = next(s for s in bw if s["backend"] == "itest-mem")
    assert mem["metadata"]["host"]["mount"]["fstype"] == "tmpfs"
    assert mem["metadata"]["host"]["mount"]["target"] == "/mnt/iolab/itest-mem"
    assert mem["metadata"]["job"]["size"] == 32 << 20
    raw = cli.results / "itest" / "raw" / mem["run_id"] / "localhost"
    assert {"fio.json", "job.fio", "run.json", "drop_caches.json", "stderr.txt"} <= {p.name for p in raw.iterdir()}
    assert "rw=read" in (raw / "job.fio").read_text()
    # localhost's fio runs take the fan-out's route (one call, no run.yml), as ssh hosts' do
    assert json.loads((raw / "run.json").read_text())["launcher"] == "clustershell"

    assert mounted() == []  # teardown unmounted
    assert not list(Path("/opt/iolab/runs").glob(f"*/localhost/{mem['run_id']}"))  # host side cleaned
    assert not (tmp_path / "disk" / "iolab-localhost").exists()

    again = cli("bench.all", "--campaign", str(path))
    assert "4 already stored, 0 to run" in again.stderr + again.stdout
    assert len(cli.samples("itest")) == len(samples)

    table = cli("report", "--campaign", "itest").stdout
    assert "itest-mem" in table and "itest-disk" in table and "read_bw" in table and "(2)" in table
    csv_text = cli("report", "--campaign", "itest", "--format", "csv").stdout
    assert csv_text.count("\n") == len(samples) + 1

    fresh = cli("bench.all", "--campaign", str(path), "--no-resume")
    assert "earlier results kept in" in fresh.stderr + fresh.stdout
    # Every run again, on every host and as the aggregate, with fio's read figures (how many
    # telemetry samples a run has depends on which devices and interfaces were busy: not compared).
    again_samples = cli.samples("itest")
    assert {(s["run_id"], s["host"]) for s in again_samples} == {(s["run_id"], s["host"]) for s in samples}
    assert sorted(
        (s["run_id"], s["host"], s["metric"]) for s in again_samples if s["metric"].startswith("read_")
    ) == sorted((s["run_id"], s["host"], s["metric"]) for s in samples if s["metric"].startswith("read_"))
    assert len(list(cli.results.glob("itest.*"))) == 1


def test_a_failing_run_is_recorded_and_still_unmounts(cli, write_campaign, tmp_path):
    job = tmp_path / "broken.fio"
    job.write_text("[writer]\nrw=write\nbs=4k\nsize=4m\nfilename=/dev/full\n")  # ENOSPC at once
    data = small_campaign(
        tmp_path, name="itest-fail", repetitions=1, workloads=[{"name": "broken", "type": "fio", "jobfile": str(job)}]
    )
    data["backends"] = [{**data["backends"][1], "allow_devices": ["/dev/full"]}]  # a scratch backend's device
    done = cli("bench.all", "--campaign", str(write_campaign(data)), check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "failed on localhost" in done.stderr and "retry" in done.stderr
    runs = cli.runs("itest-fail")
    assert [r["status"] for r in runs] == ["failed"]
    assert "No space left on device" in runs[0]["error"]
    assert cli.samples("itest-fail") == []
    assert mounted() == []
    # The failure came back with the run's own files; its record does not carry their archive.
    host_dir = cli.results / "itest-fail" / "raw" / runs[0]["run_id"] / "localhost"
    assert (host_dir / "fio.json").exists() or (host_dir / "stderr.txt").exists()
    assert "iolab-archive:" not in (host_dir / "error.json").read_text()


def test_bench_fio_on_a_hand_mounted_tmpfs_leaves_it_mounted(cli, write_campaign, tmp_path):
    path = write_campaign(small_campaign(tmp_path))
    flags = ("--profile", "rand-read-16k", "--runtime", "1s", "--ramp", "0s", "--size", "16MiB")
    one_fio = ("bench.fio", "--campaign", str(path), *flags)
    cli("storage.mount", "--campaign", str(path), "--backend", "itest-mem")
    try:
        assert mounted() == ["/mnt/iolab/itest-mem"]
        first = cli(*one_fio)
        assert "read_bw" in first.stdout + first.stderr
        cli(*one_fio)
        reps = sorted({s["repetition"] for s in cli.samples("fio-itest-mem")})
        assert reps == [1, 2]  # a second call is a new repetition
        assert mounted() == ["/mnt/iolab/itest-mem"]  # campaigns leave a kept mount alone
    finally:
        cli("storage.unmount", "--campaign", str(path), "--backend", "itest-mem")
    assert mounted() == []
    # Without the kept mount, the same call mounts a tmpfs of its own and takes it away again.
    cli(*one_fio)
    assert mounted() == []


def test_a_run_too_large_to_return_in_its_output_is_fetched(cli, write_campaign, tmp_path):
    path = write_campaign(small_campaign(tmp_path, name="itest-fetch"))
    cli.env["IOLAB_INLINE_MAX"] = "0"  # every archive stays on the host: collect.yml fetches it
    done = cli(
        "bench.fio",
        "--campaign",
        str(path),
        "--profile",
        "rand-read-16k",
        "--runtime",
        "1s",
        "--ramp",
        "0s",
        "--size",
        "16MiB",
    )
    assert "fetching the run's files from localhost" in done.stderr
    runs = cli.runs("fio-itest-mem")
    assert [r["status"] for r in runs] == ["ok"]
    assert (cli.results / "fio-itest-mem" / "raw" / runs[0]["run_id"] / "localhost" / "fio.json").exists()
    assert [s for s in cli.samples("fio-itest-mem") if s["metric"] == "read_bw"]
    assert not list(Path("/opt/iolab/runs").glob(f"*/localhost/{runs[0]['run_id']}.tar.gz"))  # fetched, removed
    assert mounted() == []


def test_values_never_pass_through_a_shell(cli, write_campaign, tmp_path):
    marker = tmp_path / "pwned"
    data = small_campaign(tmp_path, name="itest-shell", repetitions=1)
    data["backends"] = [
        {
            "name": "itest-sh",
            "type": "tmpfs",
            "size": "64MiB",
            "mountpoint": f"/mnt/iolab/itest-sh;touch {marker};$(touch {marker})",
        }
    ]
    data["workloads"][0]["size"] = "8MiB"
    cli("bench.all", "--campaign", str(write_campaign(data)))
    assert not marker.exists()
    assert len([s for s in cli.samples("itest-shell") if s["metric"] == "read_bw"]) == 2
    assert mounted() == []


@pytest.mark.parametrize(
    "sig, code, said", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")]
)
def test_ctrl_c_or_sigterm_tears_down_and_keeps_what_was_gathered(cli, write_campaign, tmp_path, sig, code, said):
    # Run 1 lasts 1 s, to be stored; run 2 lasts 12 s: the signal lands while it runs (at 4 s, a clean clone's run 2
    # ended before the controller handled SIGINT, and was stored).
    workloads = [{**FIO_1S, "name": "first"}, {**FIO_1S, "runtime": "12s"}]
    data = small_campaign(tmp_path, name="itest-int", repetitions=1, workloads=workloads)
    data["backends"] = data["backends"][:1]
    proc = subprocess.Popen(
        cli.argv("bench.all", "--campaign", str(write_campaign(data))),
        cwd=ROOT,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    runs_dir = Path("/opt/iolab/runs")  # runs/<the command's owner key>/localhost/<run>/
    deadline = time.monotonic() + 120
    pid_file = None
    while time.monotonic() < deadline and pid_file is None:  # wait for run 2's fio to be running
        if cli.samples("itest-int"):
            pid_file = next(iter(runs_dir.glob(f"*-{proc.pid}-*/localhost/*/hostrun.pid")), None)
        time.sleep(0.1)
    assert pid_file is not None, "the second run never started"
    fio_pid = int(pid_file.read_text())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert said in err and "Traceback" not in err
    assert len({s["run_id"] for s in cli.samples("itest-int")}) == 1  # run 1 kept
    assert mounted() == [], err
    assert not alive(fio_pid)
    assert not pid_file.parents[2].exists()  # nor the command's run files on the host


def test_a_hostrun_killed_mid_run_fails_its_run_as_died_and_leaves_nothing(cli, write_campaign, tmp_path):
    """localhost's run is the fan-out's call started here: its hostrun killed outright (kill -9, as the OOM killer
    does) fails the run as died (the signal known, no probe), its fio (in a session of its own) is ended and its
    files packed, and teardown leaves no mount and no run files."""
    data = small_campaign(tmp_path, name="itest-died", repetitions=1, workloads=[{**FIO_1S, "runtime": "30s"}])
    data["backends"] = data["backends"][:1]
    argv = cli.argv("bench.all", "--campaign", str(write_campaign(data)))
    proc = subprocess.Popen(argv, cwd=ROOT, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs_dir = Path("/opt/iolab/runs")
    try:
        deadline, pid_file = time.monotonic() + 120, None
        while pid_file is None and time.monotonic() < deadline and proc.poll() is None:
            pid_file = next(iter(runs_dir.glob(f"*-{proc.pid}-*/localhost/*/hostrun.pid")), None)  # this command's
            time.sleep(0.1)
        assert pid_file is not None, proc.communicate()
        fio_pid = int(pid_file.read_text())
        calls = pid_file.parents[1] / ".calls"
        (hostrun,) = [int(p.name) for p in calls.iterdir() if f"--dir {pid_file.parent} " in cmdline(int(p.name))]
        os.kill(hostrun, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and "Traceback" not in err, out + err
    (run,) = cli.runs("itest-died")
    assert run["status"] == "failed" and "(signal 9): it died there (killed by a signal" in run["error"], run
    assert not alive(fio_pid)
    raw = cli.results / "itest-died" / "raw" / run["run_id"] / "localhost"
    assert (raw / "error.json").exists() and (raw / "job.fio").exists()  # what the dead call left, packed
    assert mounted() == [] and not pid_file.parents[2].exists()


def test_a_bind_mount_of_a_link_to_a_system_directory_is_refused_by_the_host(cli, write_campaign, tmp_path):
    """The controller sees a path of the user's own; the host resolves it to /etc before mounting anything."""
    link = tmp_path / "looks-harmless"
    link.symlink_to("/etc")
    backend = {"name": "itest-bind", "type": "mount", "source": str(link), "fstype": "none", "options": ["bind"]}
    path = write_campaign({**small_campaign(tmp_path), "backends": [backend]})
    done = cli("storage.mount", "--campaign", str(path), "--backend", "itest-bind", check=False)
    said = " ".join(done.stderr.split())
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"the directory {link}, resolved, /etc belongs to the system (/etc)" in said, said
    assert mounted() == []


def test_a_tmpfs_mount_point_with_another_file_system_or_a_size_over_the_ram_is_refused(cli, write_campaign, tmp_path):
    """storage_tmpfs's preflight: each refusal in one line naming the host and the fix; nothing of it mounted."""
    point = Path("/mnt/iolab/itest-occupied")
    point.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "someone-else", str(point)], check=True)
    try:
        path = write_campaign(
            {**small_campaign(tmp_path), "backends": [{"name": point.name, "type": "tmpfs", "size": "8MiB"}]}
        )
        done = cli("storage.mount", "--campaign", str(path), "--backend", point.name, check=False)
        said = " ".join(done.stderr.split())
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"{point} already has another file system (someone-else) mounted on localhost" in said, said
        assert "unmount it or give the backend another mountpoint" in said
        assert mounted() == [str(point)]  # theirs stays, none of ours came
    finally:
        subprocess.run(["umount", str(point)], check=True)
        point.rmdir()
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    huge = {"name": "itest-huge", "type": "tmpfs", "size": f"{2 * ram // (1 << 30)}GiB"}
    path = write_campaign({**small_campaign(tmp_path), "backends": [huge]})
    done = cli("storage.mount", "--campaign", str(path), "--backend", "itest-huge", check=False)
    said = " ".join(done.stderr.split())
    assert (
        done.returncode == 1 and "MiB of memory of localhost (a tmpfs lives in RAM); lower the backend's size" in said
    )
    assert mounted() == []
