"""The sshfs backend's mount and unmount as one host call over the fan-out (iolab.host.storage.sshfs, iolab.drive.steps,
issue 42): the serving host's login key goes on each call's stdin, never in an argv; a mount that fails partway
releases everything it held (the key's file with it) and names its step; a serving host the inventory lacks is refused
by each host's call. Two hosts on this machine through the fan-out's real engine and the real sshfs, pointed at a port
where nothing listens. The success path runs against simulated hosts' sshd (tests/lab/test_backends.py: the role's
route and the fan-out's)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest

from iolab.drive import runner, steps

pytestmark = [
    pytest.mark.skipif(shutil.which("sshfs") is None, reason="needs sshfs (apt-get install sshfs)"),
    pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/fuse"), reason="mounting needs root and FUSE"),
]

HOSTS = ["here1", "here2"]
KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key-but-a-secret\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.fixture
def lab(tmp_path, here_engine, here_extra):
    """The engine over two hosts here, the serving host `srv` in its inventory (a port where nothing listens, a key
    file of the test's own), and an sshfs backend of the test's own."""
    key = tmp_path / "id_serving"
    key.write_bytes(KEY)
    hostvars = {h: {"ansible_connection": "local"} for h in HOSTS}
    hostvars["srv"] = {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_ssh_private_key_file": str(key)}
    engine = here_engine({"srv": hostvars["srv"]})
    name = f"unit-ssh-{os.getpid()}"
    variables = {"storage_role": "storage_sshfs", "storage_sshfs_state": "mounted", "storage_sshfs_name": name}
    variables |= {"storage_sshfs_mountpoint": str(tmp_path / "mnt" / name), "storage_sshfs_host": "srv"}
    variables |= {"storage_sshfs_path": "/srv/data", "storage_sshfs_readonly": True, "storage_sshfs_options": []}
    return engine, here_extra, hostvars, variables


def test_the_key_goes_on_stdin_and_a_mount_that_fails_releases_everything_it_held(lab):
    engine, extra, hostvars, variables = lab
    mounted = runner.Phase("storage.yml", variables)
    argvs = steps.calls(mounted, HOSTS, set(HOSTS), extra, hostvars)
    assert argvs is not None and all("--key-on-stdin" in argv for argv in argvs.values())
    assert not any(b"secret" in arg.encode() or arg.endswith("id_serving") for argv in argvs.values() for arg in argv)
    # what each call reads on its stdin is the key, whole
    echo = [sys.executable, "-c", "import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"]
    replies = engine.call({h: echo for h in HOSTS}, 30, stdin={h: KEY for h in HOSTS})
    assert {h: r.out for h, r in replies.items()} == {h: [hashlib.sha256(KEY).hexdigest()] for h in HOSTS}

    one = {"here1": argvs["here1"]}  # (both hosts are this machine, with one mount point: one mounts)
    outcomes = steps.play(engine, mounted, one, ["here1"], extra, hostvars)
    assert outcomes is not None and outcomes["here1"].state == "failed", outcomes
    said = " ".join(outcomes["here1"].message.split())
    assert "mounting srv:/srv/data with sshfs failed at 'Mount the directory with sshfs'" in said, said
    assert "everything it held on here1 was released" in said, said
    assert not Path(f"/run/iolab/storage/here1/{variables['storage_sshfs_name']}").exists()  # the key with it
    assert not os.path.ismount(variables["storage_sshfs_mountpoint"])


def test_a_serving_host_the_inventory_lacks_is_refused_and_a_gateway_leaves_the_key_to_ansible(lab):
    engine, extra, hostvars, variables = lab
    elsewhere = runner.Phase("storage.yml", {**variables, "storage_sshfs_host": "nowhere"})
    argvs = steps.calls(elsewhere, HOSTS, set(HOSTS), extra, hostvars)
    outcomes = steps.play(engine, elsewhere, argvs or {}, HOSTS, extra, hostvars)
    assert outcomes is not None and [o.state for o in outcomes.values()] == ["failed", "failed"], outcomes
    said = " ".join(outcomes["here1"].message.split())
    assert f"host nowhere of backend {variables['storage_sshfs_name']} is not in the inventory" in said, said

    through = {**hostvars, "here1": {**hostvars["here1"], "iolab_topology": "/etc/clustershell/topology.conf"}}
    assert steps.calls(runner.Phase("storage.yml", variables), HOSTS, set(HOSTS), extra, through) is None
