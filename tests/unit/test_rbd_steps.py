"""The rbd backend's state as host calls over the fan-out (iolab.drive.steps, issue 42): its image made ready on the
first host only, whose failure is every host's (as the role's run_once task's is), then each host's work directory.
Two hosts on this machine through the fan-out's real engine, and the real `rbd` program, here pointed at a cluster
that is not there: its refusal ends the step on both hosts before either host's directory is made. The success path
runs against the lab box's real Ceph (tests/integration/test_ceph_storage_side.py, tests/lab/test_storage_faults.py:
three simulated hosts)."""

from __future__ import annotations

import shutil

import pytest

from iolab.drive import runner, steps

pytestmark = pytest.mark.skipif(shutil.which("rbd") is None, reason="needs Ceph's rbd program (apt-get install ceph)")

HOSTS = ["here1", "here2"]


def test_the_image_hosts_refusal_ends_the_step_on_every_host_and_the_teardown_is_each_hosts_own(
    tmp_path, here_engine, here_extra
):
    extra, engine = here_extra, here_engine()
    work = tmp_path / "mnt" / "blk"
    conf = tmp_path / "ceph.conf"  # no cluster: rbd cannot even read its configuration
    variables = {"storage_role": "storage_rbd", "storage_rbd_state": "mounted", "storage_rbd_name": "blk"}
    variables |= {"storage_rbd_pool": "iolab", "storage_rbd_image": "iolab-blk", "storage_rbd_size": 64 << 20}
    variables |= {"storage_rbd_prefill": True, "storage_rbd_mountpoint": str(work), "storage_rbd_client": "admin"}
    variables |= {"storage_rbd_ceph_conf": str(conf), "storage_rbd_keyring": str(tmp_path / "keyring")}
    variables |= {"storage_target": str(work), "storage_mount_root": str(tmp_path / "mnt"), "storage_existing": False}
    mounted = runner.Phase("storage.yml", variables)
    argvs = steps.calls(mounted, HOSTS, set(HOSTS), extra, {})
    assert argvs is not None and all("--make" in argv for argv in argvs.values())
    outcomes = steps.play(engine, mounted, argvs, HOSTS, extra, {})
    assert outcomes is not None and [o.state for o in outcomes.values()] == ["failed", "failed"]
    said = f"the Ceph cluster of {conf} does not answer from here1 (rbd ls iolab: "
    assert all(said in o.message and "invoke lab.services-up" in o.message for o in outcomes.values()), outcomes
    assert {o.task for o in outcomes.values()} == {steps.TASKS["storage_rbd image"]}
    assert not work.exists()  # neither host's call was made

    (work / "iolab-here1").mkdir(parents=True)
    (work / "iolab-here2").mkdir()
    (work / "iolab-gpu09").mkdir()  # another host's, on storage they share
    unmounted = runner.Phase("storage.yml", {**variables, "storage_rbd_state": "unmounted"})
    argvs = steps.calls(unmounted, HOSTS, set(HOSTS), extra, {})
    outcomes = steps.play(engine, unmounted, argvs or {}, HOSTS, extra, {})  # no image call: each host's own
    assert outcomes is not None and [o.state for o in outcomes.values()] == ["ok", "ok"], outcomes
    assert sorted(p.name for p in work.iterdir()) == ["iolab-gpu09"]
