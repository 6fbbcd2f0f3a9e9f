"""Campaign input that iolab cannot honour, refused in one line while it is read (issue 23)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from iolab import yamlfile
from iolab.campaign import model as campaign
from iolab.errors import UserError
from iolab.kinds.dlio import workload as dlio
from iolab.report import compare
from iolab.workloads import mlperf

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("read", [campaign.load, dlio.load, compare.load_rules])
def test_yaml_nested_too_deep_is_refused_naming_the_file(tmp_path, read):
    """1,000 nested [ gave a RecursionError traceback from the composer, in every YAML file iolab reads."""
    path = tmp_path / "deep.yml"
    path.write_text("[" * 1000 + "]" * 1000)
    with pytest.raises(UserError, match=f"^{path}: nested more than {yamlfile.MAX_DEPTH} levels deep at line 1;"):
        read(path)


def test_yaml_nested_up_to_the_bound_is_read(tmp_path):
    path = tmp_path / "nested.yml"
    path.write_text("[" * yamlfile.MAX_DEPTH + "]" * yamlfile.MAX_DEPTH)
    value = yamlfile.load(path, "campaign file", "--campaign")
    for _ in range(yamlfile.MAX_DEPTH - 1):
        value = value[0]
    assert value == []


def test_yaml_nested_too_deep_is_one_line_on_the_command_line(tmp_path):
    path = tmp_path / "deep.yml"
    path.write_text("a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 1000)))
    done = subprocess.run(
        [sys.executable, "-m", "invoke", "bench.all", "--campaign", str(path), "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"iolab: {path}: nested more than {yamlfile.MAX_DEPTH} levels deep at line {yamlfile.MAX_DEPTH}; "
        "a campaign, rules or workload file nests a few levels"
    )


def _dry_run(tmp_path: Path, campaign_text: str) -> subprocess.CompletedProcess:
    """bench.all --dry-run over two hosts that no one answers for (loopback, port 1: a connection is refused)."""
    inventory = tmp_path / "hosts.yml"
    address = "{ansible_host: 127.0.0.1, ansible_port: 1, ansible_connection: ssh}"
    inventory.write_text(f"all:\n  hosts:\n    n1: {address}\n    n2: {address}\n")
    path = tmp_path / "c.yml"
    path.write_text(campaign_text)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "bench.all",
            "--inventory",
            str(inventory),
            "--campaign",
            str(path),
            "--dry-run",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_dry_run_of_files_auto_reads_no_host_and_says_the_size_comes_at_run_time(tmp_path):
    """--dry-run of `dataset: {files: auto}` connected to every host over SSH to read its RAM (and failed here)."""
    done = _dry_run(
        tmp_path,
        "name: dry-auto\n"
        "backends: [{name: mem, type: tmpfs, size: 1GiB}]\n"
        "workloads: [{name: u, type: mlperf, workload: unet3d, accelerators: 2}]\n"
        "dataset: {kind: unet3d, files: auto}\n",
    )
    assert done.returncode == 0, done.stderr
    floor = mlperf.required_samples("unet3d", 7, 2, [0, 0])
    assert f"data set: at least {floor} unet3d files" in done.stdout
    assert "files: auto: the number is decided at run time from the hosts' RAM, which a dry run does not read" in (
        done.stdout
    )


def test_a_dry_run_says_where_an_s3_backend_stages_the_data_set(tmp_path):
    """The dry run said <target>/iolab-<host>/dataset, an s3:// URL, for a copy that each host makes on its disk."""
    done = _dry_run(
        tmp_path,
        "name: dry-s3\n"
        "backends: [{name: obj, type: s3, bucket: lab-data, prefix: runs}]\n"
        "workloads: [{name: p, type: pytorch, reader: s3}]\n"
        "dataset: {files: 10}\n",
    )
    assert done.returncode == 0, done.stderr
    assert (
        "on obj: each host makes its copy in /opt/iolab/s3-staging/obj/iolab-<host>/dataset (refused first where "
        "that disk has no room for it), the first host uploads it to s3://lab-data/runs/dataset/"
    ) in done.stdout


FIO_ONLY = {"name": "w", "type": "fio", "profile": "seq-read-1m"}
UNET3D = {"name": "u", "type": "mlperf", "workload": "unet3d", "accelerator": "h100"}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            {"mlperf": "yes", "workloads": [FIO_ONLY]},
            "mlperf: expected true or false (MLPerf Storage's rules), got 'yes'",
        ),
        ({"mlperf": 1, "workloads": [FIO_ONLY]}, "mlperf: expected true or false (MLPerf Storage's rules), got 1"),
        ({"workloads": [{**UNET3D, "mlperf": 1}]}, "workloads[0].mlperf: expected true or false"),
        ({"workloads": [{**UNET3D, "mlperf": [True]}]}, "workloads[0].mlperf: expected true or false"),
        ({"workloads": [{**UNET3D, "workload": ["unet3d", "resnet50"]}]}, "workloads[0].workload: one MLPerf Storage"),
        ({"workloads": [{"name": "l", "type": "pytorch", "decode": "yes"}]}, "workloads[0].decode: expected true or"),
        ({"workloads": [FIO_ONLY], "warmup": 1}, "warmup: expected true or false, got 1"),
    ],
)
def test_a_campaigns_booleans_are_booleans(change, says):
    """Issue 37: `mlperf: "yes"` or `mlperf: 1` turned MLPerf's rules off without a word (pydantic read "yes" as
    true, the rules mode asked `is True`); `mlperf: 1` on a workload, `mlperf: [true]` and `workload: [a, b]`
    were tracebacks."""
    data = {
        "name": "b",
        "backends": [{"name": "t", "type": "tmpfs", "size": "64MiB"}],
        "dataset": {"kind": "unet3d", "files": 28, "seed": 1},
        **change,
    }
    with pytest.raises(UserError) as refused:
        campaign.parse(data, "c.yml", ROOT)
    assert str(refused.value).startswith("c.yml: ") and says in str(refused.value)
    assert "\n" not in str(refused.value)
