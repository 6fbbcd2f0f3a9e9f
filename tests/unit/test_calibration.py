"""Accelerator profiles (campaign.profiles, run.calibration): what a campaign and the report make of them, the
refusals, and that an emulated device's compute per batch is its profile's step time."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.campaign import gpus, profiles
from iolab.campaign import model as campaign
from iolab.drive import live
from iolab.errors import UserError
from iolab.host import live as host_live
from iolab.host.dataset.gen import gen
from iolab.host.dataset.pack import pack
from iolab.kinds.calibrate import parser as calibrate_parser
from iolab.kinds.pytorch import parser as pytorch_parser
from iolab.measures.samples import ResultStore, Sample
from iolab.report import tables as report
from iolab.run import calibration
from iolab.workloads.accelerator import Accelerator


def profile(results: Path, host: str = "gpu01", steps: dict[int, float] | None = None, model: str = "resnet50",
            at: str = "2026-11-28T07:00:00Z", name: str = "NVIDIA H200", scale: str = "full") -> Path:  # fmt: skip
    directory = profiles.profiles_dir(results)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{host}-{at.replace(':', '')}.json"
    entries = [{"model": model, "batch": b, "step_s": s, "scale": scale} for b, s in (steps or {400: 0.0692}).items()]
    device = {"device": "cuda", "name": name, "count": 1, "driver": "580.95.05", "torch": "2.11"}
    document = {"kind": profiles.PROFILE_KIND, "host": host, "measured_at": at, "entries": entries, "device": device}
    path.write_text(json.dumps(document))
    return path


def spec(tmp_path: Path, accelerator: dict, batch: int = 400, **more) -> campaign.Campaign:
    raw = {
        "name": "cal",
        "backends": [{"name": "t", "type": "tmpfs", "size": "64MiB"}],
        "dataset": {"kind": "imagenet-like", "files": 64, "seed": 1},
        "workloads": [{"name": "w", "type": "pytorch", "batch_size": batch, "accelerator": accelerator, **more}],
    }
    return campaign.parse(raw, "cal.yml", tmp_path)


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("IOLAB_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


def test_a_calibrated_accelerator_takes_its_profiles_step_time_as_its_compute_per_batch(tmp_path, results):
    profile(results, steps={400: 0.0692, 256: 0.0454}, at="2026-11-20T00:00:00Z", name="older")
    newest = profile(results, steps={400: 0.0701, 8: 0.05})
    latest = spec(tmp_path, {"type": "calibrated", "profile": "latest"})
    acc = latest.workloads[0].accelerator
    assert (acc.profile, acc.device, acc.step_times) == (str(newest), "NVIDIA H200", {"400": 0.0701, "8": 0.05})
    options = latest.workloads[0].loader_options()
    assert (options["accelerator"], options["compute_per_batch"]) == ("emulated", 0.0701)
    named = spec(tmp_path, {"type": "calibrated", "profile": str(newest.relative_to(tmp_path))}, batch=8)
    assert named.workloads[0].loader_options()["compute_per_batch"] == 0.05
    assert "1 emulated NVIDIA H200 (calibrated) (0.05 s per batch)" in named.workloads[0].describe()
    # The profile is part of the run: another profile, another run id.
    profile(results, steps={400: 0.08}, at="2026-11-29T00:00:00Z")
    again = spec(tmp_path, {"type": "calibrated", "profile": "latest"})
    assert campaign.expand(again)[0].run_id != campaign.expand(latest)[0].run_id


@pytest.mark.parametrize(
    ("accelerator", "batch", "message"),
    [
        (
            {"type": "calibrated", "profile": "nope.json"},
            400,
            r"accelerator.profile .*nope.json: no such profile; run ",
        ),
        ({"type": "calibrated", "model": "unet3d"}, 7, r"profile latest: no profile of unet3d under .*bench.calibrate"),
        (
            {"type": "calibrated", "profile": "PROFILE", "model": "retinanet"},
            24,
            r"holds resnet50 \(batch 400\), not retinanet: calibrate it \(./lab bench.calibrate --models retinanet\)",
        ),
        ({"type": "calibrated"}, 64, r"measured resnet50 at batch 400, not 64: set batch_size to one of them or"),
        ({"type": "calibrated", "compute_per_batch": "1s"}, 400, "takes its step time from its profile"),
    ],
)
def test_a_profile_missing_of_another_model_or_batch_is_refused_in_one_line(tmp_path, results, accelerator, batch,
                                                                           message):  # fmt: skip
    path = profile(results)
    if accelerator.get("profile") == "PROFILE":
        accelerator = {**accelerator, "profile": str(path)}
    with pytest.raises(UserError, match=message) as caught:
        spec(tmp_path, accelerator, batch=batch)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("cal.yml: workloads[0]")


def test_compute_per_batch_follows_the_profile_in_the_loader_itself(tmp_path, results):
    """The loader, given the workload's options as the role gives them, sleeps the profile's step per batch."""
    profile(results, steps={4: 0.12})
    options = spec(tmp_path, {"type": "calibrated", "profile": "latest"}, batch=4).workloads[0].loader_options()
    root = tmp_path / "ds"
    gen(root, files=16, seed=2, classes=2, workers=1)
    pack(root, "packed")
    options |= {"workers": 0, "decode": False, "steps": 4, "evict": False}
    argv = [sys.executable, "-m", "iolab.kinds.pytorch.host", "--root", str(root), "--out", str(tmp_path / "o")]
    done = subprocess.run([*argv, "--options", json.dumps(options)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    records = json.loads((tmp_path / "o" / "loader.json").read_text())["ranks"][0]["records"]
    computes = [r[4] for r in records]
    assert len(computes) == 4 and all(0.12 <= c < 0.12 + 0.5 for c in computes), computes
    assert pytorch_parser.parse(tmp_path / "o").metadata["loader"]["compute_per_batch"] == 0.12


def test_the_report_gives_the_emulated_answer_in_the_calibrated_device_too(results):
    profile(results)
    recorded = profiles.recorded(Accelerator(type="h100"))
    answer = Sample("c", "r", 1, "*", "b", "w", "accelerators_fed", 6.0, "count", "", "",
                    {"accelerator": {"type": "h100", "model": "resnet50"}, "batch_size": 400},
                    {"profile": recorded})  # fmt: skip
    assert profiles.side_by_side(answer) == " (MLPerf's) = 1.9 NVIDIA H200 (calibrated 2026-11-28, 69 ms per 400)"
    other_batch = Sample(**{**answer.__dict__, "params": {**answer.params, "batch_size": 200}})
    assert profiles.side_by_side(other_batch).endswith("(calibrated 2026-11-28, 35 ms per 200, scaled from 400)")
    unet3d = Accelerator(type="b200", model="unet3d")  # no profile of its model: no side by side
    no_model = Sample(**{**answer.__dict__, "params": {"accelerator": unet3d.model_dump(), "batch_size": 7},
                         "metadata": {"profile": profiles.recorded(unet3d)}})  # fmt: skip
    assert profiles.side_by_side(no_model) == ""


def test_a_gpu_count_a_host_is_known_to_lack_is_refused_before_any_host_is_touched(tmp_path, results):
    (results / "facts").mkdir(parents=True)
    (results / "facts" / "gpu01.json").write_text(json.dumps({"gpus": [{"name": "NVIDIA H200"}] * 2}))
    profile(results, host="gpu02")  # one GPU, by its calibration profile
    four = spec(tmp_path, {"type": "gpu"}, batch=64, gpus=[1, 2, 4])
    assert [r.workload.data for r in campaign.expand(four)][:2] == ["synthetic", "real"]  # each count's two legs
    with pytest.raises(UserError, match=r"^workload w asks for 4 GPU\(s\) per host; gpu01 has 2 \(its facts or"):
        gpus.check_hosts(four, ["gpu01"], results)
    with pytest.raises(UserError, match=r"gpu02 has 1"):
        gpus.check_hosts(spec(tmp_path, {"type": "gpu"}, batch=64, gpus=2), ["gpu02"], results)
    gpus.check_hosts(spec(tmp_path, {"type": "gpu"}, batch=64, gpus=2), ["gpu01", "gpu03"], results)  # gpu03: unknown


def test_calibrate_times_the_tiny_model_on_the_cpu_and_its_samples_become_a_profile(tmp_path, results):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "iolab.kinds.calibrate.host", "--out", str(out), "--batch", "resnet50:2"]
    done = subprocess.run([*argv, "--scale", "tiny", "--warmup", "0", "--steps", "1", "--blocks", "2"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "calibrate: resnet50 at batch 2: " in done.stdout
    assert host_live.tool_status(done.stdout)["source"] == "calibrate"  # its time to go, for the live line
    parsed = calibrate_parser.parse(out)
    figures = {m.metric: m.value for m in parsed.measurements}
    assert figures["step_time"] > 0 and figures["samples_per_s"] == pytest.approx(2 / figures["step_time"])
    document = parsed.metadata["calibration"]
    assert document["device"]["device"] == "cpu" and document["entries"][0]["compile"] is False
    store = ResultStore(results, calibration.CAMPAIGN)
    run = (calibration.CAMPAIGN, "r1", 1, "gpu09", "device", "resnet50-b2")
    store.add_samples(
        [Sample(*run, m.metric, m.value, m.unit, "", "", {}, parsed.metadata) for m in parsed.measurements]
    )
    [path] = calibration.write_profiles(store, 1, results)
    written = profiles.load_profile(path)
    assert written["host"] == "gpu09" and written["device"]["name"] == document["device"]["name"]
    assert [(e["model"], e["batch"], e["scale"]) for e in written["entries"]] == [("resnet50", 2, "tiny")]
    assert profiles.latest("resnet50", results) == path and profiles.latest("unet3d", results) is None


@pytest.mark.parametrize(("flag", "message"), [("--batch", "retinanet:x"), ("--blocks", "1")])
def test_the_calibrate_program_refuses_bad_flags_in_one_line(tmp_path, flag, message):
    argv = [sys.executable, "-m", "iolab.kinds.calibrate.host", "--out", str(tmp_path), "--batch", "resnet50:2"]
    done = subprocess.run([*argv, flag, message], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_bench_calibrate_refuses_unknown_models_and_batch_sizes_before_any_host_is_touched():
    with pytest.raises(UserError, match="--models resnet51: choose among resnet50, retinanet, unet3d"):
        calibration.batches_for(["resnet51"], None)
    with pytest.raises(UserError, match="--batch-sizes 'a': give whole numbers"):
        calibration.run(None, "resnet50", "a", None, "tiny")
    assert calibration.batches_for(["resnet50", "unet3d"], None) == [("resnet50", 400), ("unet3d", 7)]


def test_a_stored_answer_keeps_the_profile_its_search_recorded_and_its_at_least(results):
    """Issue 44, 3: the equivalent is the profile's of the search's time (path and SHA-256 recorded), not the newest
    one's when the report is drawn; an answer at its ceiling stays "≥" in the other device."""
    from unit.test_accelerators_fed import HOSTS, fed_of, searched  # a search's samples, as that module makes them

    first = profile(results, steps={400: 0.0692})
    samples = searched("fast", lambda n, k: dict.fromkeys(HOSTS, 99.0), 100e6, ceiling=8)
    profile(results, steps={400: 0.2}, at="2026-11-29T09:00:00Z", name="newer")
    assert profiles.latest("resnet50") != first
    [row] = [r for r in report.verdict_rows(samples) if r["backend"] == "fast"]
    # 8 × 0.0692 / 0.224 (MLPerf's h100), at batch 32 both scaled from 400
    assert row["label"].startswith(
        "≥ 8 h100 (the workload's ceiling) (MLPerf's) ≥ 2.5 NVIDIA H200 (calibrated 2026-11-28"
    )
    kept = fed_of(samples).metadata["profile"]
    assert (kept["profile"], kept["sha256"]) == (str(first), hashlib.sha256(first.read_bytes()).hexdigest())


