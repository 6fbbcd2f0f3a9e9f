"""MLPerf Storage's training workloads as presets (`type: mlperf`), DLIO workload files (`type: dlio`,
`bench.all --workload-file`), and MLPerf's rules as validity flags.

The DLIO files are the real ones: tests/fixtures/dlio/ holds copies of dlio-benchmark's shipped
configurations and of MLPerf Storage v2's (NOTICE.txt says which and their licence).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from iolab.campaign import model as campaign_mod
from iolab.errors import UserError
from iolab.kinds.dlio import workload as dlio
from iolab.measures import validity
from iolab.measures.samples import Sample
from iolab.shared import shapes
from iolab.workloads import accelerator, mlperf
from iolab.workloads.mlperf import CHECKPOINT_MODELS
from support import plain_sample

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "dlio"
BACKENDS = [{"name": "tmpfs", "type": "tmpfs", "size": "1GiB"}]


def campaign(workloads: list[dict], dataset: dict | None = None, **top) -> campaign_mod.Campaign:
    raw = {"name": "t", "backends": BACKENDS, "workloads": workloads, **top}
    if dataset is not None:
        raw["dataset"] = dataset
    return campaign_mod.parse(raw, "t.yml", FIXTURES)


# --- presets ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", list(mlperf.PRESETS))
@pytest.mark.parametrize("kind", accelerator.EMULATED)
def test_a_preset_expands_to_its_framework_batch_and_compute_time(model, kind):
    preset = mlperf.PRESETS[model]
    workloads = [{"name": "w", "type": "mlperf", "workload": model, "accelerator": kind, "accelerators": 2}]
    dataset = {"kind": preset.dataset, "files": 10}
    if kind not in accelerator.COMPUTE_TIMES[model]:
        with pytest.raises(UserError, match=f"workloads\\[0\\].accelerator: MLPerf Storage publishes no {kind}"):
            campaign(workloads, dataset)
        return
    (workload,) = campaign(workloads, dataset).workloads
    assert workload.type == preset.framework and workload.mlperf == model and workload.reseed
    assert workload.batch_size == accelerator.reference_batch(model, kind) and workload.accelerators == 2
    assert workload.accelerator.compute_time(workload.batch_size) == accelerator.COMPUTE_TIMES[model][kind]


def test_unet3d_reads_npz_files_and_keys_of_the_kind_override_the_preset():
    (workload,) = campaign(
        [{"name": "u", "type": "mlperf", "workload": "unet3d", "batch_size": 14, "workers": 1, "steps": 3}],
        {"kind": "unet3d", "files": 8},
    ).workloads
    assert (workload.reader, workload.batch_size, workload.workers, workload.steps) == ("npz", 14, 1, 3)
    # Twice the batch, twice the compute (the figure scales with the batch, as for resnet50).
    assert workload.accelerator.compute_time(14) == pytest.approx(2 * accelerator.COMPUTE_TIMES["unet3d"]["h100"])


def test_resnet50_also_runs_as_the_pytorch_jpeg_variant():
    (workload,) = campaign(
        [{"name": "r", "type": "mlperf", "workload": "resnet50", "framework": "pytorch"}], {"files": 10}
    ).workloads
    assert workload.type == "pytorch" and workload.reader == mlperf.PYTORCH_RESNET50["reader"]
    with pytest.raises(UserError, match="framework: unet3d runs on pytorch only"):
        campaign(
            [{"name": "u", "type": "mlperf", "workload": "unet3d", "framework": "tensorflow"}],
            {"kind": "unet3d", "files": 10},
        )


@pytest.mark.parametrize(
    "workloads, dataset, message",
    [
        (
            [{"name": "u", "type": "mlperf", "workload": "unet3d"}],
            None,
            r"workloads\[0\]: MLPerf's unet3d reads a unet3d data set: add dataset: \{kind: unet3d",
        ),
        (
            [{"name": "u", "type": "mlperf", "workload": "unet3d"}],
            {"files": 4},
            "the campaign's is imagenet-like: one campaign per data set kind",
        ),
        ([{"name": "u", "type": "mlperf", "workload": "bert"}], {"files": 4}, r"workloads\[0\]\.workload: 'bert'"),
        (
            [{"name": "u", "type": "mlperf", "workload": "unet3d", "accelerator": "v100"}],
            {"kind": "unet3d", "files": 4},
            r"workloads\[0\]\.accelerator: 'v100' is not an emulated accelerator",
        ),
        (
            [{"name": "u", "type": "mlperf", "workload": "unet3d", "nonsense": 1}],
            {"kind": "unet3d", "files": 4},
            r"workloads\[0\]\.nonsense: unknown key",
        ),
    ],
)
def test_a_wrong_mlperf_workload_is_one_line_naming_the_key(workloads, dataset, message):
    with pytest.raises(UserError, match=message) as info:
        campaign(workloads, dataset)
    assert "\n" not in str(info.value)


def test_a_b200_figure_exists_only_where_mlperf_publishes_one():
    with pytest.raises(ValueError, match="publishes no b200 compute time for resnet50"):
        accelerator.Accelerator(type="b200")
    assert (
        accelerator.Accelerator(type="b200", model="unet3d").compute_time(7)
        == accelerator.COMPUTE_TIMES["unet3d"]["b200"]
    )


def test_retinanet_is_v3s_preset_on_b200_and_mi355_with_their_own_batches():
    """MLPerf Storage v3.0's retinanet: JPEGs read with PIL by 8 workers, batch 24 on B200 and 32 on MI355, AU 85 %."""
    dataset = {"kind": "retinanet", "files": 10}
    entry = {"name": "r", "type": "mlperf", "workload": "retinanet"}
    (b200,) = campaign([entry], dataset).workloads  # no accelerator named: v3.0's first, B200
    (mi355,) = campaign([{**entry, "accelerator": "mi355"}], dataset).workloads
    assert (b200.accelerator.type, b200.batch_size, b200.accelerator.compute_time(24)) == ("b200", 24, 0.04755)
    assert (mi355.batch_size, mi355.accelerator.compute_time(32)) == (32, 0.0634)
    assert (b200.reader, b200.workers, b200.decode, b200.type) == ("pil", 8, True, "pytorch")
    assert mlperf.PRESETS["retinanet"].au_threshold == 85.0
    assert mlperf.PRESETS["retinanet"].sample_bytes == shapes.SHAPES["retinanet"][0] == 322_957
    with pytest.raises(UserError, match=r"accelerator: MLPerf Storage publishes no h100 compute time for retinanet "):
        campaign([{**entry, "accelerator": "h100"}], dataset)
    with pytest.raises(ValueError, match=r"no mi355 compute time for unet3d \(it has: a100, h100, b200\)"):
        accelerator.Accelerator(type="mi355", model="unet3d")


