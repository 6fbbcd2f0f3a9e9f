"""iolab.host.storage.fsmount: a generic mount backend's mount and unmount in one host-side call (issue 42), as root on
this machine: a real read-only tmpfs through `mount -t`, recorded, its write refused, used as it is when mounted again,
unmounted with nothing left; a type the kernel does not know refused naming the client to install, nothing left
mounted. The loop ext4 image on simulated hosts is tests/lab/test_backends.py's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iolab.host import mounts
from iolab.host.storage import fsmount

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mount(2) needs root")


@pytest.fixture
def where(tmp_path):
    name = f"unit-mnt-{os.getpid()}"
    point = tmp_path / "mnt" / name
    yield name, point
    while mounts.mounted_at(str(point)) is not None:
        subprocess.run(["umount", str(point)], check=True)  # a failed test's own mount
    shutil.rmtree(f"/run/iolab/storage/here/{name}", ignore_errors=True)


def call(capsys, where, state: str, *extra: str) -> tuple[int, dict | str]:
    name, point = where
    argv = [state, "--name", name, "--host", "here", "--mountpoint", str(point)]
    code = fsmount.main([*argv, "--state-dir", f"/run/iolab/storage/here/{name}", *extra])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else err.strip()


def test_a_read_only_mount_is_made_recorded_checked_used_as_it_is_and_taken_away(capsys, where):
    name, point = where
    assert call(capsys, where, "mounted", "--source", "tmpfs") == (
        1,
        f"backend {name} must name source and fstype (e.g. source nas01:/export, fstype nfs)",
    )
    ro = ["--source", "tmpfs", "--fstype", "tmpfs", "--readonly", "--option=size=1m"]
    assert call(capsys, where, "mounted", *ro) == (0, {"kept": False, "changed": True})
    record = mounts.record_for(mounts.mounted_at(str(point)))
    assert record is not None and (record["backend"], record["method"], record["readonly"]) == (
        name,
        "mount -t tmpfs",
        True,
    )
    assert call(capsys, where, "mounted", *ro) == (0, {"kept": False, "changed": False})
    assert call(capsys, where, "unmounted") == (0, {"kept": False, "changed": True, "stopped": []})
    assert mounts.mounted_at(str(point)) is None and not Path(f"/run/iolab/storage/here/{name}").exists()


def test_a_type_the_kernel_does_not_know_is_refused_naming_the_client_and_nothing_is_left(capsys, where):
    code, said = call(capsys, where, "mounted", "--source", "nas01:/x", "--fstype", "iolabnofs")
    assert code == 1 and said.startswith("mounting nas01:/x (iolabnofs) failed at 'Mount the file system': ")
    assert "(here knows no file system type iolabnofs and has no mount.iolabnofs: install its client" in said
    assert said.endswith("; nothing is left mounted on here")
    assert mounts.mounted_at(str(where[1])) is None
