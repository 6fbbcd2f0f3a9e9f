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

from iolab.campaign.model import expand, parse
from iolab.errors import UserError
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
        "iolab.kinds.pytorch.host",
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
        "iolab.kinds.pytorch.host",
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


def test_dali_input_tfrecord_asks_the_dataset_phase_for_the_pack_and_needs_reader_dali():
    def campaign(**workload):
        data = {
            "name": "dali",
            "backends": [{"name": "t", "type": "tmpfs", "size": "64MiB"}],
            "dataset": {"kind": "imagenet-like", "files": 10, "seed": 1},
            "workloads": [{"name": "train", "type": "pytorch", **workload}],
        }
        return parse(data, "c.yml", ROOT)

    spec = campaign(reader="dali", dali_input=["files", "tfrecord"])
    files, records = (run.workload for run in expand(spec))
    assert (files.formats, records.formats) == (set(), {"tfrecord"})
    assert "tfrecord" in spec.dataset_formats
    assert records.role_vars("/mnt/t")["bench_pytorch_options"]["dali_input"] == "tfrecord"
    assert (files.params()["dali_input"], records.params()["dali_input"]) == ("files", "tfrecord")
    assert "dali_input" not in campaign(reader="packed").workloads[0].params()  # other readers' settings as before
    with pytest.raises(UserError, match="dali_input is what reader dali reads: set reader: dali or drop dali_input"):
        campaign(reader="pil", dali_input="tfrecord")


def preflight(
    tmp_path: Path, dataset: Path, python: Path | str, options: dict, packs: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """bench_pytorch's preflight on localhost, through ansible-playbook (`packs`: what the workload's formats ask)."""
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
        "bench_pytorch_options": options,
        "bench_pytorch_packs": list(packs),
        "bench_pytorch_dataset": str(dataset),
        "bench_pytorch_target": str(tmp_path),
        "bench_pytorch_run_dir": str(tmp_path / "run"),
        "ansible_python_interpreter": "/usr/bin/python3",
    }
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,", "-c", "local"]
    return subprocess.run(
        [*argv, "-e", json.dumps(variables), str(play)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_the_role_refuses_on_a_host_without_dali_before_the_run(dataset, tmp_path):
    """The host's Python lacks DALI."""
    python = tmp_path / "python-without-dali"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -c "{BLOCKED}" "$@"\n')
    python.chmod(0o755)
    done = preflight(tmp_path, dataset, python, {"reader": "dali"})
    assert done.returncode != 0
    assert "localhost: reader dali needs NVIDIA DALI, which" in done.stdout
    assert not (tmp_path / "run").exists(), "the refusal comes before the run directory is made"


def test_the_role_refuses_dali_input_tfrecord_without_the_pack(dataset, tmp_path):
    done = preflight(tmp_path, dataset, sys.executable, {"reader": "dali", "dali_input": "tfrecord"}, ("tfrecord",))
    assert done.returncode != 0
    assert f"{dataset}/tfrecord/pack.json missing on localhost" in " ".join(done.stdout.split())
    assert not (tmp_path / "run").exists()


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


def test_dali_reads_the_tfrecord_pack_as_it_reads_the_files(dataset, tmp_path):
    """dali_input tfrecord: the same samples, labels, bytes and pixels as from the files, over two shards; the
    index of each shard is the one DALI's own tfrecord2idx writes (run where DALI installed it)."""
    pytest.importorskip("nvidia.dali", reason="needs NVIDIA DALI (pip install nvidia-dali-cuda120)")
    import shutil

    from iolab.host.dataset.pack import pack
    from iolab.host.dataset.tfrecord import write_index
    from iolab.host.loader.dali_reader import DaliBatches

    root = tmp_path / "ds"
    shutil.copytree(dataset, root)
    info = pack(root, "tfrecord", samples_per_shard=4)
    assert len(info.files) == 2

    def batches(source: str) -> list[dict]:
        reader = DaliBatches(
            root,
            batch_size=3,
            threads=1,
            decoder="cpu",
            device_id=None,
            shard=0,
            shards=1,
            shuffle=False,
            seed=1,
            source=source,
        )
        return list(reader.epoch(0))

    files, records = batches("files"), batches("tfrecord")
    assert [b["labels"].tolist() for b in records] == [b["labels"].tolist() for b in files]
    assert [b["bytes"] for b in records] == [b["bytes"] for b in files]
    assert all((r["images"].numpy() == f["images"].numpy()).all() for r, f in zip(records, files, strict=True))

    tool = Path(sys.executable).with_name("tfrecord2idx")
    if tool.exists():
        for name in info.files:
            ours, theirs = tmp_path / f"{name}.ours", tmp_path / f"{name}.theirs"
            write_index(root / "tfrecord" / name, ours)
            subprocess.run([str(tool), str(root / "tfrecord" / name), str(theirs)], check=True, timeout=120)
            assert ours.read_text() == theirs.read_text()


@pytest.mark.parametrize("source", ["files", "tfrecord"])
def test_the_loader_runs_reader_dali_with_the_cpu_decoder(dataset, tmp_path, source):
    pytest.importorskip("nvidia.dali", reason="needs NVIDIA DALI (pip install nvidia-dali-cuda120)")
    import shutil

    from iolab.host.dataset.pack import pack

    root = tmp_path / "ds"
    shutil.copytree(dataset, root)
    if source == "tfrecord":
        pack(root, "tfrecord", samples_per_shard=4)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "pyfiles"), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.kinds.pytorch.host",
            "--root",
            str(root),
            "--out",
            str(tmp_path),
            "--reader",
            "dali",
            "--dali-input",
            source,
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
    assert result["dataset"]["reader"] == "dali" and result["config"]["dali_input"] == source
    assert sum(epoch["samples"] for rank in result["ranks"] for epoch in rank["epochs"]) == 6  # 3 a rank
