"""reader dali where NVIDIA DALI cannot run: one line before the run, from the loader and from the role.

This machine has no GPU. What runs here is real: the import that fails, the loader's
launcher, the bench_pytorch role's preflight through ansible-playbook. Each of those commands
blocks `nvidia.dali` in sys.modules (then importing it raises ImportError, as on a host
without it) so that the tests mean the same thing whether DALI is installed or not.
The DALI pipeline itself (iolab.host.loader.dali_reader.DaliBatches) runs with the "cpu"
decoder where DALI imports (`./lab test` installs it: the `dali` extra).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.campaign import expand, parse
from iolab.host.dataset.gen import gen
from support import ROOT

# `python -c BLOCKED -m MODULE ARGS` runs MODULE as `python -m` does, with nvidia.dali blocked.
BLOCKED = (
    "import runpy, sys; sys.modules['nvidia.dali'] = None; sys.argv = sys.argv[2:]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


def run_module(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED, "-m", *argv], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_check_says_what_is_missing_and_the_fix_in_one_line():
    done = run_module("iolab.host.loader.dali_reader")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"reader dali needs NVIDIA DALI, which {sys.executable} cannot import")
    assert "pip install nvidia-dali-cuda120" in done.stderr and "choose reader pil" in done.stderr


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ds")
    gen(root, files=6, seed=2, classes=2, workers=1)
    return root


def test_the_loader_refuses_before_starting_a_rank(dataset, tmp_path):
    done = run_module(
        "iolab.host.loader.torch_loader",
        "--root",
        str(dataset),
        "--out",
        str(tmp_path / "run"),
        "--reader",
        "dali",
        "--workers",
        "1",
        "--batch-size",
        "2",
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("reader dali needs NVIDIA DALI")
    assert not (tmp_path / "run").exists() or not list((tmp_path / "run").iterdir())


def test_the_loader_refuses_dali_without_decoding(dataset, tmp_path):
    done = run_module(
        "iolab.host.loader.torch_loader",
        "--root",
        str(dataset),
        "--out",
        str(tmp_path / "run"),
        "--reader",
        "dali",
        "--no-decode",
    )
    assert done.returncode == 2
    assert done.stderr.startswith("reader dali decodes the images: use --decode (decode: true)")


def test_a_campaign_may_ask_for_reader_dali():
    campaign = parse(
        {
            "name": "dali",
            "repetitions": 1,
            "order": "as-written",
            "backends": [{"name": "t", "type": "tmpfs", "size": "64MiB"}],
            "dataset": {"kind": "imagenet-like", "files": 10, "seed": 1},
            "workloads": [{"name": "train", "type": "pytorch", "reader": ["packed", "dali"]}],
        },
        "c.yml",
        ROOT,
    )
    runs = expand(campaign)
    assert [run.workload.reader for run in runs] == ["packed", "dali"]
    assert runs[1].workload.role_vars("/mnt/t")["bench_pytorch_options"]["reader"] == "dali"


def test_the_role_refuses_on_a_host_without_dali_before_the_run(dataset, tmp_path):
    """bench_pytorch's preflight on localhost, through ansible-playbook, with the host's Python lacking DALI."""
    python = tmp_path / "python-without-dali"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -c "{BLOCKED}" "$@"\n')
    python.chmod(0o755)
    play = tmp_path / "play.yml"
    play.write_text(
        json.dumps(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "environment": {"PYTHONPATH": str(ROOT / "pyfiles")},
                    "tasks": [{"ansible.builtin.include_role": {"name": "bench_pytorch", "tasks_from": "preflight"}}],
                }
            ]
        )
    )
    variables = {
        "iolab_python": str(python),
        "bench_pytorch_options": {"reader": "dali"},
        "bench_pytorch_dataset": str(dataset),
        "bench_pytorch_target": str(tmp_path),
        "bench_pytorch_run_dir": str(tmp_path / "run"),
        "ansible_python_interpreter": "/usr/bin/python3",
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            json.dumps(variables),
            str(play),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "localhost: reader dali needs NVIDIA DALI, which" in done.stdout
    assert not (tmp_path / "run").exists(), "the refusal comes before the run directory is made"


# ---------------------------------------------------------------- with DALI (decoder "cpu")
# Run where NVIDIA DALI imports (pip install nvidia-dali-cuda120; no GPU needed for decoder cpu);
# skipped elsewhere. The "mixed" (GPU) decoder is not tested here.


def test_dali_batches_are_the_manifest_samples_decoded_like_the_other_readers(dataset):
    pytest.importorskip("nvidia.dali", reason="needs NVIDIA DALI (pip install nvidia-dali-cuda120)")
    import numpy as np

    from iolab.host.dataset.manifest import Manifest
    from iolab.host.loader.dali_reader import DaliBatches
    from iolab.host.loader.readers import Samples

    entries = Manifest.load(dataset).entries
    batches = DaliBatches(
        dataset, batch_size=4, threads=1, decoder="cpu", device_id=None, shard=0, shards=1, shuffle=False, seed=1
    )
    for epoch in range(2):  # the second epoch starts where the first did (the last batch is partial)
        got = list(batches.epoch(epoch))
        assert [b["labels"].tolist() for b in got] == [[e.label for e in entries[:4]], [e.label for e in entries[4:]]]
        assert [b["bytes"] for b in got] == [sum(e.size for e in entries[:4]), sum(e.size for e in entries[4:])]
        assert [tuple(b["images"].shape) for b in got] == [(4, 224, 224, 3), (2, 224, 224, 3)]
    assert batches.samples_read == 2 * len(entries)
    reference = Samples(dataset, "cv2-imdecode")
    first = next(batches.epoch(2))["images"].numpy().astype(float)
    expected = np.stack([reference[i][0].numpy() for i in range(4)]).astype(float)

    def blocks(images):  # 16×16 block means: the resampling filters differ, the picture must not
        return images.reshape(len(images), 14, 16, 14, 16, 3).mean(axis=(2, 4))

    # The same centre square at 224 (the whole image squeezed to 224×224 would be about 1.6 apart here).
    assert np.abs(blocks(first) - blocks(expected)).mean() < 1.0


def test_the_loader_runs_reader_dali_with_the_cpu_decoder(dataset, tmp_path):
    pytest.importorskip("nvidia.dali", reason="needs NVIDIA DALI (pip install nvidia-dali-cuda120)")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "pyfiles"), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.host.loader.torch_loader",
            "--root",
            str(dataset),
            "--out",
            str(tmp_path),
            "--reader",
            "dali",
            "--dali-decoder",
            "cpu",
            "--workers",
            "1",
            "--batch-size",
            "2",
            "--accelerators",
            "2",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "loader.json").read_text())
    assert result["dataset"]["reader"] == "dali"
    assert sum(epoch["samples"] for rank in result["ranks"] for epoch in rank["epochs"]) == 6  # 3 a rank