def test_repetitions_shuffle_with_a_new_seed_each():
    (workload,) = campaign(
        [{"name": "u", "type": "mlperf", "workload": "unet3d", "seed": 10}], {"kind": "unet3d", "files": 8}
    ).workloads
    assert [workload.repetition_vars(r)["bench_pytorch_options"]["seed"] for r in (1, 2, 3)] == [10, 11, 12]
    plain = workload.model_copy(update={"reseed": False})
    assert {plain.repetition_vars(r)["bench_pytorch_options"]["seed"] for r in (1, 2, 3)} == {10}


def test_the_shipped_mlperf_campaigns_load():
    for name, kind in (("mlperf-lab", "unet3d"), ("mlperf-cosmoflow-lab", "cosmoflow")):
        spec = campaign_mod.load(ROOT / "campaigns" / f"{name}.yml")
        assert spec.dataset.kind == kind and all(w.mlperf == kind and w.lab_scale for w in spec.workloads)


# --- the reference figures -------------------------------------------------------------------------


def figure_row(constant: str) -> str:
    rows = [
        line
        for line in (ROOT / "docs" / "REFERENCE_FIGURES.md").read_text().splitlines()
        if line.startswith("|") and constant in line
    ]
    assert rows, f"docs/REFERENCE_FIGURES.md has no row naming {constant}"
    return rows[0]


@pytest.mark.parametrize(
    "model, kind", [(m, k) for m, times in accelerator.COMPUTE_TIMES.items() for k in times if m != "resnet50"]
)
def test_reference_figures_state_the_compute_times(model, kind):
    row = figure_row(f'COMPUTE_TIMES["{model}"]["{kind}"]')
    assert f"{accelerator.COMPUTE_TIMES[model][kind]:g} s" in row
    assert f"batch of {accelerator.reference_batch(model, kind)}" in row


def test_reference_figures_state_the_accelerator_memory():
    row = figure_row("workloads.accelerator.ACCELERATOR_MEMORY")
    assert " / ".join(f"{b // 10**9} GB" for b in accelerator.ACCELERATOR_MEMORY.values()) in row


@pytest.mark.parametrize("kind", list(shapes.SHAPES))
def test_reference_figures_state_the_sample_sizes(kind):
    mean, stdev, _ = shapes.SHAPES[kind]
    row = figure_row(f'shared.shapes.SHAPES["{kind}"]')
    assert f"{mean:,} B" in row and f"{stdev:,} B" in row