BAD_ENTRIES = {
    "a step time of 0": {"model": "resnet50", "batch": 400, "step_s": 0},
    "a negative step time": {"model": "resnet50", "batch": 400, "step_s": -0.07},
    "NaN": {"model": "resnet50", "batch": 400, "step_s": float("nan")},
    "Infinity": {"model": "resnet50", "batch": 400, "step_s": float("inf")},
    "1e300": {"model": "resnet50", "batch": 400, "step_s": 1e300},
    "no model": {"batch": 400, "step_s": 0.07},
}


@pytest.mark.parametrize("case", [*BAD_ENTRIES, "no device"])
def test_a_profile_with_an_impossible_step_time_or_no_model_or_device_is_refused_in_one_line(tmp_path, results, case):
    """Issue 44, 14: each refused before anything runs, naming the file and the fix (json.dumps writes NaN and
    Infinity as JavaScript's literals, which json.loads reads back)."""
    path = profile(results)
    document = json.loads(path.read_text())
    if case == "no device":
        del document["device"]
    else:
        document["entries"] = [BAD_ENTRIES[case]]
    path.write_text(json.dumps(document))
    with pytest.raises(UserError) as caught:
        spec(tmp_path, {"type": "calibrated", "profile": str(path)})
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "./lab bench.calibrate" in message, message
    assert ("device" if case == "no device" else "model" if case == "no model" else "step_s") in message
    with pytest.raises(UserError, match=re.escape(str(path))):  # latest refuses it too, never passing it over
        profiles.latest("resnet50")


