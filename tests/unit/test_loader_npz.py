"""unet3d's read path as MLPerf's DLIO has it, MLPerf's counting, and the page cache dropped after each read (issue 24).

Real files throughout: NPZ samples rendered by the project's own generator
(iolab.host.dataset.samples.render, at a few MB instead of unet3d's 146 MB), read by the
real Samples through a real DataLoader with forked workers, and the real loader command.
Eviction is checked with util-linux's fincore (mincore(2)) on a file of this host's disk
(/var/tmp): tmpfs keeps its pages whatever posix_fadvise says.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the loader needs torch")
np = pytest.importorskip("numpy")

from iolab.host.dataset.manifest import Entry, Manifest  # noqa: E402
from iolab.host.dataset.pack import pack  # noqa: E402
from iolab.host.dataset.samples import render  # noqa: E402
from iolab.host.loader.decode import NPZ_SIDE, read_exact  # noqa: E402
from iolab.host.loader.readers import Samples, collate  # noqa: E402
from iolab.kinds.pytorch import parser as parser  # noqa: E402
from iolab.shared.shapes import GENERATORS  # noqa: E402
from support import two_workers  # noqa: E402

SIDE2 = NPZ_SIDE * NPZ_SIDE
# Bytes of each sample: most above DLIO's 2 MiB resize, one below it (its sample is padded with zeros).
SIZES = [3 << 20, (5 << 20) // 2, 1 << 20, 3 << 20, 4 << 20, 3 << 20, (7 << 20) // 2, 3 << 20, 3 << 20, 3 << 20]
FILES = 20


def npz_dataset(root: Path, files: int = FILES) -> Manifest:
    """`files` unet3d samples of a few MB each, written as the generator writes them, with their manifest."""
    entries = []
    for i in range(files):
        data = render("unet3d", 7, i, SIZES[i % len(SIZES)], i % 4)
        path = f"train/n{i % 4:03d}/{i:08d}.npz"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        entries.append(Entry(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest(), label=i % 4))
    manifest = Manifest(files=files, seed=7, classes=4, generator=GENERATORS["unet3d"], entries=tuple(entries))
    manifest.write(root)
    return manifest


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("npz") / "ds"
    npz_dataset(root)
    return root


def expected_sample(root: Path, entry: Entry) -> np.ndarray:
    """What DLIO's reader hands on, here: x's first NPZ_SIDE² bytes, zeros after a shorter x."""
    with np.load(root / entry.path) as arrays:
        head = arrays["x"].reshape(-1)[:SIDE2]
    return np.concatenate([head, np.zeros(SIDE2 - head.size, np.uint8)]).reshape(NPZ_SIDE, NPZ_SIDE)


def test_an_npz_sample_is_dlios_resized_sample_of_its_x(dataset):
    """The sample is record_length_bytes_resize (NPZ_SIDE² bytes) of the file's x, not the file's bytes; the
    bytes counted as read are the file's."""
    manifest = Manifest.load(dataset)
    samples = Samples(dataset, "npz")
    for i in (0, 2):  # 2: smaller than the resize, padded
        tensor, label, nbytes = samples[i]
        assert tensor.shape == (NPZ_SIDE, NPZ_SIDE) and tensor.dtype == torch.uint8
        assert np.array_equal(tensor.numpy(), expected_sample(dataset, manifest.entries[i]))
        assert (label, nbytes) == (manifest.entries[i].label, manifest.entries[i].size)
    batch = collate([samples[i] for i in range(3)])
    assert batch["images"].shape == (3, NPZ_SIDE, NPZ_SIDE)
    assert batch["bytes"] == sum(e.size for e in manifest.entries[:3])


def test_npz_batches_are_built_in_the_arena_and_never_copied(dataset):
    """Workers write each batch's samples into their slot of the arena (7 × NPZ_SIDE², 14.7 MB, whatever the
    files' size); no batch goes through fresh shared memory; every sample arrives once per epoch, intact."""
    import ctypes

    manifest = Manifest.load(dataset)
    expected = {hashlib.sha256(expected_sample(dataset, e).tobytes()).hexdigest(): e.label for e in manifest.entries}
    samples = Samples(dataset, "npz")
    samples.prepare(workers=2, batch_size=7, prefetch_factor=2)
    assert samples.arena is not None and samples.arena.slot == 7 * SIDE2
    low = ctypes.addressof(ctypes.c_char.from_buffer(samples.arena.memory))
    high = low + len(samples.arena.memory)
    batches = two_workers(samples)
    seen = []
    for _ in range(2):
        for batch in batches:
            assert low <= batch["images"].data_ptr() < high  # in the arena, not in fresh shared memory
            for sample, label in zip(batch["images"], batch["labels"].tolist(), strict=True):
                digest = hashlib.sha256(sample.numpy().tobytes()).hexdigest()
                assert expected[digest] == label
                seen.append(digest)
    assert sorted(seen) == sorted(
        hashlib.sha256(expected_sample(dataset, e).tobytes()).hexdigest() for e in manifest.entries for _ in (0, 1)
    )
    assert samples.batches_copied == 0


