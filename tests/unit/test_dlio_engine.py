"""engine: dlio: DLIO's workload file from iolab's workload, the host's part of it, mpirun's argv, DLIO's results."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from iolab.errors import UserError
from iolab.host.dataset.gen import gen
from iolab.host.dataset.manifest import Entry, Manifest
from iolab.kinds.dlio import host as host_dlio
from iolab.kinds.dlio import parser as parser
from iolab.kinds.pytorch.workload import PytorchWorkload
from iolab.kinds.registry import parser_for
from iolab.parsers import ParseError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "dlio_output" / "retinanet-1host-2ranks"


def workload(**keys) -> PytorchWorkload:
    base = {
        "name": "d",
        "type": "pytorch",
        "reader": "pil",
        "engine": "dlio",
        "accelerator": {"type": "b200", "model": "retinanet"},
        "batch_size": 24,
        "workers": 8,
        "accelerators": 2,
    }
    return PytorchWorkload.model_validate(base | keys)


def test_the_engine_picks_dlio_s_role_and_parser_and_its_samples_say_so():
    dlio, own = workload(), workload(engine="iolab")
    assert dlio.tool == "dlio" and own.tool == "pytorch"
    assert parser_for(dlio.tool) is parser.parse
    assert dlio.params()["engine"] == "dlio" and "engine" not in own.params()
    variables = dlio.role_vars("/mnt/t")
    assert variables["bench_dlio_target"] == "/mnt/t" and variables["bench_dlio_ranks"] == 2
    assert "bench_pytorch_options" not in variables


def test_a_dry_run_names_the_program_each_engine_runs_on_the_hosts():
    """--dry-run said `python -m iolab.host.loader.…` of every kind without a line of its own, DLIO's MPI job too: it
    names the module the kind's host call runs (the kind's TOOL), and for DLIO how its mpirun job runs."""
    from iolab.kinds.dlio import workload as dlio_kind
    from iolab.kinds.pytorch import workload as pytorch_kind

    def first_line(w: PytorchWorkload) -> str:
        return w.dry_run({"run_role": f"bench_{w.tool}", **w.role_vars("/mnt/t")})[0]

    assert f"(python -m {dlio_kind.TOOL}: the first host's runs mpirun over every host" in first_line(workload())
    assert f"(python -m {pytorch_kind.TOOL}, under iolab.host.hostrun)" in first_line(workload(engine="iolab"))
    assert "iolab.host.loader.…" not in first_line(workload()) + first_line(workload(engine="iolab"))


def test_dlio_runs_untraced_unless_the_workload_asks_and_its_samples_say_which():
    untraced, traced = workload(), workload(dlio_trace=True)
    assert untraced.params()["dlio_trace"] is False and traced.params()["dlio_trace"] is True
    assert untraced.role_vars("/t")["bench_dlio_trace"] is False and traced.role_vars("/t")["bench_dlio_trace"]
    assert "traced" in traced.describe() and "traced" not in untraced.describe()
    assert "dlio_trace" not in workload(engine="iolab").params()  # iolab's own samples carry what they did
    with pytest.raises(ValueError, match="dlio_trace turns DLIO's own tracing on: set engine: dlio"):
        workload(engine="iolab", dlio_trace=True)


def test_an_mlperf_workload_s_dlio_prefetches_as_mlperf_s_own_files_have_it():
    """MLPerf's files set no prefetch_size (DLIO's 2, the most its CLOSED division allows, ceil(2 / 8) = 1 batch
    per reader thread); iolab's own 2 per thread would be prefetch_size 16 for retinanet's 8 threads."""
    mlperf = workload(mlperf="retinanet", workers=8)
    assert mlperf.dlio_file()["reader"]["prefetch_size"] == 2 and mlperf.dlio_file()["reader"]["read_threads"] == 8
    assert mlperf.params()["prefetch_factor"] == 1  # what DLIO ran, in its samples
    assert workload(workers=8).dlio_file()["reader"]["prefetch_size"] == 16
    assert workload(workers=8).params()["prefetch_factor"] == 2


def test_dlio_s_workload_file_says_what_the_workload_does():
    config = workload(epochs=3, steps=5, prefetch_factor=4, seed=7, reseed=True).dlio_file(repetition=2)
    assert config["reader"] == {
        "data_loader": "pytorch",
        "batch_size": 24,
        "read_threads": 8,
        "prefetch_size": 32,  # DLIO's is the rank's: 4 batches for each of 8 threads, as torch's prefetch_factor 4
        "file_shuffle": "seed",
        "sample_shuffle": "seed",
    }
    # MLPerf Storage v3.0's retinanet on B200: 0.04755 s per batch of 24; a new seed per repetition.
    assert config["train"] == {"epochs": 3, "computation_time": 0.04755, "seed": 8, "total_training_steps": 5}
    assert config["workflow"] == {"generate_data": False, "train": True, "checkpoint": False, "evaluation": False}
    assert config["model"] == "retinanet" and config["dataset"] == {}
    # unet3d as MLPerf Storage's files run it: a 2 MiB array per sample reaches the training loop, not the volume.
    unet3d = workload(reader="npz", accelerator={"type": "b200", "model": "unet3d"}).dlio_file()
    assert unet3d["dataset"] == {"record_length_resize": 2097152}
    assert workload(shuffle=False).dlio_file()["reader"]["file_shuffle"] == "off"
    assert workload(mlperf="retinanet").dlio_file()["metric"] == {"au": 0.85}


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ({"accelerator": None}, "engine dlio emulates accelerators"),
        ({"reader": "packed"}, "reader npz (unet3d) or pil (JPEG), not packed"),
        ({"search": "accelerators"}, "search is iolab's loader's"),
        ({"decode": False}, "drop decode: false"),
        ({"engine": "iolab", "dlio_requirement": "x.whl"}, "dlio_requirement is what engine dlio installs"),
    ],
)
def test_what_dlio_cannot_run_is_refused_in_one_line(keys, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        workload(**keys)


def test_each_host_completes_the_file_from_its_own_copy_of_a_jpeg_data_set(tmp_path):
    root, run = tmp_path / "ds", tmp_path / "run"
    gen(root, files=6, seed=3, classes=2, workers=1, kind="retinanet")
    host_dlio.write_config(run, root, workload().dlio_file())
    written = json.loads((run / "dlio" / "workload" / "iolab.yaml").read_text())
    manifest = Manifest.load(root)
    view = Path(written["dataset"].pop("data_folder"))
    assert written["dataset"] == {
        "format": "jpeg",
        "num_files_train": 6,
        "num_samples_per_file": 1,
        "num_subfolders_train": 2,
        "record_length": manifest.total_bytes // 6,
        "record_length_stdev": 0,
        "record_length_bytes": manifest.total_bytes // 6,  # MLCommons' DLIO's spelling
        "record_length_bytes_stdev": 0,
    }
    assert written["output"] == {"folder": str(run), "log_file": "dlio.log"}
    # DLIO lists train/*/*.jpeg and valid/: each name is a link to the data set's own file.
    links = sorted(view.glob("train/*/*.jpeg"))
    assert [link.resolve() for link in links] == sorted((root / e.path).resolve() for e in manifest.entries)
    assert (view / "valid").is_dir() and not list((view / "valid").iterdir())
    assert json.loads((run / "dlio" / "iolab.json").read_text())["dlio_version"] == "2.0.0"


def test_the_prepare_checks_the_data_set_and_the_first_hosts_key_before_it_makes_anything(tmp_path, capsys):
    """The run's prepare (both routes: iolab.kinds.dlio.workload.host_call) refuses in one line, leaving no run
    directory, a host without its data set, and a first host without mpirun's key; then it writes the host's DLIO
    file."""
    root, run, key = tmp_path / "ds", tmp_path / "run", tmp_path / "id_mpi"
    argv = ["prepare", "--host", "gpu01", "--dir", str(run), "--root", str(root), "--key", str(key)]
    argv += ["--workload", json.dumps(workload().dlio_file())]
    assert host_dlio.main(argv) == 1
    assert f"{root}/manifest.jsonl missing on gpu01" in capsys.readouterr().err
    gen(root, files=2, seed=3, classes=1, workers=1, kind="retinanet")
    assert host_dlio.main(argv) == 1 and not run.exists()
    err = capsys.readouterr().err.strip()
    assert err == (
        f"gpu01 has no {key}, the ssh key mpirun would start the other hosts' ranks with: set bench_dlio_ssh_key to "
        "a key on gpu01 that the other hosts accept"
    )
    key.write_text("")
    assert host_dlio.main(argv) == 0
    assert json.loads((run / "dlio" / "workload" / "iolab.yaml").read_text())["dataset"]["num_files_train"] == 2
    assert "started_at" in json.loads(capsys.readouterr().out.splitlines()[-1])


def test_an_npz_data_set_is_read_where_it_lies(tmp_path):
    root, run = tmp_path / "ds", tmp_path / "run"
    (root / "train" / "n000").mkdir(parents=True)
    entries = tuple(Entry(f"train/n000/{i:08d}.npz", 1000 + i, "0" * 64, 0) for i in range(3))
    Manifest(files=3, seed=1, classes=1, generator="t", entries=entries).write(root)
    unet3d = workload(reader="npz", accelerator={"type": "b200", "model": "unet3d"})
    config = host_dlio.workload_file(run, root, unet3d.dlio_file())
    view = Path(config["dataset"]["data_folder"])
    assert (view / "train").resolve() == (root / "train").resolve()
    assert config["dataset"]["format"] == "npz" and config["dataset"]["record_length"] == 1001
    assert config["dataset"]["record_length_resize"] == 2097152  # the controller's, kept
    # And in the spelling of MLCommons' DLIO (mlpstorage's), which reads record_length_bytes*.
    assert config["dataset"]["record_length_bytes"] == 1001 and config["dataset"]["record_length_bytes_stdev"] == 0
    assert config["dataset"]["record_length_bytes_resize"] == 2097152


def test_mpirun_runs_one_context_per_host_each_with_its_own_workload_file():
    hosts = [{"addr": "10.0.0.1", "ranks": 2, "dir": "/r/a"}, {"addr": "10.0.0.2", "ranks": 2, "dir": "/r/b"}]
    argv = host_dlio.mpirun_argv(hosts, ["ssh", "-i", "/k"], "/v/python", root=True, trace=False)
    assert argv[:6] == ["mpirun", "--bind-to", "none", "--mca", "plm_rsh_agent", "ssh -i /k"]
    assert "--allow-run-as-root" in argv
    # Untraced, as MLPerf Storage's submitters run DLIO (pydftracer traces when DFTRACER_ENABLE is unset).
    assert argv[6:8] == ["-x", "DFTRACER_ENABLE=0"]
    traced = host_dlio.mpirun_argv(hosts, ["ssh"], "/v/python", root=True, trace=True)
    assert traced[traced.index("-x") + 1] == "DFTRACER_ENABLE=1"
    first, second = " ".join(argv).split(" : ")
    for context, host, run in ((first, "10.0.0.1", "/r/a"), (second, "10.0.0.2", "/r/b")):
        assert f"-np 2 --host {host}:2 --wdir {run} /v/python -m dlio_benchmark.main --config-dir {run}/dlio" in context
        assert context.endswith(f"workload=iolab hydra.run.dir={run}/hydra")


def test_an_ssh_argument_that_open_mpi_would_split_is_refused():
    hosts = [{"addr": "10.0.0.1", "ranks": 1, "dir": "/r/a"}]
    with pytest.raises(SystemExit, match="an empty argument or one with a blank"):
        host_dlio.mpirun_argv(hosts, ["ssh", "-i", "/my keys/id"], "/v/python", root=False, trace=False)


def test_another_host_s_wait_fails_in_one_line_when_no_rank_starts(tmp_path, capsys):
    assert host_dlio.wait(tmp_path, ranks=2, appear=0.3, poll=0.05) == 1
    assert "no DLIO rank started on this host within 0.3 s" in capsys.readouterr().out
    for rank in (2, 3):
        (tmp_path / f"{rank}_output.json").write_text("{}")
    assert host_dlio.wait(tmp_path, ranks=2, appear=0.3, poll=0.05) == 0


def test_a_host_s_figures_are_its_ranks_counted_as_dlio_counts_them():
    """Real DLIO output (tests/fixtures/dlio_output/README.md): one host of two ranks, so the host's figures are
    the job's, which DLIO's summary.json states itself."""
    parsed = parser.parse(FIXTURE)
    values = {m.metric: m.value for m in parsed.measurements}
    summary = json.loads((FIXTURE / "summary.json").read_text())["metric"]
    assert values["au"] == pytest.approx(summary["train_au_mean_percentage"], rel=1e-12)
    assert values["samples_per_s"] == pytest.approx(summary["train_throughput_mean_samples_per_second"], rel=1e-12)
    # DLIO's "I/O Throughput" is its samples/s times record_length, in MiB/s.
    assert values["read_bw"] == pytest.approx(summary["train_io_mean_MB_per_second"] * 2**20, rel=1e-9)
    assert {m.unit for m in parsed.measurements} == {"%", "samples/s", "B/s"}
    assert parsed.metadata["engine"] == "dlio" and parsed.metadata["dlio_version"] == "2.0.0"
    assert [r["rank"] for r in parsed.metadata["ranks"]] == [0, 1]
    assert parsed.metadata["dlio_summary"]["accelerators"] == 2


def test_a_host_without_its_ranks_results_is_a_parse_error(tmp_path):
    host = tmp_path / "h"
    shutil.copytree(FIXTURE, host)
    for path in host.glob("*_output.json"):
        path.unlink()
    with pytest.raises(ParseError, match="no DLIO rank wrote its result"):
        parser.parse(host)
    (host / "0_output.json").write_text('{"hostname": "x"}')
    with pytest.raises(ParseError, match="not a DLIO rank's result"):
        parser.parse(host)


def test_the_setup_phase_installs_a_reference_leg_once_a_command_through_ansible():
    """DLIO and kv-cache.py are installed by the campaign's setup phase (roles/iolab_host: Open MPI from the OS, DLIO
    without its dependencies, kv-cache.py from its source), not before each run: the step is Ansible's, one a
    command; two sources of one tool in a campaign are refused, as the hosts hold one at a time."""
    from iolab.campaign.model import parse
    from iolab.drive import runner, steps

    dlio = {"name": "d", "type": "mlperf", "workload": "unet3d", "accelerator": "h100", "engine": "dlio"}
    reference = {"name": "k", "type": "kvcache", "engine": "mlperf-kvcache", "kvcache_source": "/srv/kv"}
    raw = {"name": "c", "backends": [{"name": "t", "type": "tmpfs", "size": "1GiB"}], "workloads": [dlio, reference]}
    raw["dataset"] = {"kind": "unet3d", "files": 28, "seed": 1}
    variables = parse(raw, "c.yml", Path(".")).setup_vars()
    assert variables["iolab_host_dlio"] and "iolab_host_dlio_requirement" not in variables  # the role's pin
    assert variables["iolab_host_mlperf_kvcache"] and variables["iolab_host_mlperf_kvcache_source"] == "/srv/kv"
    assert variables["iolab_host_kvcache"]  # what its ranks import beside kv-cache.py
    extravars = {"iolab_python": "/py", "iolab_host_dir": "/opt/iolab", "iolab_owner": "o"}
    assert steps.calls(runner.Phase("setup.yml", variables), ["gpu01"], {"gpu01"}, extravars, {}) is None
    # DLIO alone: on a host set up, the fan-out's look for the pins (DLIO's, what it imports) and Open MPI's mpirun
    alone = parse({**raw, "workloads": [dlio]}, "c.yml", Path(".")).setup_vars()
    (look,) = steps.calls(runner.Phase("setup.yml", alone), ["gpu01"], {"gpu01"}, extravars, {}).values()
    assert look[:3] == ["/py", "-m", "iolab.host.pinned"] and look[-2:] == ["dlio-benchmark==2.0.0", "--command=mpirun"]
    assert {"mpi4py==4.1.2", "tensorflow-cpu==2.21.0"} <= set(look)
    wheel = {**alone, "iolab_host_dlio_requirement": "/srv/dlio.whl"}  # a wheel: Ansible's role looks and installs
    assert steps.calls(runner.Phase("setup.yml", wheel), ["gpu01"], {"gpu01"}, extravars, {}) is None
    assert json.loads(_pinned(["--command=mpirun", "--command=no-such-program-here"])) == ["no-such-program-here"]
    other = {**dlio, "name": "e", "dlio_requirement": "/srv/dlio.whl"}
    with pytest.raises(UserError, match="the workloads of tool dlio give different dlio_requirements"):
        parse({**raw, "workloads": [dlio, other]}, "c.yml", Path("."))


def _pinned(argv: list[str]) -> str:
    import contextlib
    import io

    from iolab.host import pinned

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        pinned.main(argv)
    return out.getvalue()
