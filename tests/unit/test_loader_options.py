"""A workload's loader settings reach the loader as one object (`--options JSON`), the way its bench role passes them.

The schema (iolab.kinds.pytorch.workload / tensorflow) and the loader's flags (iolab.kinds.pytorch.host /
kinds.tensorflow.host) are the two ends; the role in between only forwards the object. These tests hold the ends
together.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.campaign import model as campaign
from iolab.host.loader import common
from iolab.kinds.pytorch import host as torch_loader
from iolab.kinds.tensorflow import host as tf_loader
from support import ROOT

LOADERS = {"pytorch": torch_loader, "tensorflow": tf_loader}


def _workload(kind: str, **keys):
    raw = {
        "name": "o",
        "backends": [{"name": "mem", "type": "tmpfs", "size": "1GiB"}],
        "dataset": {"kind": "imagenet-like", "files": 100, "seed": 1},
        "workloads": [{"name": "w", "type": kind, **keys}],
    }
    return campaign.parse(raw, "test.yml", Path(".")).workloads[0]


def _parsed(kind: str, options: dict, *after: str) -> dict:
    argv = common.options_argv(["--root", "r", "--out", "o", "--options", json.dumps(options), *after])
    return vars(LOADERS[kind].parser().parse_args(argv))


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_the_schemas_defaults_are_the_loaders(kind):
    """One default per setting: the schema's, which the role always sends, equals the loader's own (used by hand)."""
    options = _workload(kind).role_vars("/t")[f"bench_{kind}_options"]
    defaults = vars(LOADERS[kind].parser().parse_args(["--root", "r", "--out", "o"]))
    assert {k: defaults[k] for k in options} == options


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_every_setting_a_campaign_gives_reaches_the_loader(kind):
    keys = {"batch_size": 8, "decode": False, "shuffle": False, "epochs": 3, "steps": 5, "seed": 9}
    keys |= {"syscall_profile": True, "accelerator": {"type": "h100"}, "accelerators": 2}
    keys |= {"reader": "pil", "workers": 3, "prefetch_factor": 4} if kind == "pytorch" else {"private_threads": 6}
    options = _workload(kind, **keys).role_vars("/t")[f"bench_{kind}_options"]
    parsed = _parsed(kind, options)
    assert {k: parsed[k] for k in options} == options
    assert parsed["syscall_profile"] is True and parsed["decode"] is False and parsed["accelerator"] == "emulated"
    assert parsed["compute_per_batch"] > 0  # the accelerator's time for a batch of 8


def test_a_flag_after_the_object_wins_and_null_keeps_the_default():
    parsed = _parsed("pytorch", {"workers": 3, "steps": None}, "--workers", "5")
    assert parsed["workers"] == 5 and parsed["steps"] == 0


def test_a_setting_the_loader_does_not_know_is_refused_in_one_line():
    argv = ["--root", "r", "--out", "o", "--options", json.dumps({"wrokers": 3})]
    done = subprocess.run(
        [sys.executable, "-m", "iolab.kinds.pytorch.host", *argv],
        env={"PYTHONPATH": str(ROOT / "pyfiles"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "unrecognized arguments: --wrokers 3" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("text, said", [("{", "--options: not JSON"), ("[1]", "a JSON object")])
def test_options_that_are_not_an_object_are_refused(text, said):
    with pytest.raises(SystemExit, match=said):
        common.options_argv(["--options", text])
