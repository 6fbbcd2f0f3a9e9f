"""iolab.drive.fanout's parts that need no host: what fans out, the ssh_config, the start margin, a reply's record."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import socket
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest
import yaml

from iolab.campaign.hosts import load_inventory
from iolab.drive import fanout, fanout_run, reach, runner
from iolab.errors import UserError
from iolab.kinds import hostcall
from iolab.shared.protocol import ARCHIVE_LINE, READY_LINE
from iolab.workloads import base
from iolab.workloads.base import INLINE_TEXT, Play

FIO = {
    "run_role": "bench_fio",
    **{f"bench_fio_{name}": value for name, value in [("options", {}), ("jobtext", ""), ("allow_devices", [])]},
    **{f"bench_fio_{name}": value for name, value in [("size", 0), ("target", "/mnt/t"), ("timeout", 60.0)]},
    **{f"bench_fio_{name}": value for name, value in [("bssplit_from", ""), ("telemetry_after", 0.0)]},
}


ENV = ["env", "PYTHONPATH=/opt/iolab/releases/r"]  # run_calls's: the release's
TORCH = {"run_role": "bench_pytorch", "bench_pytorch_target": "/mnt/t", "bench_pytorch_options": {"reader": "dali"}}
TORCH |= {"bench_pytorch_timeout": 60.0, "bench_pytorch_packs": ["packed"], "bench_pytorch_distributed": True}

DLIO = {"run_role": "bench_dlio", "bench_dlio_target": "/mnt/t", "bench_dlio_workload": {"model": {"name": "x"}}}
DLIO |= {"bench_dlio_ranks": 2, "bench_dlio_timeout": 60.0, "bench_dlio_trace": False}


def inventory(tmp_path: Path, **host: object):
    hosts = {
        "gpu01": {"ansible_host": "10.0.0.11", "ansible_user": "root", "ansible_ssh_private_key_file": "/k/id", **host},
        "gpu02": {"ansible_host": "10.0.0.12", "ansible_port": 2222},
    }
    data = {
        "all": {"children": {"gpu": {"hosts": hosts, "vars": {"ansible_ssh_common_args": "-o ControlPath=/cp/%C"}}}}
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(data))
    return load_inventory(tmp_path / "inventory.yml")


def test_an_ssh_fio_run_fans_out_and_what_ansible_must_do_stays_ansibles(tmp_path):
    plain = inventory(tmp_path)
    assert fanout.refusal(plain, ["gpu01", "gpu02"], FIO) is None
    assert "bench_nothing runs through Ansible" in str(fanout.refusal(plain, ["gpu01"], {"run_role": "bench_nothing"}))
    assert fanout.refusal(plain, ["gpu01", "gpu02"], DLIO) is None  # an MPI job's too
    keyed = inventory(tmp_path, bench_dlio_ssh_key="/k")  # the run role's own variable, set in the inventory
    assert "gpu01's bench_dlio_ssh_key is Ansible's to apply" in str(fanout.refusal(keyed, ["gpu01"], DLIO))
    assert fanout.refusal(plain, ["gpu01", "gpu02"], TORCH) is None  # a loader's run fans out too
    assert fanout.refusal(plain, ["gpu01"], {**TORCH, "bench_pytorch_s3": {}}) is None  # reader s3's too
    assert fanout.refusal(plain, ["gpu01"], {**FIO, "bench_fio_jobtext": "[job]\n"}) is None  # in the prepare's argv
    long = "[job]\n" + ";\n" * (INLINE_TEXT // 2)  # too long for it: the bench role copies it
    assert "over 64 KiB is copied by Ansible" in str(
        fanout.refusal(plain, ["gpu01"], {**FIO, "bench_fio_jobtext": long})
    )
    # A Ceph backend's runs fan out: its environment (rbd's), the storage side's drop (drive.fanout_run.storage_side)
    assert fanout.refusal(plain, ["gpu01"], {**FIO, "run_environment": {"CEPH_CONF": "/c"}}) is None
    assert fanout.refusal(plain, ["gpu01"], {**FIO, "run_ceph": {"conf": "/c"}}) is None
    assert "bench_fio_s3" in str(fanout.refusal(plain, ["gpu01"], {**FIO, "bench_fio_s3": {}}))
    assert "ansible_become" in str(fanout.refusal(inventory(tmp_path, ansible_become=True), ["gpu01"], FIO))
    local = inventory(tmp_path, ansible_connection="local")  # this machine: the same route, without ssh
    assert fanout.refusal(local, ["gpu01", "gpu02"], FIO) is None
    assert "ansible_connection: docker" in str(
        fanout.refusal(inventory(tmp_path, ansible_connection="docker"), ["gpu01"], FIO)
    )
    become = inventory(tmp_path, ansible_connection="local", ansible_become=True)
    assert "gpu01's ansible_become is Ansible's to apply" in str(fanout.refusal(become, ["gpu01"], FIO))


def test_the_storage_sides_hosts_are_reached_as_the_runs_hosts_are_or_the_run_is_ansibles(tmp_path):
    """The hosts of group ceph_osd get their page cache dropped before the start, by this route's sessions: a
    variable that changes how Ansible reaches one of them keeps the run on Ansible's route."""
    data = {"all": {"children": {"gpu": {"hosts": {"gpu01": {"ansible_host": "10.0.0.11"}}}}}}
    data["all"]["children"]["ceph_osd"] = {"hosts": {"osd1": {"ansible_host": "10.0.0.21", "ansible_become": True}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(data))
    said = fanout.refusal(load_inventory(tmp_path / "inventory.yml"), ["gpu01"], FIO)
    assert said == "osd1's ansible_become is Ansible's to apply"
    del data["all"]["children"]["ceph_osd"]["hosts"]["osd1"]["ansible_become"]
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(data))
    assert fanout.refusal(load_inventory(tmp_path / "inventory.yml"), ["gpu01"], FIO) is None


