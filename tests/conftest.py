"""Shared fixtures: the repository root, a results directory and campaign files per test, the session's simulated
lab (`sim_hosts`, tests/simlab.py) and its lab in a box (`ceph_box`, `lab_box`, tests/labbox.py), each up once
for every test that asks; and the CI's pytest-xdist groups (`xdist_group`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    """A private results/ for the test (iolab reads $IOLAB_RESULTS)."""
    path = tmp_path / "results"
    monkeypatch.setenv("IOLAB_RESULTS", str(path))
    return path


@pytest.fixture
def write_campaign(tmp_path):
    """`write(data, name)`: a campaign file of the test's own (YAML) → its path."""

    def write(data: dict, name: str = "campaign.yml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture
def cli(results):
    """`./lab TASK ...` as a user runs it, with this test's private results (support.Cli)."""
    from support import Cli

    return Cli(results)


HERE = ["here1", "here2"]  # two hosts that are this machine (ansible_connection local), for the fan-out's tests


@pytest.fixture
def here_extra(tmp_path) -> dict:
    """The fan-out's extra variables for hosts that are this machine: their release is this checkout's code."""
    releases = tmp_path / "host" / "releases"
    releases.mkdir(parents=True)
    (releases / "this").symlink_to(ROOT / "pyfiles")  # the hosts' PYTHONPATH
    host_dir = str(tmp_path / "host")
    return {"iolab_python": sys.executable, "iolab_host_dir": host_dir, "iolab_release": "this", "iolab_owner": "me"}


@pytest.fixture
def here_engine(tmp_path):
    """`make(more=None)`: the fan-out's real engine (iolab.drive.fanout.Engine) over HERE, with `more` hosts (name →
    variables) in its inventory besides; each closed after the test."""
    from iolab.campaign.hosts import load_inventory
    from iolab.drive import fanout

    made = []

    def make(more: dict | None = None):
        path = tmp_path / "here.yml"
        hosts = {h: {"ansible_connection": "local"} for h in HERE} | (more or {})
        path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
        made.append(fanout.Engine(load_inventory(path), HERE, console=None))
        return made[-1]

    yield make
    for engine in made:
        engine.close()


def needs_root():
    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mounts, cache drops)")


@pytest.fixture(scope="session")
def sim_hosts():
    """Four simulated GPU hosts (tests/simlab.py), a lab of the session's own beside any other on this machine."""
    from iolab import sim
    from simlab import SIM_HOST_COUNT, SimLab, temporary_lab

    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, sshd)")
    lab = temporary_lab("t")
    try:
        started = time.monotonic()
        hosts = sim.up(SIM_HOST_COUNT, lab)
        yield SimLab(lab, hosts, time.monotonic() - started)
    finally:
        sim.down(lab)
        shutil.rmtree(lab.dir, ignore_errors=True)


@pytest.fixture(name="temporary_lab")
def temporary_lab_fixture():
    """`temporary_lab(prefix)`: a lab of its own for a test, which takes it down itself."""
    from simlab import temporary_lab

    return temporary_lab


@pytest.fixture(scope="session")
def the_box(sim_hosts) -> Iterator:
    """The session's lab in a box on the simulated lab's controller address, its services started by the
    fixtures below as the tests need them; torn down at the session's end."""
    from labbox import lab_box as box

    with box(sim_hosts.controller) as up:
        yield up


@pytest.fixture(scope="session")
def lab_box(the_box):
    """The session's Ceph (RBD, CephFS, radosgw) and nfs-ganesha."""
    return the_box.ensure("ceph", "nfs")


@pytest.fixture(scope="session")
def nfs_box(the_box):
    """The session's nfs-ganesha, with Ceph only if a test of the session asked for it."""
    return the_box.ensure("nfs")


@pytest.fixture(scope="session")
def ceph_box(the_box):
    """The session's Ceph (RBD, CephFS, radosgw), without NFS unless a test of the session asked for it."""
    return the_box.ensure("ceph")


BOX_FIXTURES = {"lab_box": ("ceph", "nfs"), "ceph_box": ("ceph",), "nfs_box": ("nfs",)}
_BOX_LOOKED: list[bool] = []  # whether _lab_box_early has looked, once per session (per pytest-xdist worker)


def box_services(items) -> tuple[str, ...]:
    """The lab box's services that `items` ask for (their fixtures' closure), in the box's order."""
    wanted = {s for item in items for name in getattr(item, "fixturenames", ()) for s in BOX_FIXTURES.get(name, ())}
    return tuple(s for s in ("ceph", "nfs") if s in wanted)