def fincore_pages(path: Path) -> int:
    """Pages of `path` in the page cache, as mincore(2) says (util-linux's fincore)."""
    out = subprocess.run(
        ["fincore", "--noheadings", "--raw", "--output", "PAGES", str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.split()[0])


@pytest.fixture()
def on_disk():
    """A directory on this host's disk (/var/tmp), not tmpfs: where the page cache holds what was read."""
    if not shutil.which("fincore"):
        pytest.skip("fincore (util-linux) is not installed")
    root = Path(os.environ.get("IOLAB_TEST_DISK", "/var/tmp")) / f"iolab-npz-evict-{os.getpid()}"
    root.mkdir(parents=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_each_reader_drops_what_it_read_from_the_page_cache(on_disk):
    """With evict, a file read (npz, pil bytes, a packed sample's range) leaves none of its pages cached; without,
    the read leaves them all: each epoch then reads storage again, as MLPerf's data sets larger than memory do."""
    manifest = npz_dataset(on_disk, files=4)
    pack(on_disk, "packed")
    path = on_disk / manifest.entries[0].path
    pages = -(-manifest.entries[0].size // os.sysconf("SC_PAGE_SIZE"))
    for evict, cached in ((False, pages), (True, 0)):
        os.sync()
        read_exact(str(path), 1, evict=True)  # nothing of it cached before each case
        assert fincore_pages(path) == 0
        Samples(on_disk, "npz", evict=evict)[0]
        assert fincore_pages(path) == cached, evict
        Samples(on_disk, "pil", decode=False, evict=True)[0]
        assert fincore_pages(path) == 0
    packed = on_disk / "packed" / "data.bin"
    read_exact(str(packed), 1, evict=True)
    assert fincore_pages(packed) == 0
    Samples(on_disk, "packed", decode=False, evict=False)[1]
    assert fincore_pages(packed) >= manifest.entries[1].size // os.sysconf("SC_PAGE_SIZE")
    Samples(on_disk, "packed", decode=False, evict=True)[1]
    assert fincore_pages(packed) <= 2  # the sample's range dropped: at most its edge pages, shared, stay


def test_a_loader_run_reads_npz_through_the_arena_counts_steps_and_evicts(dataset, tmp_path):
    """The loader command, unet3d's way (npz, decode, emulated accelerator), 2 ranks × 2 epochs: no batch copied,
    eviction on and recorded, steps_per_rank the measured steps (each epoch's first out)."""
    done = subprocess.run(
        [sys.executable, "-m", "iolab.kinds.pytorch.host", "--root", str(dataset), "--out", str(tmp_path),
         "--reader", "npz", "--workers", "2", "--batch-size", "3", "--epochs", "2", "--accelerators", "2",
         "--accelerator", "emulated", "--compute-per-batch", "0.01"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads((tmp_path / "loader.json").read_text())
    assert [r["batches_copied"] for r in document["ranks"]] == [0, 0]
    assert all(r["page_cache_evicted"] for r in document["ranks"])
    assert sum(r[7] for rank in document["ranks"] for r in rank["records"]) == 2 * Manifest.load(dataset).total_bytes
    parsed = parser.parse(tmp_path)
    # 20 files, 2 ranks: 10 each, batches of 3 → 4 steps per epoch, 3 measured; 2 epochs.
    assert parsed.metadata["steps_per_rank"] == 6 and parsed.metadata["page_cache_evicted"] is True


COLUMNS = ["epoch", "step", "requested_at", "ready_at", "compute_s", "sync_s", "samples", "bytes"]


def test_mlperf_counting_au_leaves_out_each_epochs_first_step_rates_count_every_sample(tmp_path):
    """Rank 0, two epochs: a 5 s start-up, then a 2 s refill at epoch 1's first step. AU (DLIO's statscounter):
    compute of the steps after each epoch's first over their span; samples/s and read_bw: every sample over the
    whole run (the first steps' included); the steady rate is its own metric; steps_per_rank the fewest."""
    epoch0 = [
        [0, 0, 100.0, 105.0, 0.5, 0, 10, 1000],  # start-up: 5 s for the first batch
        [0, 1, 105.5, 105.6, 0.5, 0, 10, 1000],
        [0, 2, 106.1, 106.2, 0.5, 0, 10, 1000],
    ]
    epoch1 = [
        [1, 0, 106.7, 108.7, 0.5, 0, 10, 1000],  # the next epoch's first batch: 2 s
        [1, 1, 109.2, 109.3, 0.5, 0, 10, 1000],
    ]
    ranks = [
        {
            "rank": 0,
            "records": epoch0 + epoch1,
            "epochs": [{"epoch": 0, "started_at": 99.8, "ended_at": 106.7}, {"epoch": 1, "started_at": 106.7,
                                                                              "ended_at": 109.8}],
            "window": {"start": 105.5, "end": 109.8},
            "cpu_seconds": 0.86,
        },
        {"rank": 1, "records": epoch0, "window": {"start": 105.5, "end": 106.7}, "cpu_seconds": 0.6},
    ]  # fmt: skip
    document = {"kind": parser.KIND, "columns": COLUMNS, "config": {"accelerator": "emulated"}, "ranks": ranks}
    (tmp_path / "loader.json").write_text(json.dumps(document))
    parsed = parser.parse(tmp_path)
    values = {m.metric: m.value for m in parsed.measurements if m.metric != "epoch_time"}
    # Rank 0: 1.5 s of compute in 1.2 + 0.6 s; rank 1: 1.0 in 1.2 (the run's first only: 2.0 in 4.3, 46.5 %).
    assert values["au"] == pytest.approx(100 * (1.5 / 1.8 + 1.0 / 1.2) / 2)
    # Delivered: rank 0, 50 samples from its first epoch's start (99.8) to its last step's end (109.8);
    # rank 1 (no epochs recorded), 30 from its first request (100.0) to 106.7.
    assert values["samples_per_s"] == pytest.approx(50 / 10.0 + 30 / 6.7)
    assert values["read_bw"] == pytest.approx(5000 / 10.0 + 3000 / 6.7)
    assert values["steady_samples_per_s"] == pytest.approx(30 / 1.8 + 20 / 1.2)
    assert values["batch_latency_p99"] == pytest.approx(0.1)  # the measured steps' waits
    assert values["cpu_cores"] == pytest.approx(0.86 / 4.3 + 0.6 / 1.2)
    assert parsed.metadata["steps_per_rank"] == 2  # rank 1's 2 measured steps, the fewest
    assert [r["steps"] for r in parsed.metadata["ranks"]] == [3, 2]


def test_an_epoch_of_one_step_measures_nothing(tmp_path):
    """Each epoch's first step is left out: epochs of one batch leave no step to measure, said in one line."""
    records = [[epoch, 0, 100.0 + epoch, 100.5 + epoch, 0.4, 0, 10, 1000] for epoch in range(3)]
    rank = {"rank": 0, "records": records, "window": {"start": 100.9, "end": 102.9}, "cpu_seconds": 0.1}
    (tmp_path / "loader.json").write_text(
        json.dumps({"kind": parser.KIND, "columns": COLUMNS, "config": {}, "ranks": [rank]})
    )
    with pytest.raises(parser.ParseError, match="at least 2 in an epoch"):
        parser.parse(tmp_path)


def test_the_tensorflow_loader_drops_its_shards_from_the_page_cache(on_disk, tmp_path):
    """tf.data reads the TFRecord shards in its own threads: with evict (the default) the rank drops its shards
    before each epoch and after the last, so none of their pages is left cached after a run."""
    pytest.importorskip("tensorflow", reason="tensorflow workloads need tensorflow-cpu (pip install 'iolab[tf]')")
    npz_dataset(on_disk, files=4)
    pack(on_disk, "tfrecord", samples_per_shard=2)
    os.sync()
    shards = sorted((on_disk / "tfrecord").glob("*.tfrecord"))
    assert len(shards) == 2 and all(fincore_pages(p) > 0 for p in shards)  # just written: cached
    done = subprocess.run(
        [sys.executable, "-m", "iolab.kinds.tensorflow.host", "--root", str(on_disk), "--out", str(tmp_path),
         "--no-decode", "--batch-size", "1", "--epochs", "2", "--private-threads", "1"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert [fincore_pages(p) for p in shards] == [0, 0]
    assert parser.parse(tmp_path).metadata["page_cache_evicted"] is True