def test_a_ceph_runs_calls_get_its_environment_and_its_drop_runs_once_before_the_start(tmp_path):
    """What playbooks/run.yml gives a run on a Ceph backend, on the fan-out's route: every tool the backend's
    environment, the first host IOLAB_CEPH (its OSDs sampled while the tool runs), and the drop once every host is
    ready — the ceph_osd group's page cache, the cluster's OSDs from the first host — recorded as the role does."""
    data = {"all": {"children": {"gpu": {"hosts": {"gpu01": {}, "gpu02": {}}}, "ceph_osd": {"hosts": {"osd1": {}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(data))
    lab = load_inventory(tmp_path / "inventory.yml")
    fio = {k.removeprefix("bench_fio_"): v for k, v in FIO.items() if k != "run_role"}
    calls = {
        h: hostcall.host_call("bench_fio", "/py", h, f"/runs/{h}", Play(["gpu01", "gpu02"]), True, fio)
        for h in ("gpu01", "gpu02")
    }
    ceph = {"conf": "/etc/ceph/c.conf", "keyring": "/etc/ceph/k", "client": "admin", "mds": False}
    variables = {**FIO, "run_ceph": ceph, "run_environment": {"CEPH_CONF": "/etc/ceph/c.conf"}}
    fanned, drop = fanout_run.storage_side(lab, variables, True, ENV, calls)
    assert fanned["gpu01"].env == {"CEPH_CONF": "/etc/ceph/c.conf", "IOLAB_CEPH": json.dumps(ceph)}
    assert fanned["gpu02"].env == {"CEPH_CONF": "/etc/ceph/c.conf"}
    assert drop is not None
    assert drop.commands == [
        ("osd1", fanout_run.PAGE_CACHE_DROP),
        ("gpu01", [*ENV, "/py", "-m", "iolab.host.ceph_osds", "drop", "--cluster", json.dumps(ceph)]),
    ]
    started, went = [], []
    drop(lambda host, argv, handler, timeout: started.append((host, handler)), lambda: went.append(True))
    assert [h for h, _ in started] == ["osd1", "gpu01"] and not went
    started[0][1].ev_hup(None, "osd1", 1)
    started[0][1].ev_close(None, False)
    assert not went  # the start waits for the last of them
    started[1][1].ev_read(None, "gpu01", "stdout", json.dumps({"dropped": True, "mds": False}).encode())
    started[1][1].ev_hup(None, "gpu01", 0)
    started[1][1].ev_close(None, False)
    assert went == [True]
    assert drop.record() == {
        "dropped_on": [],
        "failed_on": ["osd1"],
        "method": "sync; echo 3 > /proc/sys/vm/drop_caches",
        "group": "ceph_osd",
        "ceph": {"dropped": True, "mds": False},
    }
    # kept caches, a calibration (no storage), no storage side: no drop; a drop that said nothing is recorded so
    assert fanout_run.storage_side(lab, variables, False, ENV, calls)[1] is None
    (tmp_path / "bare.yml").write_text(yaml.safe_dump({"all": {"hosts": {"gpu01": {}}}}))
    bare = load_inventory(tmp_path / "bare.yml")
    assert fanout_run.storage_side(bare, FIO, True, ENV, {"gpu01": calls["gpu01"]})[1] is None
    calibrate = hostcall.host_call(
        "bench_calibrate", "/py", "gpu01", "/r", Play(["gpu01"]), True, {"argv": [], "timeout": 9.0}
    )
    assert fanout_run.storage_side(lab, variables, True, ENV, {"gpu01": calibrate})[1] is None
    silent = fanout_run.StorageDrop([], ("gpu01", ["/py"]))
    silent.replies[0].err.append("Traceback: boom")
    assert silent.record() == {
        "ceph": {"dropped": False, "error": "iolab.host.ceph_osds drop gave no record: Traceback: boom"}
    }


def test_the_ssh_config_reaches_each_host_as_the_inventory_says(tmp_path):
    text = reach.ssh_config(inventory(tmp_path), ["gpu01", "gpu02"])
    blocks = text.split("Host ")[1:]
    assert blocks[0].splitlines()[0] == "gpu01" and '  HostName "10.0.0.11"' in blocks[0]
    assert '  IdentityFile "/k/id"' in blocks[0] and '  User "root"' in blocks[0]
    assert '  Port "2222"' in blocks[1] and '  ConnectTimeout "20"' in blocks[1]  # ansible.cfg's timeout


def test_the_start_margin_grows_with_the_host_count():
    assert fanout.margin(1) == fanout.START_LEAD + fanout.START_PER_HOST
    assert fanout.margin(1000) > fanout.margin(16) > fanout.margin(1)


def test_the_commands_are_argv_lists_with_values_as_they_are():
    fio = {k.removeprefix("bench_fio_"): v for k, v in FIO.items() if k != "run_role"}
    call = hostcall.host_call("bench_fio", "/py", "gpu01", "/runs/r1", Play(["gpu01"]), True, fio)
    assert call.prepare[:4] == ["/py", "-m", "iolab.kinds.fio.host", "prepare"]
    assert "--workdir" in call.prepare and "/mnt/t/iolab-gpu01" in call.prepare
    assert call.prepare[-1] == "--drop-caches"
    assert call.tool[-1] == "/runs/r1/job.fio"
    job = hostcall.host_call(
        "bench_fio", "/py", "gpu01", "/runs/r1", Play(["gpu01"]), True, {**fio, "jobtext": "[j]\n"}
    )
    assert job.prepare[job.prepare.index("--jobtext") + 1] == "[j]\n" and "--jobfile" not in job.prepare
    long = {**fio, "jobtext": "[j]\n" + " " * INLINE_TEXT}
    job = hostcall.host_call("bench_fio", "/py", "gpu01", "/runs/r1", Play(["gpu01"]), True, long)
    assert job.prepare[job.prepare.index("--jobfile") + 1] == "/runs/r1/user.fio" and "--jobtext" not in job.prepare
    walk = {"target": "/mnt/t", "threads": 2, "limit": 0, "drop_caches": False, "timeout": 60.0}
    call = hostcall.host_call("bench_metadata", "/py", "gpu01", "/runs/r1", Play(["gpu01"]), True, walk)
    assert call.prepare[-1] == "--drop-caches" and call.tool[-1] == "--no-drop-caches"  # the run's drop, not each op's


def test_a_replay_fans_out_with_its_trace_in_the_argv_and_one_too_long_for_it_stays_ansibles(tmp_path):
    """The prepare stages beside the run directory from the trace's text (iolab.host.trace stage), the tool replays
    the same file and tree; a trace over INLINE_TEXT has no text in the variables (ReplayWorkload.role_vars): the
    bench role copies it, so the run is Ansible's."""
    replay = {"target": "/mnt/t", "trace": "/c/t.trace", "text": "T", "hash": "ab12", "timing": "fast"}
    replay |= {"processes": 2, "own_files": True, "copies": 2, "timeout": 60.0}
    call = hostcall.host_call("bench_replay", "/py", "gpu01", "/runs/r1", Play(["gpu01"]), True, replay)
    where = ["--trace", "/runs/r1.trace", "--root", "/mnt/t/iolab-gpu01/trace-ab12"]
    assert call.prepare == ["/py", "-m", "iolab.host.trace", "stage", *where, "--copies", "2", "--text", "T"] + [
        "--dir",
        "/runs/r1",
        "--drop-caches",
    ]
    assert call.tool == ["/py", "-m", "iolab.host.trace", "replay", *where, "--out", "/runs/r1"] + [
        "--timing",
        "fast",
        "--processes",
        "2",
        "--own-files",
    ]
    copied = hostcall.host_call(
        "bench_replay", "/py", "gpu01", "/runs/r1", Play(["gpu01"]), False, {**replay, "text": ""}
    )
    assert "--text" not in copied.prepare and "--drop-caches" not in copied.prepare
    variables = {"run_role": "bench_replay", **{f"bench_replay_{k}": v for k, v in replay.items()}}
    assert fanout.refusal(inventory(tmp_path), ["gpu01", "gpu02"], variables) is None
    long = {**variables, "bench_replay_text": ""}
    assert "a trace over 64 KiB is copied by Ansible" in str(fanout.refusal(inventory(tmp_path), ["gpu01"], long))


def test_a_kvcache_call_runs_the_argvs_its_role_built_and_its_prepare_does_the_roles_check_pause_and_drop():
    """roles/bench_kvcache (cd105f8) ran `hostrun step --timeout T -- python -m iolab.kinds.kvcache.host check ARGS`,
    paused, dropped the caches, then `hostrun run --dir RUN --start-at S --target T --timeout T --telemetry-after 0 --
    python -m iolab.kinds.kvcache.host run --out RUN --option K ARGS`, ARGS: --dir, --clients, --options | to_json."""
    options = {"model": "llama3.1-8b", "users": 2, "duration": 2.0, "context_scale": 0.03125}
    kv = {"target": "/mnt/t", "options": options, "clients": 2, "option": 3, "pause": 90.0, "timeout": 102.0}
    call = hostcall.host_call("bench_kvcache", "/py", "gpu01", "/runs/r1", Play(["gpu01"]), True, kv)
    args = ["--dir", "/mnt/t/iolab-gpu01/kvcache", "--clients", "2", "--options", json.dumps(options)]
    old_run = ["/py", "-m", "iolab.host.hostrun", "run", "--dir", "/runs/r1", "--start-at", "S", "--target", "/mnt/t"]
    old_run += ["--timeout", "102.0", "--telemetry-after", "0", "--"]
    old_run += ["/py", "-m", "iolab.kinds.kvcache.host", "run", "--out", "/runs/r1", "--option", "3", *args]
    new_run = [*call.run, "--start-at", "S", "--", *call.tool]  # as the role (and hostrun's argparse) takes it
    assert new_run[new_run.index("--") :] == old_run[old_run.index("--") :]
    assert _options(new_run) == _options(old_run)  # hostrun run's options, in any order
    assert call.prepare[:4] == ["/py", "-m", "iolab.kinds.kvcache.host", "prepare"]
    assert call.prepare[call.prepare.index("--dir") :][:6] == args  # the check's own arguments
    assert call.prepare[-3:] == ["--pause", "90.0", "--drop-caches"]
    kept = hostcall.host_call("bench_kvcache", "/py", "gpu01", "/r", Play(["gpu01"]), False, kv)
    assert "--drop-caches" not in kept.prepare  # the run's cache policy: kept
    assert call.run_task == "Run the clients"  # its role's task name, for a failure's record


# Keys as radosgw makes them (20 and 40 characters), in a credentials file as role service_ceph writes it.
ACCESS, SECRET = "IOLABTESTACCESS0KEY1", "iolab/test+Secret=Key/0123456789abcdefghij"


def s3_runs(tmp_path: Path) -> list:
    """A campaign's runs on an s3 backend whose credentials file holds ACCESS and SECRET: S3 objects, reader s3."""
    from iolab.campaign import model as campaign

    keys = tmp_path / "s3.credentials"
    keys.write_text(f"[default]\naws_access_key_id = {ACCESS}\naws_secret_access_key = {SECRET}\n")
    s3 = {"name": "obj", "type": "s3", "endpoint": "http://10.77.0.1:7480", "credentials": str(keys)}
    objects = {"name": "o", "type": "objects", "size": "1MiB", "threads": 2, "runtime": "5s", "ramp": "1s"}
    loader = {"name": "l", "type": "pytorch", "reader": "s3"}
    data = {"name": "s3", "backends": [s3], "workloads": [objects, loader], "dataset": {"files": 10}}
    (tmp_path / "c.yml").write_text(yaml.safe_dump(data))
    return campaign.expand(campaign.load(tmp_path / "c.yml"))


def test_s3_runs_fan_out_their_calls_naming_where_the_keys_are_never_the_keys(tmp_path):
    """The S3 objects runs and the loader's reader s3 went through Ansible (a kind without a call; $IOLAB_S3 as
    run_environment): they fan out now, over ssh and here, and what reaches the host names the credentials file."""
    from iolab.drive import execute

    runs = s3_runs(tmp_path)
    local = inventory(tmp_path, ansible_connection="local")
    for run in runs:
        variables = execute.fan_vars(run)
        assert fanout.refusal(inventory(tmp_path), ["gpu01", "gpu02"], variables) is None, run.workload.name
        assert fanout.refusal(local, ["gpu01", "gpu02"], variables) is None, run.workload.name
        role, kind = variables["run_role"], hostcall.kind_vars(variables)
        call = hostcall.host_call(role, "/py", "gpu01", "/runs/r1", Play(["gpu01"]), True, kind)
        said = json.dumps([call.prepare, call.run, call.tool, call.env, variables])
        assert str(tmp_path / "s3.credentials") in said and ACCESS not in said and SECRET not in said
        if role == "bench_pytorch":  # reader s3's bucket, in the loader's environment as the role's run task set it
            assert json.loads(call.env["IOLAB_S3"]) == variables["bench_pytorch_s3"]
        else:
            assert call.prepare == [
                "/py",
                "-m",
                "iolab.host.prepare",
                "directory",
                "--dir",
                "/runs/r1",
                "--drop-caches",
            ]


def test_an_objects_call_runs_the_argv_its_role_built():
    """roles/bench_objects (eb03f37) dropped the caches, then ran `hostrun run --dir RUN --start-at S --timeout T
    --telemetry-after 0 -- python -m iolab.kinds.objects.host --s3 CONN|to_json --workdir iolab-HOST/objects --out RUN
    --size N --threads N --objects N --runtime S --ramp S --seed N [--keep-going]`."""
    conn = {"endpoint": "http://e:7480", "bucket": "b", "prefix": "p", "region": "r", "credentials": "/c"}
    kind = {"s3": conn, "size": 4096, "threads": 2, "objects": 8, "runtime": 5.0, "ramp": 1.0, "seed": 3}
    kind |= {"timeout": 132.0, "keep_going": True}
    call = hostcall.host_call("bench_objects", "/py", "gpu01", "/runs/r1", Play(["gpu01"]), False, kind)
    old_run = ["/py", "-m", "iolab.host.hostrun", "run", "--dir", "/runs/r1", "--start-at", "S", "--timeout", "132.0"]
    old_run += ["--telemetry-after", "0", "--", "/py", "-m", "iolab.kinds.objects.host", "--s3", json.dumps(conn)]
    old_run += ["--workdir", "iolab-gpu01/objects", "--out", "/runs/r1", "--size", "4096", "--threads", "2"]
    old_run += ["--objects", "8", "--runtime", "5.0", "--ramp", "1.0", "--seed", "3", "--keep-going"]
    new_run = [*call.run, "--start-at", "S", "--", *call.tool]
    assert new_run[new_run.index("--") :] == old_run[old_run.index("--") :]
    assert _options(new_run) == _options(old_run)
    assert call.prepare == ["/py", "-m", "iolab.host.prepare", "directory", "--dir", "/runs/r1"]  # caches kept
    assert call.env == {} and call.run_task == "PUT then GET objects on every host"


def _options(argv: list[str]) -> list[tuple[str, str]]:
    """`hostrun run OPTION VALUE ... --`'s options."""
    pairs = argv[4 : argv.index("--")]
    return sorted(zip(pairs[::2], pairs[1::2], strict=True))


def test_a_distributed_loader_call_ranks_each_host_by_its_place_in_the_play_as_the_role_did():
    """bench_pytorch's vars computed the rank (the host's index in the play), the rendezvous (the first host's
    ansible_host, 127.0.0.1 for a local one) and the port (29500 + the run id's sha1's first 4 hex digits mod 2000)."""
    play = Play.of(["gpu01", "gpu02"], "r-7", {"gpu01": {"ansible_host": "10.0.0.11"}}, {})
    kind = hostcall.kind_vars({**TORCH, "bench_pytorch_gloo_ifname": "br0"})
    calls = {h: hostcall.host_call("bench_pytorch", "/py", h, f"/runs/{h}/r-7", play, False, kind) for h in play.hosts}
    port = str(29500 + int(hashlib.sha1(b"r-7").hexdigest()[:4], 16) % 2000)
    for rank, host in enumerate(play.hosts):
        tool = calls[host].tool
        assert tool[tool.index("--node-rank") + 1] == str(rank) and tool[tool.index("--nodes") + 1] == "2"
        assert tool[tool.index("--master-addr") + 1 :][:3] == ["10.0.0.11", "--master-port", port]
        assert calls[host].env == {"GLOO_SOCKET_IFNAME": "br0", "NCCL_SOCKET_IFNAME": "br0"}
        assert calls[host].prepare[-2:] == ["--pack=packed", "--dali"] and "--drop-caches" not in calls[host].prepare
        assert f"/mnt/t/iolab-{host}/dataset" in calls[host].run  # its cwd: the host's own copy of the data set
    local = Play.of(["localhost"], "r-7", {"localhost": {"ansible_connection": "local"}}, {})
    tool = hostcall.host_call("bench_pytorch", "/py", "localhost", "/r", local, True, kind).tool
    assert tool[tool.index("--master-addr") + 1] == "127.0.0.1"


def test_an_mpi_jobs_first_host_runs_mpirun_over_every_host_and_the_others_wait_as_the_roles_did(tmp_path):
    """roles/bench_dlio and bench_mlperf_kvcache (before their calls) noted each host's part ({addr: its ansible_host,
    127.0.0.1 for a local connection; ranks; dir: its run directory}), ran `launch --hosts PARTS --rsh SSH` on the
    first host (ssh: BatchMode, LogLevel=ERROR, accept-new; no host keys on simulated hosts; `-i` the first host's
    key) and `wait --dir RUN --ranks N --appear 120` on the others; the first host's key was checked first."""
    plain = inventory(tmp_path)
    dirs = {h: f"/runs/{h}/r-7" for h in ("gpu01", "gpu02")}
    play = Play.of(["gpu01", "gpu02"], "r-7", plain.hostvars, dirs)
    kind = hostcall.kind_vars({**DLIO, "bench_dlio_trace": True})
    calls = {h: hostcall.host_call("bench_dlio", "/py", h, dirs[h], play, True, kind) for h in play.hosts}
    parts = [{"addr": f"10.0.0.1{i}", "ranks": 2, "dir": f"/runs/gpu0{i}/r-7"} for i in (1, 2)]
    rsh = [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-i",
        "/k/id",
    ]
    launch = ["/py", "-m", "iolab.kinds.dlio.host", "launch", "--hosts", json.dumps(parts), "--rsh", json.dumps(rsh)]
    assert calls["gpu01"].tool == [*launch, "--trace"]
    wait = ["wait", "--dir", "/runs/gpu02/r-7", "--ranks", "2", "--appear", "120"]
    assert calls["gpu02"].tool == ["/py", "-m", "iolab.kinds.dlio.host", *wait]
    first, other = calls["gpu01"].prepare, calls["gpu02"].prepare
    assert first[2:4] == ["iolab.kinds.dlio.host", "prepare"] and "--drop-caches" in first
    assert json.loads(first[first.index("--workload") + 1]) == DLIO["bench_dlio_workload"]
    assert first[first.index("--key") + 1] == "/k/id" and "--key" not in other  # the first host's alone
    simulated = {h: {**v, "iolab_host_shared_root": True} for h, v in plain.hostvars.items()}
    tool = hostcall.host_call(
        "bench_dlio", "/py", "gpu01", "/r", Play.of(play.hosts, "r-7", simulated, dirs), True, kind
    )
    assert json.loads(tool.tool[tool.tool.index("--rsh") + 1])[5:9] == [
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
    ]
    # MLCommons' kv-cache.py: the same job's shape, each part naming its ranks' work directory; the option to both
    kv = {"target": "/mnt/t", "options": {"users": 2}, "clients": 2, "option": 1, "pause": 0.0, "timeout": 9.0}
    ref = {h: hostcall.host_call("bench_mlperf_kvcache", "/py", h, dirs[h], play, False, kv) for h in play.hosts}
    parts = [{**part, "work": f"/mnt/t/iolab-gpu0{i}/kvcache"} for i, part in zip((1, 2), parts, strict=True)]
    launch = [
        "/py",
        "-m",
        "iolab.kinds.kvcache.host_reference",
        "launch",
        "--hosts",
        json.dumps(parts),
        "--rsh",
        json.dumps(rsh),
    ]
    assert ref["gpu01"].tool == [*launch, "--option", "1", "--options", json.dumps({"users": 2})]
    assert ref["gpu02"].tool == ["/py", "-m", "iolab.kinds.kvcache.host_reference", *wait, "--option", "1"]
    assert ref["gpu01"].prepare[2:4] == ["iolab.kinds.kvcache.host_reference", "prepare"]
    assert ref["gpu01"].prepare[-2:] == ["--key", "/k/id"] and "--key" not in ref["gpu02"].prepare
    alone = hostcall.host_call(
        "bench_dlio", "/py", "gpu01", "/r", Play.of(["gpu01"], "r", plain.hostvars, dirs), True, kind
    )
    assert "--key" not in alone.prepare  # a job on one host starts no other host's ranks


def reply(rc: int | None, out: list[str], err: list[str]) -> fanout.Reply:
    answer = fanout.Reply()
    answer.rc, answer.out, answer.err = rc, out, err
    return answer


def test_a_failed_run_comes_back_with_its_record_and_an_unreachable_host_is_said_so():
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        tar.addfile(tarfile.TarInfo("./run.json"), io.BytesIO(b""))
    line = ARCHIVE_LINE + base64.b64encode(archive.getvalue()).decode()

    ok = runner.HostOutcome("gpu01")
    assert fanout_run._note(ok, reply(0, ["progress", line], []), "Run fio")
    assert not ok.failed and len(ok.archives) == 1

    failed = runner.HostOutcome("gpu02")
    assert fanout_run._note(failed, reply(1, [line], ["fio exited 1: no space left"]), "Run fio")
    assert not failed.failed  # the run failed, recorded as the rescue records it; the host goes on
    with tarfile.open(fileobj=io.BytesIO(failed.archives[1])) as tar:
        record = json.load(tar.extractfile("./error.json"))  # type: ignore[arg-type]
    assert record["task"] == "Run fio"
    assert runner.failure_message(record["result"]) == "fio exited 1: no space left (rc 1)"

    lost = runner.HostOutcome("gpu03")
    assert not fanout_run._note(lost, reply(255, [], ["ssh: connect to host 10.0.0.13: No route to host"]), "x")
    assert lost.unreachable and "No route to host" in lost.message


TOPOLOGY = "[routes]\n{root}: gpu01\ngpu01: {leaves}\n"


@pytest.mark.parametrize(
    ("text", "gateway_python", "says"),
    [
        (None, "python3", "no such file; give the path of a ClusterShell topology file"),
        ("not a topology at all", "python3", "not a usable topology for this controller"),
        ("[routes]\n{root}: gpu01\ngpu01: gpu02\ngpu02: gpu01\n", "python3", "Loop detected"),
        ("[routes]\nelsewhere: gpu01\ngpu01: gpu02\n", "python3", "not a usable topology for this controller"),
        (TOPOLOGY.replace("gpu01", "gw09"), "python3", "gateway gw09 is not a host of the inventory"),
        ("[routes]\n{root}: gpu01\ngpu01: gpu03\n", "python3", "no route from {root} reaches gpu02"),
        (TOPOLOGY, "python3; touch /tmp/x", "iolab_gateway_python 'python3; touch /tmp/x' is not a program"),
    ],
)
def test_a_topology_that_cannot_carry_the_runs_is_refused_before_anything_runs(tmp_path, text, gateway_python, says):
    """Issue 37, defect 8: a missing file gave three chained tracebacks after the mount; a gateway that is not a host
    said "No route available to gpu01" for every host; a gateway python with ';' was accepted."""
    root = socket.gethostname().split(".")[0]
    path = tmp_path / "topology.conf"
    if text is not None:
        path.write_text(text.format(root=root, leaves="gpu02"))
    inv = inventory(tmp_path, iolab_topology=str(path), iolab_gateway_python=gateway_python)
    inv.hostvars["gpu02"].update(iolab_topology=str(path), iolab_gateway_python=gateway_python)
    with pytest.raises(UserError) as refused:
        reach.topology(inv, ["gpu02"])
    assert says.format(root=root) in str(refused.value) and "\n" not in str(refused.value)


def test_a_usable_topology_names_its_gateways():
    root = socket.gethostname().split(".")[0]
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "topology.conf"
    path.write_text(TOPOLOGY.format(root=root, leaves="gpu02"))
    inv = inventory(tmp, iolab_topology=str(path))
    inv.hostvars["gpu02"]["iolab_topology"] = str(path)
    assert reach.topology(inv, ["gpu02"]) == (str(path), ["gpu01"])
    assert reach.topology(inventory(tmp), ["gpu01", "gpu02"]) is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("soon", "iolab_ready_wait 'soon': expected a duration such as 10s or 2m"),
        ("0s", "iolab_ready_wait '0s': a duration must be positive"),
        (-5, "iolab_ready_wait '-5': "),
        ("5 parsecs", "iolab_ready_wait '5 parsecs': "),
    ],
)
def test_a_ready_wait_that_is_not_a_positive_duration_is_refused_before_anything_runs(tmp_path, value, says):
    inv = inventory(tmp_path, iolab_ready_wait=value)
    inv.hostvars["gpu02"]["iolab_ready_wait"] = value
    with pytest.raises(UserError) as refused:
        reach.ready_wait(inv, ["gpu01", "gpu02"])
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_the_ready_wait_is_thirty_seconds_unless_the_inventory_gives_one_for_every_selected_host(tmp_path):
    assert reach.ready_wait(inventory(tmp_path), ["gpu01", "gpu02"]) == reach.READY_WAIT == 30.0
    given = inventory(tmp_path, iolab_ready_wait="2m")
    assert reach.ready_wait(given, ["gpu01"]) == 120.0
    with pytest.raises(UserError, match=r"the hosts give different iolab_ready_wait \(\(none\), 2m\)"):
        reach.ready_wait(given, ["gpu01", "gpu02"])  # gpu02 gives none: the 30 s would hold for it alone
    given.hostvars["gpu02"]["iolab_ready_wait"] = 2.5
    assert reach.ready_wait(given, ["gpu02"]) == 2.5


def test_hosts_ready_wait_the_bound_for_one_that_is_not_then_start_without_it():
    """The least bound is the engine's ready wait (reach.ready_wait), or the slowest ready host's own time."""

    class Timers:
        def __init__(self) -> None:
            self.after: list[float] = []

        def timer(self, delay: float, handler: object) -> object:
            self.after.append(delay)
            return type("Timer", (), {"invalidate": lambda self: None})()

    task = Timers()
    replies = {"gpu01": fanout.Reply(), "gpu02": fanout.Reply()}
    collect = fanout._Collect(task, replies, "/runs/o/r.start", tree=False, wait=4.0)  # type: ignore[arg-type]
    replies["gpu01"].ready = collect.called + 1.0  # gpu01 ready after 1 s: the bound is 4 s, not 30 s
    collect._start()
    assert len(task.after) == 1 and 3.0 < task.after[0] <= 5.0
    replies["gpu01"].ready = collect.called + 6.0  # ready after 6 s: the slowest's own time is the bound
    collect._start()
    assert 11.0 < task.after[1] <= 12.0


def local_engine(tmp_path: Path) -> fanout.Engine:
    (tmp_path / "local.yml").write_text(
        yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}})
    )
    return fanout.Engine(load_inventory(tmp_path / "local.yml"), ["localhost"], console=None)


