"""S3 through the lab's Ceph radosgw: a real radosgw, real boto3 requests, real campaigns on localhost.

The session's lab in a box (fixture `ceph_box`, tests/labbox.py) serves the bucket; this module's keys go under
its own prefixes (itest-objects, itest-loader) and its campaigns are `itest-s3-*`.
"""

from __future__ import annotations

import configparser
import json
import re
import stat
import threading
import time
from pathlib import Path

import pytest
import yaml

from labbox import BUCKET, assert_ok, run
from support import ROOT, cmdline

OUTPUTS: dict[str, str] = {}  # what the services and the campaign printed, for the keys test at the end


def s3_info(lab) -> dict:
    return lab.ceph_client()["s3"]


def keys(lab) -> list[str]:
    profile = configparser.ConfigParser()
    profile.read(s3_info(lab)["credentials"])
    return [profile["default"]["aws_access_key_id"], profile["default"]["aws_secret_access_key"]]


@pytest.fixture
def lab(ceph_box):
    return ceph_box


def bench_all(cli, path: Path, check: bool = True):
    """bench.all on localhost, waiting (up to 15 min) while another campaign of the suite holds its lease."""
    deadline = time.monotonic() + 900
    while True:
        done = cli("bench.all", "--campaign", str(path), check=False)
        if "localhost is held by" not in done.stderr or time.monotonic() > deadline:
            break
        time.sleep(10)
    if check and done.returncode != 0:
        raise AssertionError(f"bench.all exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def backend(lab, name: str, **extra) -> dict:
    return {"name": name, "type": "s3", **lab.s3_fields(), **extra}


def test_radosgw_serves_the_published_bucket_on_loopback_with_private_credentials(lab):
    import boto3

    s3 = s3_info(lab)
    assert s3 == {
        "endpoint": f"http://{lab.bind}:{lab.ports['rgw']}",
        "bucket": BUCKET,
        "region": "us-east-1",
        "credentials": str(lab.ceph_dir / "s3.credentials"),
    }
    assert stat.S_IMODE(Path(s3["credentials"]).stat().st_mode) == 0o600
    access, secret = keys(lab)
    client = boto3.client(
        "s3",
        endpoint_url=s3["endpoint"],
        region_name=s3["region"],
        aws_access_key_id=access,
        aws_secret_access_key=secret,
    )
    assert BUCKET in [b["Name"] for b in client.list_buckets()["Buckets"]]
    client.put_object(Bucket=BUCKET, Key="itest/hello", Body=b"hello")
    assert client.get_object(Bucket=BUCKET, Key="itest/hello")["Body"].read() == b"hello"
    client.delete_object(Bucket=BUCKET, Key="itest/hello")
    rgw_pid = int((lab.ceph_dir / "run" / "radosgw.iolab.pid").read_text())
    listening = [line for line in run(["ss", "-Hltnp"]).stdout.splitlines() if f"pid={rgw_pid}," in line]
    assert listening and all(line.split()[3] == f"{lab.bind}:{lab.ports['rgw']}" for line in listening), listening


def test_a_second_started_run_leaves_user_bucket_and_keys_alone(lab):
    before = keys(lab)
    done = lab.playbook("started", "-vv")
    assert assert_ok(done)["changed"] == 0, done.stdout[-6000:]
    assert keys(lab) == before
    OUTPUTS["second"] = done.stdout + done.stderr


def test_object_put_and_get_figures_by_size_and_threads(lab, cli, write_campaign):
    path = write_campaign(
        {
            "name": "itest-s3-objects",
            "repetitions": 1,
            "backends": [backend(lab, "itest-s3", prefix="itest-objects")],
            "workloads": [
                {
                    "name": "obj",
                    "type": "objects",
                    "size": ["64KiB", "1MiB"],
                    "threads": [1, 2],
                    "objects": 8,
                    "runtime": "2s",
                    "ramp": "1s",
                }
            ],
        }
    )
    dry = cli("bench.all", "--campaign", str(path), "--dry-run").stdout
    assert "S3 objects of 64 KiB: 8 keys per host written once" in dry
    done = bench_all(cli, path)
    samples = cli.samples("itest-s3-objects")
    points = {(s["params"]["object_size"], s["params"]["threads"]) for s in samples}
    assert points == {(65536, 1), (65536, 2), (1 << 20, 1), (1 << 20, 2)}
    by = {(s["params"]["object_size"], s["params"]["threads"], s["host"], s["metric"]): s for s in samples}
    for size, threads in points:
        for direction in ("read", "write"):
            bw = by[(size, threads, "*", f"{direction}_bw")]
            assert bw["unit"] == "B/s" and bw["value"] > 0
            iops = by[(size, threads, "localhost", f"{direction}_iops")]["value"]
            host_bw = by[(size, threads, "localhost", f"{direction}_bw")]["value"]
            assert abs(host_bw - iops * size) < 1e-6 * host_bw  # whole objects, counted in the window
            p50 = by[(size, threads, "localhost", f"{direction}_clat_p50")]
            p99 = by[(size, threads, "localhost", f"{direction}_clat_p99")]
            assert p50["unit"] == "ns" and 0 < p50["value"] <= p99["value"]
        meta = by[(size, threads, "localhost", "read_bw")]["metadata"]
        assert meta["object_client"].startswith("boto3 ") and meta["object_threads"] == threads
    table = cli("report", "--campaign", "itest-s3-objects").stdout
    assert "itest-s3" in table and "read_bw" in table and "write_bw" in table
    leftovers = run(["radosgw-admin", "--conf", lab.ceph_client()["conf"], "bucket", "list", "--bucket", BUCKET]).stdout
    assert "itest-objects/" not in leftovers  # every key deleted after its run
    OUTPUTS["objects"] = done.stdout + done.stderr
    OUTPUTS["objects_results"] = str(cli.results / "itest-s3-objects")


class CommandLines:
    """Every command line on this machine while it runs, read from /proc every 20 ms: the simulated hosts share its
    process table (network and mount namespaces only), so their sshd's children and the ssh clients are seen too."""

    def __init__(self, needle: str):
        self.needle, self.seen, self.stop = needle, set(), threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.stop.wait(0.02):
            for pid in [p.name for p in Path("/proc").iterdir() if p.name.isdigit()]:
                line = cmdline(int(pid))
                if self.needle in line:
                    self.seen.add(line)

    def __enter__(self) -> CommandLines:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def harness(name: str, raw: Path, host: str, wall: float) -> str:
    """What the command spent around its tools: its wall time, the tools' own (each run.json's ended_at -
    started_at), and the seconds from one run's tool ending to the next one's starting, in run order."""
    records = sorted((json.loads(p.read_text()) for p in raw.glob(f"*/{host}/run.json")), key=lambda r: r["started_at"])
    tools = sum(r["ended_at"] - r["started_at"] for r in records)
    gaps = [f"{b['started_at'] - a['ended_at']:.2f}" for a, b in zip(records, records[1:], strict=False)]
    return f"{name}: wall {wall:.1f} s, tools {tools:.1f} s, between runs {', '.join(gaps)} s"


def test_objects_runs_fan_out_here_and_on_a_simulated_host_and_no_command_line_holds_a_key(
    lab, sim_hosts, cli, write_campaign, tmp_path
):
    """The objects runs went through Ansible (no host call; refused for an environment of their own): they fan out
    now, here (a local worker) and on gpu01 (ClusterShell's ssh), and no process's argv (the ssh client's, sshd's
    children, hostrun, the tool) holds a key. An inventory with ansible_become keeps them on Ansible's route (the
    thinned role, the same argvs): they run there too, and what the two routes spend between runs is printed."""
    # Two thread counts: two runs a campaign, so that the time between runs is there to print (a third: ≈ 13 s more).
    workload = {"name": "obj", "type": "objects", "size": "64KiB", "threads": [1, 2], "objects": 4}
    workload |= {"runtime": "2s", "ramp": "1s"}
    become = tmp_path / "become.yml"
    local = yaml.safe_load((ROOT / "inventory" / "local.yml").read_text())
    local["all"]["children"]["gpu"]["hosts"]["localhost"]["ansible_become"] = False  # Ansible's to apply
    become.write_text(yaml.safe_dump(local))
    routes = {  # campaign → (host, bench.all's extra arguments, the launcher its runs must say)
        "itest-s3-fan": ("localhost", [], "clustershell"),
        "itest-s3-fan-sim": ("gpu01", ["--inventory", str(sim_hosts.inventory), "--hosts", "gpu01"], "clustershell"),
        "itest-s3-fan-ansible": ("localhost", ["--inventory", str(become)], "ansible"),
    }
    secrets = keys(lab)
    for name, (host, extra, launcher) in routes.items():
        backend_ = backend(lab, f"{name}-b", prefix=name)
        path = write_campaign({"name": name, "backends": [backend_], "workloads": [workload]}, f"{name}.yml")
        with CommandLines("iolab.kinds.objects.host") as lines:
            began = time.monotonic()
            done = cli("bench.all", "--campaign", str(path), *extra) if extra else bench_all(cli, path)
        raw = cli.results / name / "raw"
        print(harness(name, raw, host, time.monotonic() - began))  # before the checks: eb03f37's figures too
        assert {json.loads(p.read_text())["launcher"] for p in raw.glob(f"*/{host}/run.json")} == {launcher}
        assert {r["status"] for r in cli.runs(name)} == {"ok"} and len(cli.runs(name)) == 2
        reads = [s for s in cli.samples(name) if s["metric"] == "read_bw" and s["host"] == host]
        assert len(reads) == 2 and min(s["value"] for s in reads) > 0
        assert {s["metadata"]["cache_state"] for s in reads} == {"dropped"}  # the prepare's drop, recorded
        tools = [
            line for line in lines.seen if " -m iolab.kinds.objects.host " in line and f"iolab-{host}/objects" in line
        ]
        assert tools, lines.seen  # the watch saw the runs' commands
        if host == "gpu01":  # the command ClusterShell's ssh carried to the host
            assert any(line.startswith("ssh ") and " gpu01 " in line for line in lines.seen), lines.seen
        assert not [line for line in lines.seen for secret in secrets if secret in line]
        stored = [p for p in (cli.results / name).rglob("*") if p.is_file()]
        assert not [p for p in stored for secret in secrets if secret.encode() in p.read_bytes()]
        assert not [secret for secret in secrets if secret in done.stdout + done.stderr]


def test_an_objects_run_with_the_keys_in_the_controllers_environment_fans_out_without_them_on_any_command_line(
    lab, cli, write_campaign
):
    """credentials: env, on localhost: the tool reads AWS_* from the environment it inherits (as Ansible's local
    connection gave it), not from its argv or the fan-out's `env NAME=VALUE`."""
    access, secret = keys(lab)
    cli.env.update({"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret})
    workload = {"name": "obj", "type": "objects", "size": "64KiB", "threads": 1, "objects": 2}
    workload |= {"runtime": "1s", "ramp": "1s"}
    backend_ = backend(lab, "itest-s3-env-b", prefix="itest-s3-env", credentials="env")
    path = write_campaign({"name": "itest-s3-env", "backends": [backend_], "workloads": [workload]})
    with CommandLines("iolab.kinds.objects.host") as lines:
        done = bench_all(cli, path)
    (record,) = (cli.results / "itest-s3-env" / "raw").glob("*/localhost/run.json")
    assert json.loads(record.read_text())["launcher"] == "clustershell"
    rates = [s["value"] for s in cli.samples("itest-s3-env") if s["metric"] == "write_bw" and s["host"] == "localhost"]
    assert len(rates) == 1 and rates[0] > 0  # PUTs signed with the environment's keys
    assert [line for line in lines.seen if '"credentials": "env"' in line]  # the watch saw the tool's argv
    assert not [line for line in lines.seen if access in line or secret in line]
    stored = [p for p in (cli.results / "itest-s3-env").rglob("*") if p.is_file()]
    assert not [p for p in stored if access.encode() in p.read_bytes() or secret.encode() in p.read_bytes()]
    assert access not in done.stdout + done.stderr and secret not in done.stdout + done.stderr


def s3_client(lab):
    import boto3

    access, secret = keys(lab)
    return boto3.client(
        "s3",
        endpoint_url=s3_info(lab)["endpoint"],
        region_name="us-east-1",
        aws_access_key_id=access,
        aws_secret_access_key=secret,
    )


LOADER = {
    "name": "itest-s3-loader",
    "repetitions": 1,
    "dataset": {"files": 40, "seed": 5, "classes": 4},
    "workloads": [
        {
            "name": "objects",
            "type": "objects",
            "size": "256KiB",
            "threads": 2,
            "objects": 4,
            "runtime": "2s",
            "ramp": "1s",
        },
        {"name": "loader", "type": "pytorch", "reader": ["cv2-imdecode", "s3"], "workers": 1, "batch_size": 8},
    ],
}


def test_the_loader_reads_the_staged_data_set_from_the_bucket_beside_a_file_backend(lab, cli, write_campaign):
    path = write_campaign(
        {
            **LOADER,
            "backends": [
                {"name": "itest-s3-mem", "type": "tmpfs", "size": "64MiB"},
                backend(lab, "itest-s3-bucket", prefix="itest-loader"),
            ],
        }
    )
    bench_all(cli, path)
    samples = cli.samples("itest-s3-loader")
    points = {(s["backend"], s["workload"], s["params"].get("reader")) for s in samples}
    assert points == {
        ("itest-s3-mem", "loader", "cv2-imdecode"),
        ("itest-s3-bucket", "loader", "s3"),
        ("itest-s3-bucket", "objects", None),
    }
    rate = {s["backend"]: s for s in samples if s["metric"] == "samples_per_s" and s["host"] == "localhost"}
    assert rate["itest-s3-bucket"]["value"] > 0 and rate["itest-s3-mem"]["value"] > 0
    run_id = rate["itest-s3-bucket"]["run_id"]  # reader s3's run took the fan-out's one call, $IOLAB_S3 in its env
    raw = cli.results / "itest-s3-loader" / "raw" / run_id / "localhost"
    assert json.loads((raw / "run.json").read_text())["launcher"] == "clustershell"
    hashes = {b: s["metadata"]["dataset_manifest_hash"] for b, s in rate.items()}
    assert hashes["itest-s3-bucket"] == hashes["itest-s3-mem"]  # the same data set, from the bucket
    listing = s3_client(lab).list_objects_v2(Bucket=BUCKET, Prefix="itest-loader/dataset/")
    keys = [o["Key"] for o in listing["Contents"]]
    assert len(keys) == 40 + 1 and "itest-loader/dataset/manifest.jsonl" in keys  # one object per sample
    table = cli("report", "--campaign", "itest-s3-loader").stdout
    assert "itest-s3-bucket" in table and "itest-s3-mem" in table and "samples_per_s" in table


def test_the_data_set_is_uploaded_once_and_a_damaged_sample_fails_the_first_epoch(lab, cli, write_campaign):
    """Runs after the test above: the bucket holds its data set; a changed byte must be caught, not read."""
    client = s3_client(lab)
    manifest = "itest-loader/dataset/manifest.jsonl"
    uploaded = client.head_object(Bucket=BUCKET, Key=manifest)["LastModified"]
    listing = client.list_objects_v2(Bucket=BUCKET, Prefix="itest-loader/dataset/train/")
    sample = listing["Contents"][0]["Key"]
    data = bytearray(client.get_object(Bucket=BUCKET, Key=sample)["Body"].read())
    data[len(data) // 2] ^= 0xFF
    client.put_object(Bucket=BUCKET, Key=sample, Body=bytes(data))
    path = write_campaign(
        {
            **LOADER,
            "name": "itest-s3-damaged",
            "workloads": [{**LOADER["workloads"][1], "reader": "s3"}],
            "backends": [backend(lab, "itest-s3-bucket", prefix="itest-loader")],
        }
    )
    done = bench_all(cli, path, check=False)
    assert client.head_object(Bucket=BUCKET, Key=manifest)["LastModified"] == uploaded  # not uploaded again
    assert done.returncode != 0
    assert [r["status"] for r in cli.runs("itest-s3-damaged")] == ["failed"]
    stderr = " ".join(p.read_text() for p in (cli.results / "itest-s3-damaged").rglob("stderr.txt"))
    assert f"{sample}:" in stderr and "differ from the manifest's sample" in stderr, stderr[-3000:]


def test_a_file_workload_with_only_an_s3_backend_is_refused_before_anything_runs(lab, cli, write_campaign):
    path = write_campaign(
        {
            "name": "itest-s3-refused",
            "backends": [backend(lab, "itest-s3")],
            "workloads": [{"name": "seq", "type": "fio", "profile": "seq-read-1m"}],
        }
    )
    done = bench_all(cli, path, check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "workload seq runs on none of the backends: it needs a file system" in " ".join(done.stderr.split())


def test_the_keys_appear_in_no_result_raw_file_or_ansible_output(lab):
    """Runs after the campaign above (file order): its results directory and output, and the services' -vv output."""
    texts = [lab.started.stdout + lab.started.stderr, OUTPUTS["second"], OUTPUTS["objects"]]
    assert any("Write the S3 user's keys" in text for text in texts)  # the output is the real one
    stored = [p for p in Path(OUTPUTS["objects_results"]).rglob("*") if p.is_file()]
    assert any(p.name == "objects.json" for p in stored) and any(p.name == "samples.jsonl" for p in stored)
    for secret in keys(lab):
        assert re.fullmatch(r"[A-Za-z0-9/+=]{16,}", secret)
        assert not [i for i, text in enumerate(texts) if secret in text]
        assert not [p for p in stored if secret.encode() in p.read_bytes()]