@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO"])
def test_a_profile_that_is_no_regular_file_is_refused_at_once(tmp_path, kind):
    """Issue 44, 14: /dev/zero read without bound and a FIFO hung (in a child with a memory cap and a deadline)."""
    path = Path("/dev/zero")
    if kind == "a FIFO":
        path = tmp_path / "fifo.json"
        os.mkfifo(path)
    code = (
        "import sys, resource; from pathlib import Path; from iolab.campaign import profiles\n"
        "from iolab.errors import UserError\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "try: profiles.load_profile(Path(sys.argv[1]))\n"
        "except UserError as exc: print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-500:]
    assert done.stdout.strip() == f"accelerator.profile {path} is not a regular file; pass profile: FILE with a " \
        "profile bench.calibrate wrote"  # fmt: skip


def test_bench_calibrate_reads_a_campaigns_batches_before_the_profile_it_names_exists(tmp_path, results):
    """Issue 44, 5: a campaign's `profile: latest` is what bench.calibrate makes: its batches are read without it."""
    path = tmp_path / "f.yml"
    workload = {"type": "pytorch", "accelerator": {"type": "calibrated", "model": "unet3d"}, "reader": "npz"}
    path.write_text(
        json.dumps(
            {
                "name": "f",
                "backends": [{"name": "t", "type": "tmpfs", "size": "64MiB"}],
                "dataset": {"kind": "unet3d", "files": 8, "seed": 1},
                "workloads": [{**workload, "name": "w", "batch_size": [3, 5]}],
            }
        )
    )
    with pytest.raises(UserError, match="no profile of unet3d"):  # a campaign run still needs it
        campaign.load(path)
    assert calibration.batches_for(["unet3d"], None, calibration.read_campaign(path)) == [("unet3d", 3), ("unet3d", 5)]


@pytest.mark.skipif(Path("/proc/driver/nvidia/gpus").is_dir(), reason="this machine has an NVIDIA GPU")
def test_bench_calibrate_with_no_flags_refuses_a_host_without_a_gpu_naming_scale_tiny(results):
    """Issue 44, 4: full-size models on a CPU take hours; refused before any host is touched (this machine: its
    driver lists no GPU; another host: its facts say none)."""
    from iolab.run.cli import lab

    with pytest.raises(UserError, match=r"^localhost has no GPU, .* pass --scale tiny --batch-sizes 2"):
        calibration.run(lab(None, None), "", "", None, "auto")
    (results / "facts").mkdir(parents=True)
    (results / "facts" / "gpu01.json").write_text(json.dumps({"gpus": []}))
    assert gpus.host_gpus({}, "gpu01", results) == 0 and gpus.host_gpus({}, "gpu02", results) is None


def test_the_calibrations_time_to_go_comes_from_its_first_steps_and_reaches_the_live_line():
    """Issue 44, 4: the progress said "about 5 s to go" for hours; the program guesses from the steps it timed."""
    from iolab.kinds.calibrate.host import Eta

    said: list[str] = []
    now = [0.0]
    eta = Eta(pairs=3, steps_per_pair=10, say=said.append, clock=lambda: now[0])
    eta.step(2.0)  # the first step of the first pair: 2 s a step, 20 s a pair, three pairs
    assert said == ["iolab-calibrate: eta_s=58.0"]
    eta.step(1.0)  # within the second: not said again
    now[0] = 1.0
    eta.step(1.5)  # 1.5 s a step so far: 15 s a pair, 10.5 s of this one left and two more
    assert said[-1] == "iolab-calibrate: eta_s=40.5" and len(said) == 2
    for _ in range(7):
        eta.step(1.5)
    eta.pair_ended()  # the first pair took 15 s: the two left, 15 s each
    assert eta.seconds() == 30.0
    assert host_live.tool_status("\n".join(said)) == {"source": "calibrate", "eta_s": 40.5}
    watch = live.Watch(None, ["gpu01", "gpu02"], {})  # type: ignore[arg-type]
    watch.figures = {"gpu01": {"cores": 1.0, "eta_s": 40.5}, "gpu02": {"cores": 1.0, "eta_s": 130.0}}
    assert watch.text().endswith("(2 of 2 hosts), this run about 2 min 10 s to go")