@pytest.mark.parametrize("model", list(mlperf.PRESETS))
def test_reference_figures_state_the_au_thresholds(model):
    assert f"{mlperf.PRESETS[model].au_threshold:g} %" in figure_row(f'workloads.mlperf.PRESETS["{model}"]')


def test_reference_figures_state_the_rules():
    assert f"{mlperf.MIN_STEPS} steps" in figure_row("workloads.mlperf.MIN_STEPS")
    assert f"{mlperf.REPETITIONS} recorded repetitions" in figure_row("workloads.mlperf.REPETITIONS")


# --- DLIO workload files ---------------------------------------------------------------------------


def mapped(name: str) -> tuple[dict, dict | None, int | None]:
    return dlio.workload(dlio.load(FIXTURES / name), Path(name).stem)


@pytest.mark.parametrize("name", ["resnet50_h100.yaml", "cosmoflow_h100.yaml", "mlperf-v2-unet3d_h100.yaml"])
def test_a_training_file_maps_onto_its_preset_with_the_files_figures(name):
    config = yaml.safe_load((FIXTURES / name).read_text())
    workload, dataset, repetitions = mapped(name)
    model = config["model"]["name"] if isinstance(config["model"], dict) else config["model"]
    assert workload["workload"] == model and repetitions is None
    seconds = config["train"]["computation_time"]
    assert accelerator.COMPUTE_TIMES[model][workload["accelerator"]] == seconds
    assert workload["batch_size"] == config["reader"]["batch_size"] and workload["epochs"] == config["train"]["epochs"]
    assert dataset["kind"] == mlperf.PRESETS[model].dataset
    assert dataset["files"] == config["dataset"]["num_files_train"] * config["dataset"]["num_samples_per_file"]


def test_a_file_with_a_time_outside_the_table_gets_a_custom_accelerator():
    config = yaml.safe_load((FIXTURES / "cosmoflow_h100.yaml").read_text())
    config["train"]["computation_time"] = 0.01
    workload, _, _ = dlio.workload(config, "c")
    assert (workload["accelerator"], workload["compute_per_batch"]) == ("custom", 0.01)


def test_llama3_checkpointing_maps_onto_a_checkpoint_workload_and_its_repetitions():
    config = yaml.safe_load((FIXTURES / "mlperf-v2-llama3_8b.yaml").read_text())
    workload, dataset, repetitions = mapped("mlperf-v2-llama3_8b.yaml")
    assert workload["type"] == "checkpoint" and workload["model"] == "llama3-8b" and dataset is None
    assert workload["ranks"] == CHECKPOINT_MODELS["llama3-8b"][1] and "writers" not in workload
    assert repetitions == config["checkpoint"]["num_checkpoints_write"]


@pytest.mark.parametrize("name", ["unet3d_h100.yaml", "unet3d_v100.yaml"])
def test_a_file_iolab_cannot_honour_is_refused_naming_the_key(name):
    """dlio-benchmark's unet3d files map as written; a checkpoint during training is refused naming the key."""
    assert mapped(name)[0]["workload"] == "unet3d"
    config = yaml.safe_load((FIXTURES / name).read_text())
    config["checkpoint"]["checkpoint_after_epoch"] = 3
    with pytest.raises(dlio.Refused, match="^checkpoint.checkpoint_after_epoch: ") as info:
        dlio.workload(config, "u")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "section, key, value",
    [
        ("dataset", "keep_files", True),
        ("reader", "transfer_size", 262144),
        ("train", "seed_change_epoch", False),
        ("dataset", "num_samples_per_file", 2),
        ("metric", "au", 0.5),
        ("reader", "sample_shuffle", "random"),
    ],
)
def test_every_key_is_mapped_checked_or_refused_never_ignored(section, key, value):
    config = yaml.safe_load((FIXTURES / "cosmoflow_h100.yaml").read_text())
    config[section][key] = value
    with pytest.raises(dlio.Refused, match=f"^{section}.{key}: "):
        dlio.workload(config, "c")


def test_every_shipped_dlio_file_maps_or_is_refused_in_one_line():
    """Each fixture, and dlio-benchmark's whole configs/workload/ where the package is installed."""
    files = sorted(FIXTURES.glob("*.yaml"))
    try:
        import dlio_benchmark

        files += sorted((Path(dlio_benchmark.__file__).parent / "configs" / "workload").glob("*.yaml"))
    except ImportError:
        pass
    for path in files:
        try:
            workload, _, _ = dlio.workload(dlio.load(path), "w")
        except dlio.Refused as exc:
            assert "\n" not in str(exc) and re.match(r"^[a-z_]+(\.[a-z_]+)?: ", str(exc)), (path, exc)
            continue
        if workload["type"] == "mlperf":
            mlperf.expand(workload)


