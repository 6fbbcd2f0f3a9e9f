"""DLIO workload files that iolab must refuse in one line naming the file and the key, before anything runs
(issue 23): sweeps inside the file count towards the run limit, and values of the wrong kind are refused."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from iolab.campaign import model as campaign_mod
from iolab.errors import UserError

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "dlio"


def dlio_campaign(tmp_path: Path, changes: dict, fixture: str = "cosmoflow_h100.yaml") -> dict:
    """A campaign of one `type: dlio` entry: `fixture` with each (section, key) of `changes` set (key None: the
    section), written to tmp_path/w.yaml."""
    config = yaml.safe_load((FIXTURES / fixture).read_text())
    for (section, key), value in changes.items():
        if key is None:
            config[section] = value
        else:
            config[section][key] = value
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(config))
    return {
        "name": "dlio-refusals",
        "backends": [{"name": "m", "type": "tmpfs", "size": "1GiB"}],
        "dataset": {"kind": "cosmoflow", "files": 40},
        "workloads": [{"name": "c", "type": "dlio", "config": "w.yaml"}],
    }


def test_lists_in_a_dlio_file_count_towards_the_run_limit(tmp_path):
    raw = dlio_campaign(tmp_path, {("reader", "batch_size"): [1, 2, 3, 4], ("reader", "read_threads"): [1, 2, 3]})
    assert len(campaign_mod.parse(raw, "c.yml", tmp_path, max_runs=12).workloads) == 12
    with pytest.raises(UserError, match=r"^c\.yml: the campaign makes 12 runs .* more than 11;"):
        campaign_mod.parse(raw, "c.yml", tmp_path, max_runs=11)


@pytest.mark.parametrize("lists, length, runs", [(2, 200, "40,000"), (3, 2000, "8,000,000,000")])
def test_the_issues_sweeps_are_refused_without_making_them(tmp_path, lists, length, runs):
    """Two lists of 200 (40,000 runs) and three of 2,000: counted, never built (that ran out of memory)."""
    keys = [("reader", "batch_size"), ("reader", "read_threads"), ("train", "epochs")][:lists]
    raw = dlio_campaign(tmp_path, {key: list(range(1, length + 1)) for key in keys})
    with pytest.raises(UserError, match=f"makes {runs} runs"):
        campaign_mod.parse(raw, "c.yml", tmp_path)


@pytest.mark.parametrize(
    "section, key, value, names",
    [
        ("workflow", None, 5, "workflow: must be a mapping"),
        ("model", None, {"name": ["cosmoflow"]}, "model.name: must be a name"),
        ("model", None, ["cosmoflow"], "model: must be a name"),
        ("framework", None, ["tensorflow"], "framework: must be a name"),
        ("dataset", "record_length_bytes", [1], "dataset.record_length_bytes: must be a number"),
        ("dataset", "record_length", math.nan, "dataset.record_length: must be a number"),
        ("dataset", "num_files_train", math.inf, "dataset.num_files_train: must be a whole number"),
        ("dataset", "num_files_train", 2.7, "dataset.num_files_train: must be a whole number"),
        ("dataset", "num_files_train", True, "dataset.num_files_train: must be a whole number"),
        ("dataset", "num_files_train", "${oc.env:HOME}", r"dataset.num_files_train: .*no \$\{\.\.\.\} interpolation"),
        ("train", "computation_time", "abc", "train.computation_time: must be a number"),
        ("train", "computation_time", math.nan, "train.computation_time: must be a number"),
        ("train", "epochs", math.nan, "train.epochs: must be a whole number"),
        ("reader", "batch_size", True, "reader.batch_size: must be a whole number"),
        ("reader", "read_threads", [4, "many"], "reader.read_threads: must be a whole number"),
        ("reader", "api_token", "s3cr3t-value", "reader.api_token: iolab cannot honour this DLIO key"),
    ],
)
def test_a_value_of_the_wrong_kind_is_one_line_naming_the_file_and_key(tmp_path, section, key, value, names):
    raw = dlio_campaign(tmp_path, {(section, key): value})
    with pytest.raises(UserError) as info:
        campaign_mod.parse(raw, "c.yml", tmp_path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"c.yml: workloads[0].config: {tmp_path / 'w.yaml'}: ")
    assert re.search(names, message), message
    assert "s3cr3t" not in message  # a refused key is named, its value never echoed


@pytest.mark.parametrize("value", ["abc", 2.5, True])
def test_a_checkpoint_count_of_the_wrong_kind_names_its_key(tmp_path, value):
    raw = dlio_campaign(tmp_path, {("checkpoint", "num_checkpoints_write"): value}, "mlperf-v2-llama3_8b.yaml")
    with pytest.raises(UserError, match=r"checkpoint\.num_checkpoints_write: must be a whole number of at least 1$"):
        campaign_mod.parse(raw, "c.yml", tmp_path)


def test_the_workload_file_option_refuses_the_same_way(tmp_path):
    raw = dlio_campaign(tmp_path, {("workflow", None): 5})
    campaign = tmp_path / "c.yml"
    campaign.write_text(yaml.safe_dump({k: v for k, v in raw.items() if k != "dataset"}))
    with pytest.raises(UserError, match=r"w\.yaml: workflow: must be a mapping of keys"):
        campaign_mod.load(campaign, workload_file=tmp_path / "w.yaml")
