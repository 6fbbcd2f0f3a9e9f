"""The s3 backend and the objects workload: fields and refusals, role variables without keys, the parser's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from iolab.campaign import model as campaign
from iolab.drive import datasets, execute
from iolab.errors import UserError
from iolab.host import s3client
from iolab.kinds.objects import host as host_objects
from iolab.kinds.objects import parser as parser
from iolab.measures import validity


def load(tmp_path: Path, backends: list[dict], workloads: list[dict], **extra) -> campaign.Campaign:
    path = tmp_path / "c.yml"
    path.write_text(yaml.safe_dump({"name": "s3", "backends": backends, "workloads": workloads, **extra}))
    return campaign.load(path)


S3 = {"name": "obj", "type": "s3", "endpoint": "http://10.77.0.1:7480", "bucket": "lab-data", "prefix": "runs/a"}
OBJECTS = {"name": "o", "type": "objects", "size": ["4KiB", "1MiB"], "threads": [1, 8], "runtime": "5s", "ramp": "1s"}


def test_object_sizes_and_threads_sweep_and_reach_the_role_with_the_connection_but_no_keys(tmp_path):
    spec = load(tmp_path, [S3], [OBJECTS])
    runs = campaign.expand(spec)
    assert {(r.workload.size, r.workload.threads) for r in runs} == {(4096, 1), (4096, 8), (1 << 20, 1), (1 << 20, 8)}
    # Each object size is a setting of its own (a report row each), not a run's size like fio's file.
    settings = {validity.setting_of(r.params) for r in runs}
    assert len(settings) == 4 and all('"object_size"' in s for s in settings)
    variables = execute.workload_vars(runs[0])
    connection = {
        "endpoint": "http://10.77.0.1:7480",
        "bucket": "lab-data",
        "prefix": "runs/a",
        "region": "us-east-1",
        "credentials": "/var/lib/iolab/ceph/s3.credentials",
    }
    assert variables["run_role"] == "bench_objects" and variables["bench_objects_s3"] == connection
    assert "run_environment" not in variables  # nothing the fan-out would refuse (drive.fanout.refusal)
    assert variables["bench_objects_timeout"] == 2 * (5 + 1) + 120
    storage = execute.storage_phase(spec, "obj", "mounted").vars
    assert storage["storage_role"] == "storage_s3" and storage["storage_s3_credentials"] == connection["credentials"]
    assert not any("secret" in key or "access_key" in key for key in {**storage, **variables})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("endpoint", "10.0.0.1:7480", "is not an S3 endpoint"),
        ("endpoint", "http://10.0.0.1:99999", "port 99999 is not a TCP port"),
        ("endpoint", "http://10.0.0.1:0/", "port 0 is not a TCP port"),
        ("bucket", "Lab_Data", "is not a bucket name"),
        ("prefix", "a/../b", "is not a key prefix"),
        ("credentials", "keys.ini", "must be an absolute path"),
    ],
)
def test_bad_backend_fields_are_refused_in_one_line(tmp_path, field, value, message):
    with pytest.raises(UserError, match=message):
        load(tmp_path, [{**S3, field: value}], [OBJECTS])


def test_credentials_from_the_environment_are_allowed(tmp_path):
    spec = load(tmp_path, [{**S3, "credentials": "env"}], [OBJECTS])
    assert spec.backends[0].client()["credentials"] == "env"
    assert s3client.keys("env") == {}


TMPFS = {"name": "t", "type": "tmpfs", "size": "64MiB"}
FIO = {"name": "f", "type": "fio", "profile": "seq-read-1m"}


def test_each_workload_runs_on_the_backends_of_its_kind(tmp_path):
    spec = load(
        tmp_path,
        [TMPFS, S3],
        [
            FIO,
            {**OBJECTS, "size": "1MiB", "threads": 1},
            {"name": "l", "type": "pytorch", "reader": ["cv2-imdecode", "s3"]},
        ],
        dataset={"files": 10},
    )
    pairs = {(r.backend.name, r.workload.name, getattr(r.workload, "reader", None)) for r in campaign.expand(spec)}
    assert pairs == {("t", "f", None), ("t", "l", "cv2-imdecode"), ("obj", "o", None), ("obj", "l", "s3")}


@pytest.mark.parametrize(
    ("backends", "workload", "message"),
    [
        (
            [S3],
            FIO,
            "workload f runs on none of the backends: it needs a file system, and no backend is one",
        ),
        ([TMPFS], OBJECTS, "workload o runs on none of the backends: it speaks S3; add a backend of type s3"),
        ([{**S3, "readonly": True}], OBJECTS, "workload o writes (PUT objects) but backend obj"),
        (
            [TMPFS],
            {"name": "l", "type": "pytorch", "reader": "s3"},
            "workload l runs on none of the backends: it speaks S3",
        ),
    ],
)
def test_a_workload_no_backend_can_run_is_refused(tmp_path, backends, workload, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load(tmp_path, backends, [workload], dataset={"files": 10})


def test_the_loader_on_s3_reads_the_staged_data_set_and_no_dataset_phase_runs(tmp_path):
    spec = load(tmp_path, [S3], [{"name": "l", "type": "pytorch", "reader": "s3"}], dataset={"files": 10, "seed": 3})
    run = campaign.expand(spec)[0]
    assert not datasets.needed(spec, [run])
    variables = execute.workload_vars(run)
    # Each host its own copy (simulated hosts share a disk): the loader's role finds it under its target
    # as on a writable backend, where role storage_s3 made it.
    assert variables["bench_pytorch_dataset"] == ""
    assert variables["bench_pytorch_target"] == "/opt/iolab/s3-staging/obj"
    storage = execute.storage_phase(spec, "obj", "mounted").vars
    assert storage["storage_s3_dataset"] == {"kind": "imagenet-like", "files": 10, "seed": 3, "classes": 100}
    assert storage["storage_s3_staging"] == variables["bench_pytorch_target"]


def test_the_staging_probe_counts_another_data_set_it_replaces_as_free_space(tmp_path, monkeypatch):
    """Role storage_s3 stages through role dataset_gen's checks with --replace: the staging directory is
    iolab's own, another data set there is removed first, so its bytes count as free and all of this one is needed."""
    from iolab.host.dataset.gen import gen
    from iolab.host.loader import dataset_state

    root = tmp_path / "dataset"
    gen(root, files=6, seed=2, classes=3, workers=1)
    monkeypatch.setattr(dataset_state, "_free", lambda path: 1 << 30)  # the disk's own varies with other tests
    other = dataset_state.state(root, 6, 1, 3, [])
    assert other["state"] == "other" and other["needed_bytes"] == 0
    replaced = dataset_state.state(root, 6, 1, 3, [], replace=True)
    assert replaced["state"] == "missing" and replaced["reason"].endswith("(replaced)")
    assert replaced["needed_bytes"] == dataset_state.state(tmp_path / "new", 6, 1, 3, [])["needed_bytes"]
    on_disk = sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())
    assert replaced["free_bytes"] == (1 << 30) + on_disk


