"""What a campaign file may not do to a host or to the controller: each reproduction of issue 12, refused in one line.

Every refusal here happens while the campaign is loaded, before anything runs on a host.
The memory and time bounds are measured in a child process (its own peak resident memory), so the
test sees what one `./lab bench.all --campaign FILE` would cost.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from iolab.campaign import model as campaign
from iolab.errors import UserError

GOOD = {
    "name": "refusals",
    "backends": [{"name": "mem", "type": "tmpfs", "size": "64MiB"}],
    "workloads": [{"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "2s"}],
}


ROOT = Path(__file__).resolve().parents[2]


def load(tmp_path: Path, data) -> campaign.Campaign:
    path = tmp_path / "c.yml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return campaign.load(path)


def changed(**backend) -> dict:
    data = copy.deepcopy(GOOD)
    data["backends"] = [backend]
    return data


@pytest.mark.parametrize(
    "backend, says",
    [
        ({"name": "m", "type": "tmpfs", "size": "1GiB", "mountpoint": "/srv"}, "mountpoint /srv is a system directory"),
        ({"name": "m", "type": "tmpfs", "size": "1GiB", "mountpoint": "/etc"}, "belongs to the system (/etc)"),
        ({"name": "m", "type": "tmpfs", "size": "1GiB", "mountpoint": "/"}, "mountpoint / is a system directory"),
        ({"name": "m", "type": "tmpfs", "size": "1GiB", "mountpoint": "/usr/lib/x"}, "belongs to the system (/usr)"),
        ({"name": "m", "type": "tmpfs", "size": "1GiB", "mountpoint": "/home"}, "/home is a system directory"),
        ({"name": "d", "type": "local", "path": "/etc"}, "backends[0].path /etc belongs to the system"),
        ({"name": "d", "type": "local", "path": "/"}, "backends[0].path / is a system directory"),
        (
            {"name": "c", "type": "mount", "source": "nas:/x", "fstype": "nfs", "mountpoint": "/boot"},
            "/boot belongs to the system (/boot)",
        ),
        # Through the back door: /etc bound (or a link to it resolved) is /etc, for writes as for a local path.
        (
            {"name": "b", "type": "mount", "source": "/etc", "fstype": "none", "options": ["bind"]},
            "backends[0].source /etc belongs to the system (/etc)",
        ),
        (
            {"name": "b", "type": "mount", "source": "/dev/../usr/lib", "fstype": "none", "options": ["bind"]},
            "backends[0].source /usr/lib belongs to the system (/usr)",
        ),
        (
            {"name": "s", "type": "sshfs", "host": "gpu01", "path": "/etc"},
            "backends[0].path /etc belongs to the system",
        ),
    ],
)
def test_system_directories_are_refused_as_mount_points_and_paths(tmp_path, backend, says):
    with pytest.raises(UserError, match=r"c\.yml: .*" + re.escape(says)):
        load(tmp_path, changed(**backend))


def test_a_mount_root_of_ones_own_is_used_and_checked(tmp_path):
    data = {**GOOD, "mount_root": "/mnt/lab-b"}
    assert load(tmp_path, data).backends[0].target == "/mnt/lab-b/mem"
    with pytest.raises(UserError, match="mount_root /var is a system directory"):
        load(tmp_path, {**GOOD, "mount_root": "/var"})
    # A local backend keeps its own path; /var/tmp holds data already and benchmarks write a subdirectory.
    local = changed(name="d", type="local", path="/var/tmp")
    assert load(tmp_path, {**local, "mount_root": "/mnt/lab-b"}).backends[0].target == "/var/tmp"


@pytest.mark.parametrize(
    "size, says", [("0.5", "not a whole number of bytes"), (0, "must be positive"), ("0MiB", "must be positive")]
)
def test_a_size_that_would_round_to_nothing_is_refused(tmp_path, size, says):
    """size: 0.5 became 0, which Linux reads as an unlimited tmpfs."""
    with pytest.raises(UserError, match=says):
        load(tmp_path, changed(name="m", type="tmpfs", size=size))


def test_duplicate_keys_are_refused(tmp_path):
    text = (
        "name: a\nname: b\nbackends: [{name: m, type: tmpfs, size: 1GiB}]\n"
        "workloads: [{name: s, type: fio, profile: seq-read-1m}]\n"
    )
    with pytest.raises(UserError, match="key 'name' is given twice in one mapping \\(lines 1 and 2\\)"):
        load(tmp_path, text)


def test_a_runtime_of_centuries_is_refused(tmp_path):
    data = copy.deepcopy(GOOD)
    data["workloads"][0]["runtime"] = "99999999999h"
    with pytest.raises(UserError, match="workloads\\[0\\].runtime: .*more than 7 days"):
        load(tmp_path, data)


def test_a_sweep_of_fifty_thousand_runs_is_refused_unless_meant(tmp_path):
    data = copy.deepcopy(GOOD)
    data["workloads"][0].update(iodepth=list(range(1, 251)), numjobs=list(range(1, 201)))
    with pytest.raises(UserError, match="makes 50,000 runs .* pass --max-runs 50000"):
        load(tmp_path, data)
    path = tmp_path / "c.yml"
    data["workloads"][0].update(iodepth=list(range(1, 21)), numjobs=[1, 2])
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="makes 40 runs"):
        campaign.load(path, max_runs=39)
    assert len(campaign.expand(campaign.load(path, max_runs=40))) == 40


def test_an_error_in_a_swept_workload_names_the_workload_of_the_file(tmp_path):
    """workloads[1] with a sweep used to be reported as workloads[3] (the index among sweep points)."""
    data = copy.deepcopy(GOOD)
    data["workloads"] = [
        {"name": "a", "type": "fio", "profile": "seq-read-1m", "iodepth": [1, 2, 4]},
        {"name": "b", "type": "fio", "profile": "seq-read-1m", "iodepth": [1, 0]},
    ]
    with pytest.raises(UserError, match=r"workloads\[1\]\.iodepth: Input should be greater than or equal to 1"):
        load(tmp_path, data)


BOMB = "\n".join(
    [f"{chr(97)}: &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(9)]
)

# Each case is loaded in a child process: its peak memory (ru_maxrss) and time are the command's.
CHILD = """
import sys, time
from iolab.campaign import model as campaign
from iolab.errors import UserError
started = time.monotonic()
try:
    campaign.load(sys.argv[1])
    outcome = "loaded"
