"""The rbd_snapshot backend's state as host calls over the fan-out (iolab.host.storage.rbdsnapshot, iolab.drive.steps,
issue 42): the snapshot made on the first host only, whose refusal is every host's (as the role's run_once task's is),
then each host's mapping; a scratch image mapped on two hosts refused by each host's call. Two hosts on this machine
through the fan-out's real engine, and the real `rbd` program, here pointed at a cluster that is not there. The
success path runs against the lab box's real Ceph (tests/lab/test_backends.py: two simulated hosts, QEMU over FUSE;
tests/integration/test_kvcache.py: a scratch image)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.drive import runner, steps
from iolab.shared import calls

pytestmark = [
    pytest.mark.skipif(shutil.which("rbd") is None, reason="needs Ceph's rbd program (apt-get install ceph)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="mapping needs root"),
]

HOSTS = ["here1", "here2"]


@pytest.fixture
def backend(tmp_path) -> dict:
    """An rbd_snapshot backend of this test's own (its name, mount point and image), its cluster not there."""
    conf, keyring = tmp_path / "ceph.conf", tmp_path / "keyring"
    conf.write_text("[global]\nmon_host = 127.0.0.1:1\n")  # no cluster there
    keyring.write_text("[client.admin]\n\tkey = AQAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAA==\n")
    name = f"unit-snap-{os.getpid()}"
    point = tmp_path / "mnt" / name
    variables = {"storage_role": "storage_rbd_snapshot", "storage_rbd_snapshot_state": "mounted"}
    variables |= {"storage_rbd_snapshot_name": name, "storage_rbd_snapshot_mountpoint": str(point)}
    variables |= {"storage_rbd_snapshot_pool": "iolab", "storage_rbd_snapshot_image": f"iolab-{name}"}
    variables |= {"storage_rbd_snapshot_snapshot": "dataset", "storage_rbd_snapshot_size": 64 << 20}
    variables |= {"storage_rbd_snapshot_fio_size": 16 << 20, "storage_rbd_snapshot_method": "auto"}
    variables |= {"storage_rbd_snapshot_options": [], "storage_rbd_snapshot_scratch": False}
    variables |= {"storage_rbd_snapshot_ceph_conf": str(conf), "storage_rbd_snapshot_keyring": str(keyring)}
    variables |= {"storage_rbd_snapshot_client": "admin", "storage_rbd_snapshot_connect_timeout": 3}
    return variables


def test_the_first_hosts_refusal_ends_the_step_on_every_host_and_the_teardown_is_each_hosts_own(
    here_engine, here_extra, backend
):
    extra, variables, engine = here_extra, backend, here_engine()
    point = Path(variables["storage_rbd_snapshot_mountpoint"])
    mounted = runner.Phase("storage.yml", variables)
    argvs = steps.calls(mounted, HOSTS, set(HOSTS), extra, {})
    assert argvs is not None and all(
        "--hosts" in argv and argv[argv.index("--hosts") + 1] == "2" for argv in argvs.values()
    )
    outcomes = steps.play(engine, mounted, argvs, HOSTS, extra, {h: {} for h in HOSTS})
    assert outcomes is not None and [o.state for o in outcomes.values()] == ["failed", "failed"]
    said = f"the Ceph cluster of {variables['storage_rbd_snapshot_ceph_conf']} does not answer from here1"
    assert all(said in o.message and "invoke lab.services-up" in o.message for o in outcomes.values()), outcomes
    assert {o.task for o in outcomes.values()} == {steps.TASKS["storage_rbd_snapshot image"]}
    assert not point.exists()  # neither host's mapping was tried

    unmounted = runner.Phase("storage.yml", {**variables, "storage_rbd_snapshot_state": "unmounted"})
    argvs = steps.calls(unmounted, HOSTS, set(HOSTS), extra, {})
    outcomes = steps.play(engine, unmounted, argvs or {}, HOSTS, extra, {})  # no image call: each host's own
    assert outcomes is not None and [o.state for o in outcomes.values()] == ["ok", "ok"], outcomes


def test_the_first_hosts_call_links_every_inventory_host_and_both_routes_build_one_argv(here_extra, backend):
    extra, variables = here_extra, backend
    inventory = {"here1": {}, "here2": {}, "gpu09": {}}  # a host of the inventory that this command did not select
    once = steps._once(runner.Phase("storage.yml", variables), "here1", extra, inventory)
    assert once is not None and once[2:4] == ["iolab.host.storage.rbdsnapshot", "image"]
    assert [a for a in once if a.startswith("--link=")] == ["--link=here1", "--link=here2", "--link=gpu09"]
    # the role's task gives the filter plugin the same variables: the same argv
    plugin = Path(steps.__file__).parents[3] / "roles" / "bench_fio" / "filter_plugins"
    sys.path.insert(0, str(plugin))
    try:
        import iolab_hostcall

        role = {**variables, "storage_rbd_snapshot_hosts": list(inventory), "storage_rbd_snapshot_stop_timeout": 30}
        assert iolab_hostcall.iolab_call(role, "rbd_snapshot_image", sys.executable, "here1") == once
        assert iolab_hostcall.iolab_call(role, "rbd_snapshot", sys.executable, "here1", None) == calls.rbd_snapshot(
            sys.executable, "here1", role
        )
        with pytest.raises(ValueError, match="no host call '_storage'"):  # a name that is no argv of shared.calls
            iolab_hostcall.iolab_call(role, "_storage", sys.executable, "here1")
    finally:
        sys.path.remove(str(plugin))


def test_a_scratch_image_mapped_on_two_hosts_is_refused_by_each_hosts_call(backend):
    variables = backend | {"storage_rbd_snapshot_scratch": True, "storage_rbd_snapshot_fio_size": 0, "storage_hosts": 2}
    argv = calls.rbd_snapshot(sys.executable, "here1", variables)
    env = {**os.environ, "PYTHONPATH": str(Path(steps.__file__).parents[2])}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "maps iolab/iolab-unit-snap" in done.stderr and "which 2 hosts cannot share; select one host" in done.stderr
    assert not Path(variables["storage_rbd_snapshot_mountpoint"]).exists()
    one = subprocess.run(
        calls.rbd_snapshot(sys.executable, "here1", {**variables, "storage_rbd_snapshot_state": "absent"}),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert one.returncode == 0 and json.loads(one.stdout)["changed"] is False, one.stderr