# A host-side command's stand-in (real hostrun runs in tests/integration/test_bench_local.py): says it is ready, takes
# the start line from stdin, then prints its argument, its session and whether its parent is this test's process.
READY_THEN_ECHO = f"""
import os, sys
print({READY_LINE!r} + "0", flush=True)
start = sys.stdin.readline().strip()
print(sys.argv[1]); print(start); print(os.getsid(0) == os.getpid(), os.getppid() == {os.getpid()})
"""


def test_a_local_host_takes_the_same_call_here_its_argv_as_it_is_in_a_session_of_its_own(tmp_path):
    """ansible_connection: local: the fan-out's call runs here (no ssh, no shell), is given the common start on its
    stdin as an ssh host is, and its parent is this controller (whose death hostrun notices)."""
    marker = tmp_path / "pwned"
    value = f"$(touch {marker}); `touch {marker}`; '\""
    engine = local_engine(tmp_path)
    try:
        argv = [sys.executable, "-c", READY_THEN_ECHO, value]
        replies = engine.call({"localhost": argv}, 30, start_file=str(tmp_path / "r.start"))
    finally:
        engine.close()
    reply = replies["localhost"]
    assert reply.local and reply.rc == 0 and reply.reached and reply.ready is not None, reply.err
    assert reply.out[0] == value and not marker.exists()
    assert float(reply.out[1]) == reply.start["start_at"]  # type: ignore[index]
    assert reply.out[2] == "True True"