def test_a_campaign_runs_a_dlio_file_with_its_own_overrides():
    spec = campaign(
        [{"name": "c", "type": "dlio", "config": "cosmoflow_h100.yaml", "lab_scale": True, "epochs": 1}],
        {"kind": "cosmoflow", "files": 40},
    )
    (workload,) = spec.workloads
    assert (workload.type, workload.mlperf, workload.lab_scale, workload.epochs) == ("tensorflow", "cosmoflow", True, 1)
    ckpt = campaign(
        [{"name": "k", "type": "dlio", "config": "mlperf-v2-llama3_8b.yaml", "scale": 0.001}], repetitions=10
    )
    assert ckpt.workloads[0].model == "llama3-8b"
    # MLPerf's process count is the whole job's: spread over the hosts, not that many on each (issue 23)
    assert (ckpt.workloads[0].ranks, ckpt.workloads[0].role_vars("/t")["bench_checkpoint_ranks"]) == (8, 8)
    assert "8 ranks spread over the hosts" in ckpt.workloads[0].describe()
    with pytest.raises(UserError, match=r"workloads\[0\]\.config: .*set the campaign's repetitions: 10"):
        campaign([{"name": "k", "type": "dlio", "config": "mlperf-v2-llama3_8b.yaml", "scale": 0.001}])
    (unet3d,) = campaign(
        [{"name": "u", "type": "dlio", "config": "unet3d_h100.yaml"}], {"kind": "unet3d", "files": 4}
    ).workloads
    assert "fires once, after the last epoch's reads, in DLIO: iolab leaves it out" in unet3d.describe()


def test_workload_file_replaces_the_campaigns_workload_and_data_set(tmp_path):
    spec = campaign_mod.load(ROOT / "campaigns" / "quick.yml", workload_file=FIXTURES / "resnet50_h100.yaml")
    (workload,) = spec.workloads
    assert spec.name == "quick-resnet50-h100" and workload.mlperf == "resnet50" and workload.type == "tensorflow"
    assert spec.dataset.files == 1024 * 1251
    changed = tmp_path / "unet3d_early.yaml"
    changed.write_text(
        (FIXTURES / "unet3d_h100.yaml").read_text().replace("checkpoint_after_epoch: 5", "checkpoint_after_epoch: 1")
    )
    with pytest.raises(UserError, match="unet3d_early.yaml: checkpoint.checkpoint_after_epoch: "):
        campaign_mod.load(ROOT / "campaigns" / "quick.yml", workload_file=changed)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (2 << 20))
    with pytest.raises(UserError, match="big.yaml"):  # read with the bounds of a campaign file
        campaign_mod.load(ROOT / "campaigns" / "quick.yml", workload_file=big)


# --- MLPerf's rules on results ------------------------------------------------------------------------


def sample(run: str, rep: int, metric: str, value: float, unit: str, memory: int, held: int, **params) -> Sample:
    params = {"mlperf": "unet3d", "batch_size": 7, "accelerators": 1, **params}
    metadata = {"host": {"memory_bytes": memory}, "dataset_samples": held}
    return plain_sample(
        run_id=run, repetition=rep, metric=metric, value=value, unit=unit, params=params, metadata=metadata
    )


def runs(count: int, au: float, held: int, **params) -> list[Sample]:
    out = []
    for rep in range(1, count + 1):
        out += [
            sample(f"r{rep}", rep, "samples_per_s", 10.0, "samples/s", 1 << 30, held, **params),
            sample(f"r{rep}", rep, "au", au, "%", 1 << 30, held, **params),
        ]
    return out


def test_a_run_that_keeps_every_mlperf_rule_is_mlperf_rules_followed():
    needed = mlperf.required_samples("unet3d", 7, 1, [1 << 30])
    rows = validity.annotate(runs(5, 95.0, needed, warmup=True, reseed=True))
    assert all(r["mlperf_rules_followed"] and r["valid"] for r in rows)


