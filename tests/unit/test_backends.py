"""Storage backend models (campaign.py) and the roles' host-side helper (iolab.host.mounts), without a host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iolab.campaign import model as campaign
from iolab.drive import execute
from iolab.errors import UserError
from iolab.host import mounts
from iolab.host.dataset.manifest import Manifest

SEQ = {"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "2s"}
WRITE = {"name": "wr", "type": "fio", "profile": "seq-write-1m", "runtime": "2s"}
LOADER = {"name": "load", "type": "pytorch"}


def parse(backends, workloads=(SEQ,), **extra) -> campaign.Campaign:
    return campaign.parse(
        {"name": "t", "backends": list(backends), "workloads": list(workloads), **extra}, "t.yml", Path(".")
    )


def error(backends, workloads=(SEQ,), **extra) -> str:
    with pytest.raises(UserError) as caught:
        parse(backends, workloads, **extra)
    return str(caught.value)


SNAP = {"name": "ds", "type": "rbd_snapshot", "source": "/srv/imagenet", "fio_size": "64MiB"}


def test_every_backend_type_parses_with_its_defaults_and_target():
    spec = parse(
        [
            SNAP,
            {"name": "fs", "type": "cephfs", "readonly": True},
            {"name": "nas", "type": "nfs", "server": "nas01", "export": "/export/ds", "version": 3},
            {"name": "peer", "type": "sshfs", "host": "gpu01", "path": "/var/tmp/ds"},
            {
                "name": "lustre",
                "type": "mount",
                "source": "10.0.0.5@tcp:/lustre",
                "fstype": "lustre",
                "options": ["flock"],
                "mountpoint": "/lustre",
            },
            {"name": "blk", "type": "rbd", "size": "2GiB"},
        ],
        workloads=[{**SEQ, "size": "64MiB"}],
    )
    ds, fs, nas, peer, lustre, blk = spec.backends
    assert [b.role for b in spec.backends] == [
        "storage_rbd_snapshot",
        "storage_cephfs",
        "storage_nfs",
        "storage_sshfs",
        "storage_mount",
        "storage_rbd",
    ]
    assert ds.target == "/mnt/iolab/ds" and lustre.target == "/lustre"
    assert (ds.pool, ds.image_name, ds.snapshot, ds.client) == ("iolab", "iolab-ds", "dataset", "admin")
    assert ds.ceph_conf == "/var/lib/iolab/ceph/ceph.conf"  # the lab's, as lab.services-up publishes it
    assert nas.version == "3" and fs.fs_name == "iolab" and blk.size == 2 << 30
    # the client is chosen on the host (roles/storage_nfs: the kernel's where it has the nfs module, else FUSE)
    assert nas.method == "auto" and nas.role_vars("mounted")["storage_nfs_method"] == "auto"
    assert [b.writable for b in spec.backends] == [False, False, True, True, True, True]


def test_role_vars_name_the_role_and_carry_the_data_set_to_load():
    spec = parse(
        [{**SNAP, "source": None}, {"name": "m", "type": "tmpfs", "size": "64MiB"}],
        workloads=[SEQ, LOADER],
        dataset={"files": 100, "seed": 3},
    )
    snap = spec.backends[0].role_vars("kept", spec.dataset, spec.dataset_formats)
    assert snap["storage_rbd_snapshot_state"] == "kept"
    assert snap["storage_rbd_snapshot_image"] == "iolab-ds"
    assert snap["storage_rbd_snapshot_mountpoint"] == "/mnt/iolab/ds"
    assert snap["storage_rbd_snapshot_fio_size"] == 64 << 20
    assert snap["storage_rbd_snapshot_dataset"] == {
        "kind": "imagenet-like",
        "files": 100,
        "seed": 3,
        "classes": 100,
        "formats": ["packed"],
    }
    assert all(key.startswith("storage_rbd_snapshot_") for key in snap)
    phase = execute.storage_phase(spec, "m", "unmounted", stop_tools=True)
    assert phase.vars == {
        "storage_role": "storage_tmpfs",
        "storage_stop_tools": True,
        "storage_target": "/mnt/iolab/m",
        "storage_mount_root": "/mnt/iolab",
        "storage_existing": False,
        "storage_tmpfs_state": "unmounted",
        "storage_tmpfs_name": "m",
        "storage_tmpfs_size": 64 << 20,
        "storage_tmpfs_mountpoint": "/mnt/iolab/m",
    }


def test_a_source_wins_over_the_campaigns_data_set():
    spec = parse([SNAP], workloads=[SEQ, LOADER], dataset={"files": 100})
    assert spec.backends[0].role_vars("mounted", spec.dataset)["storage_rbd_snapshot_dataset"] == {}


@pytest.mark.parametrize(
    "backend",
    [
        SNAP,
        {"name": "fs", "type": "cephfs", "readonly": True},
        {"name": "peer", "type": "sshfs", "host": "gpu01", "path": "/x", "readonly": True},
    ],
)
def test_write_benchmarks_are_refused_on_read_only_backends(backend):
    message = error([backend], workloads=[WRITE])
    assert (
        f"workload wr writes (profile seq-write-1m, rw=write) but backend {backend['name']} is mounted "
        "read-only" in message
    )
    assert "scratch backend" in message


def test_write_benchmarks_run_on_writable_backends():
    spec = parse([{"name": "fs", "type": "cephfs"}, {"name": "blk", "type": "rbd"}], workloads=[WRITE])
    assert sorted((r.workload.name, r.backend.name) for r in campaign.expand(spec)) == [("wr", "blk"), ("wr", "fs")]


def test_an_rbd_backend_runs_the_fio_workloads_and_the_file_backends_the_rest():
    spec = parse(
        [{"name": "blk", "type": "rbd"}, {"name": "mem", "type": "tmpfs", "size": "1GiB"}],
        workloads=[SEQ, LOADER],
        dataset={"files": 10},
    )
    assert sorted((r.workload.name, r.backend.name) for r in campaign.expand(spec)) == [
        ("load", "mem"),
        ("seq", "blk"),
        ("seq", "mem"),
    ]


def test_fio_on_a_snapshot_reads_the_file_laid_out_in_it():
    assert "holds none: give the backend fio_size" in error([{**SNAP, "fio_size": None}])
    assert "differs from the fio file of backend ds" in error([SNAP], workloads=[{**SEQ, "size": "1GiB"}])
    assert "a job file cannot run on backend ds" in error(
        [SNAP], workloads=[{"name": "j", "type": "fio", "jobfile": "x.fio"}]
    )
    spec = parse([SNAP])
    run = campaign.expand(spec)[0]
    assert execute.workload_vars(run)["bench_fio_size"] == 64 << 20  # no layout on the snapshot


def test_the_rbd_backend_runs_fio_through_librbd():
    spec = parse(
        [
            {
                "name": "blk",
                "type": "rbd",
                "size": "256MiB",
                "ceph_conf": "/etc/lab/ceph.conf",
                "keyring": "/etc/lab/admin.keyring",
                "client": "bench",
            }
        ]
    )
    variables = execute.workload_vars(campaign.expand(spec)[0])
    options = variables["bench_fio_options"]
    assert (options["ioengine"], options["pool"], options["rbdname"], options["clientname"]) == (
        "rbd",
        "iolab",
        "iolab-blk",
        "bench",
    )
    assert variables["bench_fio_size"] == 256 << 20
    assert variables["run_environment"] == {
        "CEPH_CONF": "/etc/lab/ceph.conf",
        "CEPH_ARGS": "--keyring /etc/lab/admin.keyring",
    }
    assert "an rbd backend a raw image that only fio reads" in error(
        [{"name": "blk", "type": "rbd"}], workloads=[LOADER], dataset={"files": 10}
    )


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("options", ["rw,noatime"], "one option per list item"),
        ("ceph_conf", "/etc/my ceph.conf", "may not contain blanks"),
        ("pool", "a/b", "is not a valid name"),
        ("method", "iscsi", "Input should be 'auto', 'krbd', 'nbd' or 'qemu-fuse'"),
        ("colour", "red", "unknown key (expected one of: name, type, pool, image, snapshot"),
    ],
)
def test_bad_backend_fields_name_the_key(field, value, expected):
    message = error([{**SNAP, field: value}])
    assert message.startswith(f"t.yml: backends[0].{field}")
    assert expected in message


def test_mount_sources_and_nfs_versions_are_checked():
    assert "is not a mount source" in error([{"name": "m", "type": "mount", "source": "-oexec", "fstype": "ext4"}])
    assert "is not a file system type" in error(
        [{"name": "m", "type": "mount", "source": "/dev/sdb", "fstype": "ext4 -o"}]
    )
    assert "backends[0].version" in error([{"name": "n", "type": "nfs", "server": "nas", "export": "/x", "version": 5}])


def test_a_write_to_a_writable_directory_is_reported_and_undone(tmp_path):
    ok, message = mounts.check_readonly(str(tmp_path))
    assert not ok and "accepted a write" in message
    assert list(tmp_path.iterdir()) == []


def test_mountinfo_finds_the_root_and_nothing_below_an_empty_state_directory(tmp_path):
    assert mounts.mounted_at("/")["target"] == "/"
    assert mounts.mounted_at(str(tmp_path)) is None
    assert mounts.mounts_below(str(tmp_path)) == [] and mounts.loops(str(tmp_path)) == []
    assert mounts.processes(str(tmp_path)) == []


def test_the_manifest_of_a_plain_source_is_iolabs_and_its_hash_keys_the_content(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"x" * 1000)
    (tmp_path / "y.txt").write_text("y")
    key = mounts.content_key(str(tmp_path), {"fio_size": 0})
    (tmp_path / mounts.MANIFEST_NAME).write_bytes(mounts.build_manifest(tmp_path))
    manifest = Manifest.load(tmp_path)
    assert sorted((e.path, e.size) for e in manifest.entries) == [("a/x.bin", 1000), ("y.txt", 1)]
    assert manifest.check_contents(tmp_path) == []
    assert mounts.content_key(str(tmp_path), {"fio_size": 0}) == key  # same files, same key
    (tmp_path / "y.txt").write_text("z")
    (tmp_path / mounts.MANIFEST_NAME).unlink()
    assert mounts.content_key(str(tmp_path), {"fio_size": 0})["key"] != key["key"]
    assert mounts.content_key(None, {"fio_size": 1})["key"] != mounts.content_key(None, {"fio_size": 2})["key"]


def test_a_record_is_only_believed_for_the_mount_it_was_written_for(tmp_path, monkeypatch):
    monkeypatch.setattr(mounts, "RECORDS", tmp_path)
    mount = {"id": 7, "target": "/mnt/iolab/x", "source": "/dev/loop3", "fstype": "ext4"}
    (tmp_path / "7.json").write_text(json.dumps({**mount, "backend": "x", "mount_id": 7}))
    assert mounts.record_for(mount)["backend"] == "x"
    assert mounts.record_for({**mount, "source": "/dev/loop4"}) is None  # an earlier mount's id, reused