def test_a_local_command_killed_by_a_signal_is_a_run_that_died_not_a_lost_host(tmp_path):
    """Over ssh, a command killed there and a lost connection both give 255 (a probe tells them apart); here the
    signal is known, and the run is failed as died, its host kept."""
    engine = local_engine(tmp_path)
    try:
        argv = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
        reply = engine.call({"localhost": argv}, 30)["localhost"]
    finally:
        engine.close()
    assert reply.signalled == 9 and reply.reached and reply.died
    outcome = runner.HostOutcome("localhost")
    assert fanout_run._note(outcome, reply, "Run fio") and not outcome.unreachable
    with tarfile.open(fileobj=io.BytesIO(outcome.archives[0])) as tar:
        record = json.load(tar.extractfile("./error.json"))  # type: ignore[arg-type]
    assert record["result"]["msg"].startswith("its command ended without an answer (signal 9): it died there")


def test_the_storage_sides_drop_runs_once_every_host_is_ready_and_the_start_follows_it(tmp_path):
    """Engine.call's before_start with a real StorageDrop on this machine: the command that stands for the Ceph drop
    runs after the host said it was ready and before the start is sent; then the start, told to the faults' clock
    (`on_start`) as it is sent; the drop's record is what it printed."""
    stamp = tmp_path / "dropped"
    drop_argv = [sys.executable, "-c", f"import json, time; open({str(stamp)!r}, 'w').write(repr(time.time())); "]
    drop_argv[-1] += "print(json.dumps({'dropped': True, 'mds': False}))"
    drop = fanout_run.StorageDrop([], ("localhost", drop_argv))
    told: list[float] = []
    engine = local_engine(tmp_path)
    try:
        argv = [sys.executable, "-c", READY_THEN_ECHO, "x"]
        replies = engine.call({"localhost": argv}, 30, str(tmp_path / "r.start"), drop, told.append)
    finally:
        engine.close()
    reply = replies["localhost"]
    assert reply.rc == 0 and reply.ready is not None and reply.start is not None, reply.err
    assert reply.ready < float(stamp.read_text()) < reply.start["start_at"]
    assert told == [reply.start["start_at"]] == [float(reply.out[1])]
    assert drop.left == 0 and drop.record() == {"ceph": {"dropped": True, "mds": False}}