def test_each_broken_rule_is_a_flag_and_mlperf_rules_followed_false():
    needed = mlperf.required_samples("unet3d", 7, 1, [1 << 30])
    assert needed == max(-(-5 * (1 << 30) // shapes.SHAPES["unet3d"][0]), 500 * 7)
    rows = validity.annotate(runs(3, 80.0, needed - 1, lab_scale=True))
    flags = set(rows[0]["flags"]) | set(rows[1]["flags"])
    assert flags == {
        validity.MLPERF_LAB_SCALE,
        validity.MLPERF_DATASET_SIZE,
        validity.MLPERF_REPETITIONS,
        validity.MLPERF_WARMUP,
        validity.MLPERF_SEED,
        validity.MLPERF_AU,
    }
    assert not any(r["mlperf_rules_followed"] for r in rows)
    assert all(r["valid"] for r in rows)  # still comparable with each other: MLPerf's flags only


def test_the_loader_takes_every_presets_settings():
    """A preset's settings reach its loader as the role passes them (--options JSON), and the loader takes them all."""
    from iolab.host.loader import common
    from iolab.kinds.pytorch import host as torch_loader
    from iolab.kinds.tensorflow import host as tf_loader

    loaders = {"pytorch": torch_loader, "tensorflow": tf_loader}
    for name, preset in mlperf.PRESETS.items():
        entry = {"name": "p", "type": "mlperf", "workload": name}
        (workload,) = campaign([entry], {"kind": preset.dataset, "files": 8}).workloads
        options = workload.role_vars("/t")[f"bench_{preset.framework}_options"]
        argv = common.options_argv(["--root", "r", "--out", "o", "--options", json.dumps(options)])
        parsed = vars(loaders[preset.framework].parser().parse_args(argv))
        assert {k: parsed[k] for k in options} == options, name


def test_files_auto_takes_mlperfs_size_for_the_selected_hosts_ram():
    ram = [4 << 30, 8 << 30]
    workloads = [{"name": "u", "type": "mlperf", "workload": "unet3d", "accelerators": [1, 4]}]
    raw = {"name": "t", "backends": BACKENDS, "workloads": workloads, "dataset": {"kind": "unet3d", "files": "auto"}}
    spec = campaign_mod.parse(raw, "t.yml", FIXTURES, memory=lambda: ram)
    assert spec.dataset.files == mlperf.required_samples("unet3d", 7, 4, ram)
    with pytest.raises(UserError, match="dataset.files: auto needs the RAM of the hosts"):
        campaign_mod.parse(raw, "t.yml", FIXTURES)
    plain = {**raw, "workloads": [{"name": "p", "type": "pytorch"}], "dataset": {"files": "auto"}}
    with pytest.raises(UserError, match="dataset.files: auto sizes the data set for MLPerf workloads"):
        campaign_mod.parse(plain, "t.yml", FIXTURES, memory=lambda: ram)


def test_host_memory_reads_each_hosts_meminfo():
    """localhost through iolab.drive.direct, against this machine's own /proc/meminfo."""
    from iolab.campaign.hosts import load_inventory
    from iolab.drive import direct

    inventory = load_inventory(ROOT / "inventory" / "local.yml")
    (memory,) = direct.memory(inventory, ["localhost"])
    total = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    assert memory == int(total.split()[1]) * 1024


def test_the_dlio_command_says_what_each_file_maps_to(capsys, tmp_path):
    refused = tmp_path / "eval.yaml"
    refused.write_text(
        (FIXTURES / "cosmoflow_h100.yaml").read_text().replace(" train: True", " train: True\n evaluation: True")
    )
    files = [str(FIXTURES / "cosmoflow_h100.yaml"), str(refused)]
    assert dlio.main(files) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cosmoflow_h100.yaml: {") and "'workload': 'cosmoflow'" in lines[0]
    assert lines[1].startswith("eval.yaml: refused: workflow.evaluation: ")
    assert dlio.main(files[:1]) == 0


def test_a_dry_run_refusing_a_small_data_set_says_it_read_no_ram_not_zero_gib():
    """Issue 37: a dry run (no host read) said the rule asks for N files "(0 GiB of RAM)"."""
    raw = {
        "name": "dry",
        "backends": [{"name": "t", "type": "tmpfs", "size": "1GiB"}],
        "dataset": {"kind": "unet3d", "files": 28, "seed": 1},
        "workloads": [{"name": "u", "type": "mlperf", "workload": "unet3d", "accelerator": "h100", "mlperf": True}],
    }
    with pytest.raises(UserError) as refused:
        campaign_mod.parse(raw, "t.yml", FIXTURES, memory=lambda: [None, None])
    said = str(refused.value)
    assert "asks for at least 7,000 on the 2 selected host(s) (whatever their RAM: a dry run reads none)" in said
    assert "GiB of RAM" not in said
