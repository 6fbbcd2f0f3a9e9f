"""DLIO workload files that iolab must refuse in one line naming the file and the key, before anything runs
(issue 23): sweeps inside the file count towards the run limit, and values of the wrong kind are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from iolab import campaign as campaign_mod
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