def test_the_check_after_a_faulted_run_goes_beside_each_hosts_files(tmp_path):
    """fanout_run.intact, as playbooks/intact.yml did it: the data set verified on the hosts that hold it (here a
    directory with no manifest: the check's error is what it found), {"checked": false} on the others; a host whose
    files did not come back gets nothing."""
    engine = local_engine(tmp_path)
    outcomes = {h: runner.HostOutcome(h) for h in ("localhost", "gpu09", "gpu10")}
    outcomes["localhost"].archives.append(b"run"), outcomes["gpu09"].archives.append(b"run")
    check = {"intact_dataset_hosts": ["localhost"], "intact_dataset_root": str(tmp_path), "intact_target": "/mnt/t"}
    env = ["env", f"PYTHONPATH={Path(fanout.__file__).parents[2]}"]
    try:
        fanout_run.intact(engine, env, sys.executable, outcomes, check)
    finally:
        engine.close()

    def found(host: str) -> dict:
        with tarfile.open(fileobj=io.BytesIO(outcomes[host].archives[-1])) as tar:
            return json.load(tar.extractfile("./intact.json"))  # type: ignore[arg-type]

    assert found("gpu09") == {"dataset": {"checked": False}}
    said = found("localhost")["dataset"]
    assert said["ok"] is False and said.get("error"), said
    assert outcomes["gpu10"].archives == []