except UserError as exc:
    outcome = str(exc)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the (large) test process.
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(repr((outcome, peak // 1024, time.monotonic() - started)))
"""


def _load_in_child(path: str) -> tuple[str, int, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return eval(out.stdout)  # noqa: S307 — our own repr of a tuple of str, int, float


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda d: "/dev/zero", "is not a regular file"),
        (lambda d: str(d), "is not a regular file"),
        (lambda d: _write(d, "big.yml", "# " + "x" * (2 << 20)), "larger than 1024 KiB"),
        (lambda d: _write(d, "bomb.yml", BOMB), "more than 100,000 values once its aliases"),
        (
            lambda d: _write(
                d,
                "many.yml",
                json.dumps(
                    {
                        **GOOD,
                        "workloads": [
                            {"name": f"w{i}", "type": "fio", "profile": "seq-read-1m"} for i in range(200_000)
                        ],
                    }
                ),
            ),
            "larger than 1024 KiB",
        ),
        (
            lambda d: _write(
                d,
                "many2.yml",
                yaml.safe_dump(
                    {
                        **GOOD,
                        "workloads": [{"name": f"w{i}", "type": "fio", "profile": "seq-read-1m"} for i in range(1_500)],
                    }
                ),
            ),
            "1,500 entries, more than the 1,000",
        ),
    ],
)
def test_oversized_input_is_refused_quickly_in_little_memory(tmp_path, make, says):
    """--campaign /dev/zero grew to 24 GB; an alias bomb cost ~25 CPU-minutes; 200,000 workloads > 300 s."""
    outcome, peak_mib, seconds = _load_in_child(make(tmp_path))
    assert says in outcome
    assert peak_mib < 500, f"peak memory {peak_mib} MiB"
    assert seconds < 30


def _write(directory: Path, name: str, text: str) -> str:
    (directory / name).write_text(text)
    return str(directory / name)


@pytest.mark.parametrize(
    "args, says",
    [
        (["data.histogram", "/proc/self"], "iolab: /proc/self holds no non-empty files"),
        (["bench.all", "--hosts", "", "--dry-run"], "iolab: --hosts is empty"),
        (["bench.all", "--campaign", "/dev/zero", "--dry-run"], "iolab: campaign file /dev/zero is not a regular file"),
    ],
)
def test_bad_input_on_the_command_line_is_one_line(args, says):
    done = subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(says), done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_a_warm_command_runs_only_when_the_operator_allows_commands(tmp_path):
    """warm_command is an argv run on every host: a campaign file someone else wrote may not run it unasked,
    whether a workload or the campaign (for all its workloads) says it. The dry run names it."""
    marker = tmp_path / "ran"
    for where in ("workload", "campaign"):
        data = copy.deepcopy(GOOD)
        owner = data["workloads"][0] if where == "workload" else data
        owner |= {"cache": "warm", "warm_command": ["touch", str(marker)]}
        path = tmp_path / f"{where}.yml"
        path.write_text(yaml.safe_dump(data))
        said = f"workload seq: warm_command runs 'touch {marker}' on every host"
        _commands_need_the_operator(path, said)
    assert not marker.exists()


def test_a_dlio_requirement_is_installed_only_when_the_operator_allows_commands(tmp_path):
    """Issue 37: dlio_requirement was pip-installed as given, as root (a local tree's setup.py runs there)."""
    data = copy.deepcopy(GOOD)
    data["dataset"] = {"kind": "unet3d", "files": 28, "seed": 1}
    data["workloads"] = [
        {
            "name": "d",
            "type": "mlperf",
            "workload": "unet3d",
            "accelerator": "h100",
            "engine": "dlio",
            "dlio_requirement": str(tmp_path / "dlio-tree"),
        }
    ]
    path = tmp_path / "dlio.yml"
    path.write_text(yaml.safe_dump(data))
    said = (
        f"workload d: dlio_requirement installs '{tmp_path / 'dlio-tree'}' with pip, as root, on every host "
        "(a local tree's setup.py runs there)"
    )
    _commands_need_the_operator(path, said)
    data["workloads"][0]["dlio_requirement"] = "--index-url=http://elsewhere/simple"
    path.write_text(yaml.safe_dump(data))
    done = subprocess.run([*_bench_all(path), "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "a pip option is refused" in done.stderr


def _bench_all(path: Path) -> list[str]:
    return [sys.executable, "-m", "invoke", "bench.all", "--campaign", str(path)]


def _commands_need_the_operator(path: Path, said: str) -> None:
    """The dry run names what the campaign would run on the hosts; bench.all refuses it before touching a host
    unless --allow-commands."""
    dry = subprocess.run([*_bench_all(path), "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0 and f"{said} (only with bench.all --allow-commands)" in dry.stdout, dry.stderr
    done = subprocess.run(_bench_all(path), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and done.stderr.strip().splitlines() == [
        f"iolab: {path}: {said}; pass --allow-commands if you trust this campaign file"
    ]


@pytest.mark.parametrize(
    "backend",
    [
        {"name": "d", "type": "mount", "source": "/dev/nvme1n1", "fstype": "xfs"},  # a device: what mount is for
        {"name": "i", "type": "mount", "source": "/var/tmp/disk.img", "fstype": "ext4", "options": ["loop"]},
        {"name": "n", "type": "mount", "source": "nas01:/export", "fstype": "nfs"},
        {"name": "s", "type": "sshfs", "host": "gpu01", "path": "/etc", "readonly": True},  # read, never written
    ],
)
def test_sources_that_are_devices_images_or_read_only_are_accepted(tmp_path, backend):
    assert load(tmp_path, changed(**backend)).backends[0].name == backend["name"]
