"""A host lease that cannot be taken for sure refuses the command; a lease is let go only after teardown.

The holders here are real (iolab.shared.leasehold on this machine, as for the local inventory), in a
lease directory of the test's own instead of /opt/iolab/leases.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from iolab.drive import execute, lease
from iolab.errors import UserError
from iolab.run import cli as cli_mod
from support import ROOT

HOST = "localhost"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "LEASE_DIR", str(tmp_path / "leases"))
    return cli_mod.lab(str(ROOT / "inventory" / "local.yml"), HOST)


def record_path(tmp_path: Path) -> Path:
    (found,) = (tmp_path / "leases").glob("netns-*.json")
    return found


def test_a_damaged_record_of_a_held_host_refuses_the_second_command_in_one_line(lab, tmp_path):
    """The holder used to crash on it (int("x")), and the command ran anyway after "no lease taken"."""
    with lease.held(lab, "campaign first"):
        record_path(tmp_path).write_text(json.dumps({"holder_pid": "x"}))
        started = time.monotonic()
        with pytest.raises(UserError) as refused:
            with lease.held(lab, "campaign second"):
                pytest.fail("the second command ran on a host it holds no lease of")
        assert time.monotonic() - started < 30
    said = str(refused.value)
    assert said.startswith(f"{HOST}: no lease taken, so nothing was run: the lease record ")
    assert "is damaged (not a JSON object with an integer holder_pid)" in said
    assert "then remove that file" in said and "\n" not in said


@pytest.mark.parametrize("text", ["[1, 2]", "{not json", '{"held_for": "campaign x"}'])
def test_a_damaged_record_beside_a_free_lock_refuses_rather_than_take_over_blind(lab, tmp_path, text):
    """A free lock with a record nobody can read: what its command left cannot be cleaned, so no taking over."""
    with lease.held(lab, "campaign first"):
        path = record_path(tmp_path)
    path.write_text(text)
    with pytest.raises(UserError, match=r"^localhost: no lease taken, so nothing was run: the lease record .* damaged"):
        with lease.held(lab, "campaign second"):
            pytest.fail("the command ran")
    assert path.read_text() == text  # left for the operator to look at
    path.unlink()
    with lease.held(lab, "campaign third"):  # the lock itself was let go
        pass


def test_a_lease_directory_that_cannot_be_made_refuses_naming_the_cause(lab, tmp_path):
    (tmp_path / "leases").write_text("a file where the directory goes")
    with pytest.raises(UserError, match=r"^localhost: no lease taken, so nothing was run: cannot take the lease in "):
        with lease.held(lab, "campaign first"):
            pytest.fail("the command ran")


def test_a_lease_is_kept_for_the_next_command_where_teardown_is_incomplete(lab, tmp_path, monkeypatch):
    monkeypatch.setattr(execute, "untorn", set())
    lab.console.begin_capture()
    with lease.held(lab, "campaign first"):
        execute.untorn.add(HOST)  # what tear_down records when an unmount failed there
    said = lab.console.end_capture()
    assert "localhost: teardown incomplete; its lease record stays" in said
    assert json.loads(record_path(tmp_path).read_text())["held_for"] == "campaign first"
    execute.untorn.clear()
    lab.console.begin_capture()
    with lease.held(lab, "campaign second"):
        pass
    assert "the lease of campaign first" in lab.console.end_capture()  # taken over, and cleaned after
    assert not list((tmp_path / "leases").glob("netns-*.json"))  # the second ended with its teardown complete


def test_two_inventory_names_for_one_machine_are_refused_naming_both(tmp_path, monkeypatch):
    """Issue 37: the second name's lease was refused as held by the command itself ("held by ... PID <its own>")."""
    monkeypatch.setattr(lease, "LEASE_DIR", str(tmp_path / "leases"))
    inventory = tmp_path / "twice.yml"
    inventory.write_text(
        "all:\n  hosts:\n"
        "    gpu01: {ansible_host: 10.9.9.1}\n"
        "    gpu05: {ansible_host: 10.9.9.1, ansible_port: 22}\n"
        "    gpu06: {ansible_host: 10.9.9.1, ansible_port: 2222}\n"
    )
    with pytest.raises(UserError) as refused:
        with lease.held(cli_mod.lab(str(inventory), "gpu01,gpu05,gpu06"), "campaign twice"):
            pass
    assert str(refused.value).startswith("gpu01 and gpu05 are one machine (10.9.9.1 port 22): ")
    assert not (tmp_path / "leases").exists()  # refused before any holder started


FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


@pytest.mark.skipif(not FAKETIME.exists(), reason="needs libfaketime (./lab test installs it)")
@pytest.mark.parametrize(("offset", "says"), [("+5s", "ahead of"), ("-5s", "behind"), ("+0.3s", None)])
def test_a_host_whose_clock_disagrees_with_the_controllers_is_refused_as_its_lease_is_taken(
    lab, monkeypatch, offset, says
):
    """Issue 37, defect 5: a host's start waits for T on its own clock; one a few seconds off starts apart from the
    others, and nothing said so. The real lease holder runs with its clock moved by libfaketime (a local host's
    holder is this machine's process, with this process's environment)."""
    monkeypatch.setenv("LD_PRELOAD", str(FAKETIME))
    monkeypatch.setenv("FAKETIME", offset)
    if says is None:
        with lease.held(lab, "campaign clock"):
            return
    with pytest.raises(UserError) as refused:
        with lease.held(lab, "campaign clock"):
            pass
    said = str(refused.value)
    assert said.startswith("localhost's clock is at least ") and f"s {says} this controller's (more than 1 s)" in said
    assert "sync its clock (chrony or NTP)" in said
