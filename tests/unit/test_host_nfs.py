"""iolab.host.storage.nfs: an NFS backend's mount and unmount in one host-side call (issue 42), as root on this machine,
with the real nfs-ls pointed at a server that is not there: the refusals before anything is mounted, in the role's
words, and the answer that sends a host lacking the FUSE client's packages to Ansible to install them. The mounts
themselves run against the lab box's nfs-ganesha (tests/integration/test_nfs_userspace.py: the FUSE client on a
simulated host; tests/lab/test_backends.py: the export listed, then the kernel's missing client refused)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from iolab.host import mounts
from iolab.host.storage import nfs

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root"),
    pytest.mark.skipif(shutil.which("nfs-ls") is None, reason="needs libnfs's nfs-ls (apt-get install libnfs-utils)"),
]


@pytest.fixture
def where(tmp_path):
    name = f"unit-nfs-{os.getpid()}"
    state = Path(f"/run/iolab/storage/here/{name}")
    yield name, tmp_path / "mnt" / name, state
    shutil.rmtree(state, ignore_errors=True)
    assert mounts.mounted_at(str(tmp_path / "mnt" / name)) is None


def call(capsys, where, state: str, *extra: str) -> tuple[int, dict | str]:
    name, point, state_dir = where
    argv = [state, "--name", name, "--host", "here", "--mountpoint", str(point), "--state-dir", str(state_dir)]
    code = nfs.main([*argv, *extra])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else err.strip()


def test_what_is_refused_before_anything_is_mounted(capsys, where):
    name = where[0]
    assert call(capsys, where, "mounted") == (
        1,
        f"backend {name} names no server; give it server NAME and export /PATH",
    )

    server = ["--server", "127.0.0.1", "--export", "/iolab", "--port", "1", "--check-timeout", "5"]
    code, said = call(capsys, where, "mounted", *server, "--version", "4.1", "--method", "kernel")
    assert code == 1
    assert said.startswith("export 127.0.0.1:/iolab (NFSv4.1) does not answer here: nfs-ls ")
    assert "nfs://127.0.0.1/iolab?version=4&nfsport=1 said" in said and "invoke lab.services-up" in said

    if os.path.exists("/dev/fuse"):
        code, said = call(capsys, where, "mounted", *server, "--version", "4.2", "--method", "fuse")
        assert (code, said) == (
            1,
            "NFSv4.2 is not one the FUSE client (nfs-rs) speaks; give the backend version 3, 4.0 or 4.1",
        )
        # the FUSE client's packages at a version this environment lacks: Ansible's to install, nothing mounted
        code, said = call(capsys, where, "mounted", *server, "--method", "fuse", "--fuse-package=nfs-rs==0.0.1")
        assert code == 0 and said["install"][-1:] == ["pip"] and not said["changed"]
        # asked again once the role has installed them (--installed), and still missing: refused in one line
        code, said = call(
            capsys, where, "mounted", *server, "--method", "fuse", "--fuse-package=nfs-rs==0.0.1", "--installed"
        )
        assert code == 1 and said.endswith(
            "here still lacks nfs-rs==0.0.1 after the role installed its packages; install it by hand"
        )
    assert not where[1].exists() and not where[2].exists()

    # nothing there to take away: nothing done, nothing left
    assert call(capsys, where, "unmounted") == (0, {"kept": False, "changed": False, "stopped": []})