@pytest.fixture(autouse=True)
def _lab_box_early(request):
    """At the first test of a session (of a pytest-xdist worker: of its first group), the lab box's services that the
    session's (the group's) tests will ask for start in the background (LabBox.start_soon), while the tests that need
    no box run first (pytest_collection_modifyitems): the box's start (Ceph's ≈ 66 s, half of it waiting on its
    daemons) is then off the tests' path."""
    if _BOX_LOOKED or os.geteuid() != 0:
        return
    _BOX_LOOKED.append(True)
    items = request.session.items
    if os.environ.get("PYTEST_XDIST_WORKER"):
        group = xdist_group(request.node.nodeid)
        items = [item for item in items if xdist_group(item.nodeid) == group]
    if services := box_services(items):
        request.getfixturevalue("the_box").start_soon(*services)


@pytest.fixture
def small_tmpfs(tmp_path):
    """mount(*options): a tmpfs of those options at tmp_path/results (a results disk, or a backend's target, of the
    test's own), unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "results"
    mnt.mkdir()
    mounted = []

    def mount(*options: str) -> Path:
        subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "iolab-test-results", str(mnt)], check=True)
        mounted.append(mnt)
        return mnt

    yield mount
    for path in mounted:
        subprocess.run(["umount", str(path)], check=False)


def pytest_collection_modifyitems(items):
    """The tests of the lab box's own life cycle (stopped, started again, absent) run last, in their order; before
    them the FLOATING files' tests (so pytest-xdist queues their groups after the two long ones), and before those
    STOPS_GANESHA's (docs/DESIGN.md, "The test suite"); before those, the tests that need the lab box after the ones
    that need none, which run while it comes up (`_lab_box_early`)."""

    def key(item) -> tuple[bool, bool, bool, bool]:
        name = Path(item.nodeid.split("::", 1)[0]).name
        lifecycle = item.get_closest_marker("lab_box_lifecycle") is not None
        return (lifecycle, name in FLOATING, name in STOPS_GANESHA, bool(box_services([item])))

    items.sort(key=key)


# Integration tests that run no campaign on this machine (so take no lease of it and mount nothing under
# /mnt/iolab) but need the lab box's NFS (only one worker's box may run nfs-ganesha: tests/labbox.py): the box's own,
# and the userspace NFS client's campaign, on a simulated host.
OFF_LOCALHOST = {"test_services.py", "test_nfs_userspace.py"}

# Tests that stop the box's nfs-ganesha (fault nfs_stop; it is started again): after the simlab group's other tests,
# which see the box's services as started, Ceph and NFS in one play (started at the group's first test).
STOPS_GANESHA = {"test_nfs_userspace.py"}

# Integration tests that need neither this machine's lease, nor a simulated lab, nor a lab box: the reports' and the
# results database's, which read stored files, the live figures' gateway, a role's staging play in a tmp_path. Each
# file is a group of its own, queued after the two long groups: whichever worker ends its group first takes them
# (the two groups' lengths vary from run to run by minutes: docs/PERFORMANCE.md, "The project's own CI").
FLOATING = {
    "test_report_faults.py",
    "test_report_html.py",
    "test_results_publish.py",
    "test_live_pushgateway.py",
    "test_s3_staging.py",
}


# Lab tests that need the simulated hosts alone (no lab box, no NFS), run in the localhost group to even the two
# groups out: that worker has a simulated lab of its own already (test_s3.py's fan-out to a simulated host), a second
# lab beside the simlab group's (two labs' gpu01 are two hosts: tests/lab/test_shared_lab.py). DLIO's test (≈ 210 s
# in a clean clone's CI) left the simlab group ≈ 410 s the longer (docs/PERFORMANCE.md, "The project's own CI").
SIM_ON_LOCALHOST = {"test_dlio_engine.py"}


def xdist_group(nodeid: str) -> str:
    """The pytest-xdist group of a test (`--dist loadgroup`, tasks/test.py): a group's tests run one after another on
    one worker, in their order. "localhost": the integration tests' campaigns on this machine, which take its lease
    and mount under /mnt/iolab; "simlab": the simulated lab's tests, which share its hosts' names (gpu01..) and run
    directories, and the integration tests of OFF_LOCALHOST, which need its box's NFS (but the lab tests of
    SIM_ON_LOCALHOST, in the localhost group). A FLOATING file, and a unit test, is a group of its own."""
    path = nodeid.split("::", 1)[0]
    if path.removeprefix("tests/integration/") in FLOATING:
        return path
    if path.removeprefix("tests/lab/") in SIM_ON_LOCALHOST:
        return "localhost"
    if path.startswith("tests/lab/") or path.removeprefix("tests/integration/") in OFF_LOCALHOST:
        return "simlab"
    return "localhost" if path.startswith("tests/integration/") else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` by `xdist_group`. pytest-xdist 3.8 finds a test's group in a suffix it adds to the test's
    node ID, which pytest 9.2's node IDs no longer take (every test became a group of its own): the groups here
    are the tests' paths'."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return ByGroup(config, log)