def test_a_warm_up_command_runs_under_hostrun_in_the_runs_warm_directory_and_a_host_it_fails_on_is_failed(tmp_path):
    """fanout_run.warm, as run.yml's first task: the argv as it is (no shell) under hostrun in RUN/warm, in the
    target; a host whose command fails gets its run failed (the task's name, the run's files packed with it)."""
    engine = local_engine(tmp_path)
    env = ["env", f"PYTHONPATH={Path(fanout.__file__).parents[2]}"]
    marker = "warmed; touch pwned"  # one argv word
    (tmp_path / "target").mkdir()
    try:
        ok = fanout_run.warm(
            engine,
            env,
            sys.executable,
            {"localhost": str(tmp_path / "r1")},
            ["touch", marker],
            str(tmp_path / "target"),
            30.0,
        )
        failed = fanout_run.warm(
            engine, env, sys.executable, {"localhost": str(tmp_path / "r2")}, ["false"], str(tmp_path / "target"), 30.0
        )
    finally:
        engine.close()
    assert ok == {} and (tmp_path / "target" / marker).exists() and not (tmp_path / "target" / "pwned").exists()
    assert (tmp_path / "r1" / "warm").is_dir()  # its record, for the run's pack
    outcome = failed["localhost"]
    assert not outcome.unreachable and not outcome.failed  # the run failed, recorded by its error.json
    with tarfile.open(fileobj=io.BytesIO(outcome.archives[0])) as tar:
        assert json.load(tar.extractfile("./error.json"))["task"] == fanout_run.WARM_TASK  # type: ignore[arg-type]
    assert len(outcome.archives) == 2  # then the run's files (its warm/), packed as run.yml's rescue packs them


