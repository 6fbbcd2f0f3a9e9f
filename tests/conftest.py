"""Shared fixtures: the repository root, a results directory per test, the session's simulated lab (`sim_hosts`,
tests/simlab.py) and its lab in a box (`lab_box`, tests/labbox.py), each up once for every test that asks."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    """A private results/ for the test (iolab reads $IOLAB_RESULTS)."""
    path = tmp_path / "results"
    monkeypatch.setenv("IOLAB_RESULTS", str(path))
    return path


@pytest.fixture
def cli(results):
    """`./lab TASK ...` as a user runs it, with this test's private results (support.Cli)."""
    from support import Cli

    return Cli(results)


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
def lab_box(sim_hosts) -> Iterator:
    """The session's Ceph (RBD, CephFS, radosgw) and nfs-ganesha on the simulated lab's controller address."""
    from labbox import lab_box as box

    with box(sim_hosts.controller) as up:
        yield up


def pytest_collection_modifyitems(items):
    """The tests of the lab box's own life cycle (stopped, started again, absent) run last, in their order."""
    items.sort(key=lambda item: item.get_closest_marker("lab_box_lifecycle") is not None)
