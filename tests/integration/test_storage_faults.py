"""Storage that breaks during the test (issue 36), on the session's lab in a box (tests/labbox.py): real Ceph, real
radosgw, real bench.all on localhost. One campaign proves several things at once, to keep CI short: fio on CephFS
with the box's only OSD stopped at 10 s and started at 30 s, the data set verified after and read whole by a
loader, and S3 objects with radosgw stopped for 5 s. A loader under a storage fault is test_nfs_userspace.py's
(nfs-ganesha stopped, where the loader's reads stop; on ceph-fuse a 300-file data set is served from the client's
own cache through an OSD stop, docs/LAB_PITFALLS.md, so a faulted loader here showed only that it ran). And a
campaign whose fault's heal fails, which ends on it in one line and leaves nothing of iolab's running or mounted.
The same through librbd is bench/storage_faults.py's (the fio rbd engine's stall is the unit tests', on a recorded
log).

Each test leaves the box as it found it (the OSD up and in, no flag set, radosgw running, healthy as a one-node
lab is: labbox.unaccepted), in a finally.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from support import mounted

pytestmark = pytest.mark.integration

LEASE_WAIT_S = 600
FIO = {"type": "fio", "profile": "seq-read-1m", "runtime": "14s", "ramp": "1s", "size": "64MiB"}
# 100 ms of compute per batch of 10: at most 100 samples/s, 45 s and more for 4,500 (a data set of 300 files)
LOADER = {
    "name": "train",
    "type": "pytorch",
    "reader": "packed",
    "workers": 1,
    "batch_size": 10,
    "epochs": 15,
    "accelerator": {"type": "custom", "compute_per_batch": "100ms"},
}


def bench(cli, campaign, *more: str, check: bool = True):
    """bench.all on localhost, waiting while another test run's campaign holds the host's lease."""
    deadline = time.monotonic() + LEASE_WAIT_S
    while True:
        done = cli("bench.all", "--campaign", str(campaign), *more, check=False)
        if "is held by campaign" not in done.stderr or time.monotonic() > deadline:
            assert done.returncode == 0 or not check, done.stdout + done.stderr
            return done
        time.sleep(5)


def restore(box) -> None:
    """The box as every test expects it: its daemons running, the OSD in, no flag set, healthy (at most 180 s)."""
    from iolab.drive import fault_actions

    for entry in box.ceph_client()["daemons"]:
        entry = {**entry, "argv": [str(a) for a in entry["argv"]]}
        if fault_actions.running(entry) is None:
            fault_actions.start_daemon(entry)
    box.ceph("osd", "in", "0", fmt_json=False)
    for flag in ("noout", "noup"):
        box.ceph("osd", "unset", flag, fmt_json=False)
    box.wait_settled()


def healthy(box) -> None:
    """The box as found: healthy (labbox.unaccepted), every placement group active+clean, the OSD up and in, no
    flag, daemons running."""
    from iolab.drive import fault_actions

    status = box.ceph("status")
    assert not box.unaccepted(status["health"]), status["health"]
    assert {s["state_name"] for s in status["pgmap"]["pgs_by_state"]} == {"active+clean"}
    assert (status["osdmap"]["num_up_osds"], status["osdmap"]["num_in_osds"]) == (1, 1)
    assert not {"noout", "noup"} & set(box.ceph("osd", "dump")["flags_set"])
    for entry in box.ceph_client()["daemons"]:
        assert fault_actions.running({**entry, "argv": [str(a) for a in entry["argv"]]}), entry["type"]


def figures(samples: list[dict], backend: str, workload: str, host: str = "*") -> dict:
    return {
        (s["metric"], s["params"].get("after")): s["value"]
        for s in samples
        if (s["backend"], s["workload"], s["host"]) == (backend, workload, host) and "faults" in s["metadata"]
    }


def test_an_osd_stopped_under_cephfs_then_its_data_set_read_whole_and_radosgw_stopped_under_s3(
    ceph_box, cli, write_campaign
):
    ceph = ceph_box.ceph_fields()
    osd_stop = {"what": "osd_stop", "osd": 0}
    campaign = write_campaign(
        {
            "name": "itest-flt",
            "backends": [
                {"name": "itest-flt-fs", "type": "cephfs", "method": "fuse", **ceph},
                {"name": "itest-flt-obj", "type": "s3", "prefix": "itest-flt", **ceph_box.s3_fields()},
            ],
            "dataset": {"kind": "imagenet-like", "files": 300, "seed": 36, "classes": 6},
            "workloads": [
                # CephFS's reads came back 5–14 s after the OSD's start, at 70–85 % of the rate before until its
                # placement groups were clean: 25 s after the heal leaves room for a loaded machine, 10 s before the
                # fault a baseline that holds (with 5 s, the first seconds' higher rate made 90 % unreachable)
                {**FIO, "name": "rd", "runtime": "55s", "faults": [{"at": "10s", "heal_at": "30s", **osd_stop}]},
                # the data set the check after rd's fault verified, read whole once (its runs make it: uses_dataset)
                {**LOADER, "epochs": 1},
                {
                    "name": "obj",
                    "type": "objects",
                    "size": "1MiB",
                    "threads": 4,
                    "objects": 16,
                    "runtime": "30s",
                    # 13 s after the heal before the PUTs end: at 22 s of 25 (the CI of 8788127, two workers) the
                    # rate was at 90 % for one second of the last five, and a recovery reads a 3-s centred median;
                    # with 8 s after it the CI of 5a22907 saw no recovery before the end (radosgw's restart under load)
                    "faults": [{"at": "12s", "what": "rgw_stop", "heal_at": "17s"}],
                },
            ],
        }
    )
    # A fault on a daemon the box does not run is refused before anything starts, in one line
    wrong = write_campaign(
        {
            "name": "itest-flt-no",
            "backends": [{"name": "itest-flt-no", "type": "rbd", "size": "64MiB", **ceph}],
            "workloads": [{**FIO, "name": "rd", "faults": [{"at": "8s", "what": "osd_stop", "osd": 7}]}],
        },
        "wrong.yml",
    )
    done = bench(cli, wrong, check=False)
    assert done.returncode == 2 and "started no osd.7 (theirs: mon.iolab, mgr.iolab, osd.0" in done.stderr
    assert not (cli.results / "itest-flt-no" / "runs.jsonl").exists()

    started = time.monotonic()
    try:
        bench(cli, campaign)
    finally:
        restore(ceph_box)
    took = time.monotonic() - started
    healthy(ceph_box)
    assert mounted("/mnt/iolab/itest-flt") == []
    samples = cli.samples("itest-flt")
    assert {r["status"] for r in cli.runs("itest-flt")} == {"ok"}

    found = figures(samples, "itest-flt-fs", "rd")  # fio: the client stopped with the only OSD, no error
    assert found[("floor_pct", None)] < 10, found
    assert found[("read_bw_degraded", None)] < 0.25 * found[("read_bw_baseline", None)]
    back = found.get(("time_to_90pct", "heal"))
    if back is not None:  # 0 where the reads were back within a second of the heal's start (the heal took its time)
        assert 0 <= back < 25, found
        assert found[("time_to_90pct", "injection")] == pytest.approx(20 + back, abs=2)
    else:
        # Not back at 90 % by the run's end: CephFS reads come back at 70–85 % of the rate before until the placement
        # groups are clean, which on a loaded machine took longer than the run (a clean clone's CI, 2026-11-28). The
        # figure is then absent, not made up; the reads came back all the same, and the report says "not back".
        from iolab.kinds.registry import parser_for

        (run_id,) = {s["run_id"] for s in samples if (s["backend"], s["workload"]) == ("itest-flt-fs", "rd")}
        series = parser_for("fio")(cli.results / "itest-flt" / "raw" / run_id / "localhost").series["read_bw"]
        assert statistics.fmean(v for t, v in series if t > series[-1][0] - 10) > 2 * found[("read_bw_degraded", None)]
        assert ("time_to_90pct", "injection") not in found
        assert "not back by the end" in cli("report", "--campaign", "itest-flt").stdout
    assert found[("client_errors", None)] == 0
    assert 20 <= found[("time_to_health_ok", None)] < 60, found
    assert figures(samples, "itest-flt-fs", "rd", "localhost")[("floor_pct", None)] == found[("floor_pct", None)]
    on_fs = figures(samples, "itest-flt-fs", "rd", "localhost")
    assert on_fs[("data_errors", None)] == 0  # the data set checked against its manifest after the fault

    obj = figures(samples, "itest-flt-obj", "obj", "localhost")
    assert obj[("floor_pct", None)] < 10, obj
    if ("time_to_90pct", "heal") in obj:
        assert obj[("time_to_90pct", "heal")] < 20, obj
    else:
        # Not back at 90 % by the run's end: a clean-clone CI (2026-11-30, the slower machine) saw the PUTs at 38 MB/s
        # before the fault (its first seconds at 41–44), none while radosgw was stopped, then 21–33 MB/s for the 13 s
        # after the heal beside the other worker's tests — 75–85 % of the rate before, as CephFS's reads above. The
        # figure is then absent, not made up; the PUTs came back all the same, well above the degraded rate.
        from iolab.kinds.registry import parser_for

        (obj_run,) = {s["run_id"] for s in samples if (s["backend"], s["workload"]) == ("itest-flt-obj", "obj")}
        sample = next(s for s in samples if s["run_id"] == obj_run and s["metric"] == "floor_pct")
        heal = sample["metadata"]["faults"]["start_at"] + sample["metadata"]["faults"]["window_s"][1]
        series = parser_for("objects")(cli.results / "itest-flt" / "raw" / obj_run / "localhost").series["write_bw"]
        after = [v for t, v in series if t > heal + 1]
        assert after and statistics.fmean(after) > 2 * obj[("write_bw_degraded", None)], (obj, series)
    assert obj[("client_errors", None)] > 0  # the PUTs radosgw refused, counted, and the run went on

    # What the injector did, beside the run's files: each injection and heal on time, and the cluster back
    for sample in (s for s in samples if s["metric"] == "floor_pct" and s["host"] == "*"):
        events = sample["metadata"]["faults"]["events"]
        assert [(e["type"], e["ok"]) for e in events if e["type"] in ("inject", "heal")] == [
            ("inject", True),
            ("heal", True),
        ]
        assert all(e["late_s"] < 1 for e in events if "late_s" in e)
    raw = cli.results / "itest-flt" / "raw"
    # the faulted run on the Ceph backend polled `ceph status`; the S3 run's fault is radosgw's, the loader's none
    (rd_run,) = {s["run_id"] for s in samples if (s["backend"], s["workload"]) == ("itest-flt-fs", "rd")}
    assert [p.parent.name for p in raw.glob("*/ceph_health.jsonl")] == [rd_run]
    print(f"\nfaulted campaign: {took:.0f} s")


def test_a_fault_whose_heal_fails_ends_the_campaign_in_one_line_and_leaves_nothing_running(
    cli, write_campaign, tmp_path
):
    """A tool killed on its host (its run failed, the campaign goes on), then a command whose heal fails: the
    campaign ends on that, in one line; the teardown unmounts and ends what iolab started."""
    marks = tmp_path / "marks"
    marks.mkdir()
    fio = {**FIO, "size": "16MiB", "runtime": "11s"}  # the heal at 10 s, before the run's end (12 s)
    command = {"at": "6s", "what": "command", "argv": ["touch", f"{marks}/x"], "heal_at": "10s", "heal_argv": ["false"]}
    campaign = write_campaign(
        {
            "name": "itest-flt-heal",
            "backends": [{"name": "itest-flt-mem", "type": "tmpfs", "size": "48MiB"}],
            "workloads": [
                {**fio, "name": "killed", "faults": [{"at": "6s", "what": "tool_kill", "host": "localhost"}]},
                {**fio, "name": "unhealed", "faults": [command]},
            ],
        }
    )
    refused = bench(cli, campaign, check=False)
    assert refused.returncode == 2 and "pass --allow-commands" in refused.stderr  # the campaign's own command
    done = bench(cli, campaign, "--allow-commands", check=False)
    lines = [line for line in done.stderr.splitlines() if line.startswith("iolab:")]
    assert done.returncode == 1 and len(lines) == 1, done.stdout + done.stderr
    assert lines[0] == (
        f"iolab: unhealed on itest-flt-mem, rep 1: healing fault command touch {marks}/x at 6 s, healed at 10 s "
        "failed (false: exit status 1); it left what the command did"
    )
    assert (marks / "x").exists() and "Traceback" not in done.stderr
    killed = [r for r in cli.runs("itest-flt-heal") if r["workload"] == "killed"]
    assert [r["status"] for r in killed] == ["failed"] and "fio" in killed[0]["error"], killed
    assert mounted("/mnt/iolab/itest-flt") == []
    # This machine's runs (their directories /opt/iolab/runs/*/localhost/...): the simulated hosts' (another
    # xdist worker's lab tests) are not this campaign's.
    left = [
        p
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _names(p, "iolab.host.hostrun") and _names(p, "/localhost/")
    ]
    assert left == []
    samples = cli.samples("itest-flt-heal")
    # the unhealed run was measured and recorded before the campaign ended on it
    assert figures(samples, "itest-flt-mem", "unhealed", "localhost")[("client_errors", None)] == 0


def _names(proc: Path, text: str) -> bool:
    try:
        return text in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