def test_a_checkpoints_call_is_the_roles_argv_its_write_first_on_every_host_or_none():
    """roles/bench_checkpoint (c1f8759) ran `hostrun step -- python -m iolab.kinds.checkpoint.host ARGS check
    --bytes-per-rank N`, then `hostrun run --target T --timeout S --cwd T --telemetry-after 0 --dir RUN/write
    --no-pack --start-at X -- ... write --bytes-per-rank N`, the drop on every host, then `... --dir RUN --start-at X --
    ... read --remove`; ARGS: --dir T/iolab-HOST/checkpoint --out RUN --world W --hosts H --index I --count C."""
    ckpt = {"target": "/mnt/t", "bytes": 8 << 20, "writers": 2, "ranks": 0, "count": 1, "timeout": 60.0}
    call = hostcall.host_call("bench_checkpoint", "/py", "gpu02", "/r", Play(["gpu01", "gpu02"]), True, ckpt)
    args = ["/py", "-m", "iolab.kinds.checkpoint.host", "--dir", "/mnt/t/iolab-gpu02/checkpoint", "--out", "/r"]
    args += ["--world", "4", "--hosts", "2", "--index", "1", "--count", "1"]
    options = ["--target", "/mnt/t", "--timeout", "60.0", "--cwd", "/mnt/t", "--telemetry-after", "0"]
    assert call.first is not None and call.first.first is None
    assert call.first.prepare == [*args, "check", "--bytes-per-rank", str(2 << 20)]
    assert call.first.tool == [*args, "write", "--bytes-per-rank", str(2 << 20)]
    hostrun = ["/py", "-m", "iolab.host.hostrun", "run"]  # (the same options, in another order than the role's)
    assert call.first.run == [*hostrun, "--dir", "/r/write", "--no-pack", *options]
    assert call.tool == [*args, "read", "--remove"]
    assert call.run == [*hostrun, "--dir", "/r", *options]
    assert call.prepare == ["/py", "-m", "iolab.host.caches", "--dir", "/r"]  # once every host has written
    kept = hostcall.host_call("bench_checkpoint", "/py", "gpu02", "/r", Play(["gpu01", "gpu02"]), False, ckpt)
    assert kept.prepare == ["/py", "-m", "iolab.host.prepare", "directory", "--dir", "/r"]