def test_credentials_file_must_hold_both_keys(tmp_path):
    path = tmp_path / "creds"
    path.write_text("[default]\naws_access_key_id = AK\n")
    with pytest.raises(ValueError, match="not readable as an AWS credentials file"):
        s3client.keys(str(path))
    path.write_text("[default]\naws_access_key_id = AK\naws_secret_access_key = SK\n")
    assert s3client.keys(str(path)) == {"aws_access_key_id": "AK", "aws_secret_access_key": "SK"}


def test_the_parser_derives_rates_from_the_window_and_keeps_latency_percentiles(tmp_path):
    """A record as iolab.kinds.objects.host writes it (its Phase makes it from requests that ended in the window)."""
    phases = {}
    for name, size in (("put", 4096), ("get", 4096)):
        phase = host_objects.Phase(name, ramp=0.0, runtime=2.0)
        phase.opens, phase.closes = 100.0, 102.0
        phase.done = [(100.5, 3_000, size), (100.7, 1_000, size), (101.2, 2_000, size)]
        phases[name] = phase.record()
    (tmp_path / "objects.json").write_text(
        json.dumps(
            {
                "client": "boto3",
                "boto3": "1.44.5",
                "endpoint": "http://e",
                "bucket": "b",
                "size": 4096,
                "threads": 2,
                "objects": 8,
                "phases": phases,
            }
        )
    )
    parsed = parser.parse(tmp_path)
    figures = {m.metric: (m.value, m.unit) for m in parsed.measurements}
    assert figures["read_bw"] == (3 * 4096 / 2.0, "B/s") and figures["write_iops"] == (3 / 2.0, "IOPS")
    assert figures["read_clat_p50"] == (2_000.0, "ns") and figures["read_clat_p99"] == (3_000.0, "ns")
    assert parsed.series["read_bw"] == [(101.0, 2 * 4096.0), (102.0, 4096.0)]
    assert parsed.metadata["object_client"] == "boto3 1.44.5"


def test_a_missing_result_names_the_file(tmp_path):
    (tmp_path / "stderr.txt").write_text("objects on http://e/b: EndpointConnectionError\n")
    with pytest.raises(parser.ParseError, match="objects.json: missing.*EndpointConnectionError"):
        parser.parse(tmp_path)


def test_services_up_says_where_the_bucket_and_the_credentials_file_are_not_the_keys(tmp_path):
    from types import SimpleNamespace

    from iolab.drive import services

    credentials = tmp_path / "s3.credentials"
    credentials.write_text("[default]\naws_access_key_id = AKEXAMPLE\naws_secret_access_key = SECRETEXAMPLE\n")
    s3 = {
        "endpoint": "http://127.0.0.1:7480",
        "bucket": "iolab",
        "region": "us-east-1",
        "credentials": str(credentials),
    }
    client = {
        "mon_host": "[v2:127.0.0.1:3300]",
        "conf": "c",
        "keyring": "k",
        "client_id": "admin",
        "rbd_pool": "iolab",
        "fs_name": "iolab",
        "s3": s3,
    }
    (tmp_path / "client.json").write_text(json.dumps(client))
    lab = SimpleNamespace(hosts=["localhost"], inventory=SimpleNamespace(hostvars={}))
    lines = services.published(lab, "ceph", {"service_ceph_dir": str(tmp_path)})
    assert lines[1] == services.s3_line(s3)
    assert "http://127.0.0.1:7480" in lines[1] and "bucket iolab" in lines[1] and str(credentials) in lines[1]
    assert not any("EXAMPLE" in line for line in lines)
