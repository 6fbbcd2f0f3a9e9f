"""A Ceph backend naming a pool the cluster does not have: the run says the pool is missing and which pools
exist (rbd ls answered ENOENT), not that the cluster does not answer (issue 23). A real single-node cluster
(the lab fixture of test_services.py, its own directories and ports), real bench.all on localhost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from integration.test_ceph_storage_side import FIO, bench, ceph_fields
from integration.test_services import Lab, _teardown, free_ports

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    """The Ceph cluster alone, in its own directories and on free ports; deleted at the end."""
    root = tmp_path_factory.mktemp("ceph-pool")
    lab = Lab(root=root, ports=dict(zip(("mon", "mon_v1", "nfs", "mount", "rgw"), free_ports(5), strict=True)))
    lab.inventory.write_text("localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n")
    try:
        done = lab.playbook("started", "-e", json.dumps({"services_enabled": ["ceph"]}))
        assert done.returncode == 0, done.stdout[-6000:]
        yield lab
    finally:
        _teardown(lab)


def test_a_pool_that_does_not_exist_is_named_with_the_pools_that_do(lab, cli, write_campaign):
    ceph = {**ceph_fields(lab), "pool": "itest-no-pool"}
    campaign = write_campaign(
        {
            "name": "itest-no-pool",
            "backends": [
                {"name": "itest-nopool-blk", "type": "rbd", "size": "64MiB", **ceph},
                {"name": "itest-nopool-snap", "type": "rbd_snapshot", "fio_size": "64MiB", "size": "128MiB", **ceph},
            ],
            "workloads": [FIO],
        }
    )
    done = bench(cli, campaign, check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    pools = lab.ceph("osd", "pool", "ls")
    errors = [r["error"] for r in cli.runs("itest-no-pool")]
    assert len(errors) == 2, done.stdout[-3000:] + done.stderr
    for error in errors:
        assert f"pool itest-no-pool does not exist in the Ceph cluster of {ceph['ceph_conf']}" in error, error
        assert f"its pools: {', '.join(pools)}" in error and "does not answer" not in error, error
        assert "ceph osd pool create itest-no-pool" in error