def test_every_host_starts_or_none_where_the_call_says_together(tmp_path, here_engine):
    """Engine.call(together=True), a checkpoint's write: a host that ends before it is ready stops the others,
    ready and waiting for the start, each told why; none is sent a start."""
    refuse = [sys.executable, "-c", "import sys, time; time.sleep(1); sys.exit('here2: no room for 4 shards')"]
    commands = {"here1": [sys.executable, "-c", READY_THEN_ECHO, "x"], "here2": refuse}
    replies = here_engine().call(commands, 30, str(tmp_path / "r.start"), together=True)
    assert replies["here2"].rc == 1 and replies["here2"].ready is None
    waiting = replies["here1"]
    assert waiting.ready is not None and waiting.start is None and waiting.rc != 0
    assert (
        waiting.dropped == "not started: every host starts or none, and here2 could not (here2: no room for 4 shards)"
    )


def test_a_call_with_a_first_runs_it_once_on_every_host_then_itself_with_its_files(tmp_path):
    """run_calls with a checkpoint's shape (HostCall.first), on this machine through real hostrun: the first call
    once, then the call once (its pack takes the first's files); a host whose first call failed does not run."""
    engine = local_engine(tmp_path)
    env = ["env", f"PYTHONPATH={Path(fanout.__file__).parents[2]}", "IOLAB_PACK_RUN=1"]
    log = tmp_path / "log"
    run_dir = tmp_path / "runs" / "owner" / "localhost" / "r1"

    def step(what: str, fail: bool = False) -> list[str]:  # a step done twice fails
        again = f"import os; again = os.path.exists({str(log)!r}) and {what!r} in open({str(log)!r}).read(); "
        return [
            sys.executable,
            "-c",
            again + f"open({str(log)!r}, 'a').write({what!r}); raise SystemExit({int(fail)} or again)",
        ]

    def call(fail: bool) -> base.HostCall:
        hostrun = [sys.executable, "-m", "iolab.host.hostrun", "run", "--timeout", "30"]
        first = base.HostCall(
            step("c"), [*hostrun, "--dir", f"{run_dir}/write", "--no-pack"], step("w", fail), {}, "check", "write"
        )
        return base.HostCall(step("d"), [*hostrun, "--dir", str(run_dir)], step("r"), {}, "drop", "read", first=first)

    try:
        done = fanout_run.run_calls(engine, env, {"localhost": str(run_dir)}, {"localhost": call(False)}, 30.0)
        assert log.read_text() == "cwdr", log.read_text()  # check, write; then drop, read: each once
        with tarfile.open(fileobj=io.BytesIO(done["localhost"].archives[0])) as tar:
            assert "./write/run.json" in tar.getnames() and "./run.json" in tar.getnames()
        log.unlink()
        run_dir = tmp_path / "runs" / "owner" / "localhost" / "r2"
        done = fanout_run.run_calls(engine, env, {"localhost": str(run_dir)}, {"localhost": call(True)}, 30.0)
    finally:
        engine.close()
    assert log.read_text() == "cw"  # the write failed: no drop, no read
    with tarfile.open(fileobj=io.BytesIO(done["localhost"].archives[0])) as tar:
        assert json.load(tar.extractfile("./error.json"))["task"] == "write"  # type: ignore[arg-type]
