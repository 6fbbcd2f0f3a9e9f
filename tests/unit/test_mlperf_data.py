"""The data sets of MLPerf's unet3d and cosmoflow, generated for real (iolab.host.dataset.samples), and the npz reader.

unet3d's samples are ≈146.6 MB each, so the tests that write files generate two or three of
them on the test's temporary directory; the size distribution is checked on the drawn sizes.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import statistics

import numpy as np
import pytest

from iolab.errors import UserError
from iolab.host.dataset import samples
from iolab.host.dataset.__main__ import main as dataset_main
from iolab.host.dataset.gen import gen
from iolab.host.dataset.manifest import Manifest
from iolab.host.dataset.pack import PackInfo
from iolab.host.dataset.tfrecord import decode_example, read_records
from iolab.host.loader import dataset_state
from iolab.shared import shapes


@pytest.mark.parametrize("kind", [k for k in shapes.SHAPES if k not in shapes.JPEG_KINDS])
def test_sizes_follow_the_workloads_mean_and_spread(kind):
    mean, stdev, _ = shapes.SHAPES[kind]
    sizes = samples.target_sizes(kind, 20_000, seed=3)
    assert abs(statistics.fmean(sizes) - mean) < 0.01 * mean
    # A normal cut at ±2σ keeps about 88 % of the standard deviation.
    assert 0.85 * stdev < statistics.pstdev(sizes) < 0.9 * stdev
    assert min(sizes) >= mean - 2 * stdev and max(sizes) <= mean + 2 * stdev
    assert sizes == samples.target_sizes(kind, 20_000, seed=3) != samples.target_sizes(kind, 20_000, seed=4)


def test_an_npz_sample_is_the_target_size_and_loads_with_numpy():
    data = samples.render("unet3d", 1, 5, 1_000_000, label=3)
    assert len(data) == 1_000_000
    with np.load(io.BytesIO(data)) as arrays:
        assert arrays["x"].dtype == np.uint8 and int(arrays["y"][0]) == 3
    assert data == samples.render("unet3d", 1, 5, 1_000_000, label=3)  # same seed and index, same bytes
    assert data != samples.render("unet3d", 1, 6, 1_000_000, label=3)


def test_unet3d_data_set_is_npz_files_the_probe_and_a_second_kind_tell_apart(tmp_path):
    root = tmp_path / "u"
    manifest = gen(root, files=2, seed=1, classes=2, workers=2, kind="unet3d")
    assert manifest.generator == shapes.GENERATORS["unet3d"]
    for entry in manifest.entries:
        data = (root / entry.path).read_bytes()
        assert entry.path.endswith(".npz") and len(data) == entry.size
        assert hashlib.sha256(data).hexdigest() == entry.sha256
    assert sum(e.size for e in manifest.entries) == sum(samples.target_sizes("unet3d", 2, 1))
    assert gen(root, files=2, seed=1, classes=2, kind="unet3d").hash == manifest.hash  # kept, not redone
    with pytest.raises(UserError, match="made by iolab.host.dataset.samples/1:unet3d"):
        gen(root, files=2, seed=1, classes=2)
    assert dataset_state.state(root, 2, 1, 2, [], "unet3d")["state"] == "ready"
    assert dataset_state.state(root, 2, 1, 2, [], "imagenet-like")["state"] == "other"


def test_retinanet_data_set_is_jpegs_of_mlperfs_one_size(tmp_path):
    """MLPerf Storage v3.0's retinanet files give record_length_bytes 322,957 and no stdev: every image that size."""
    from PIL import Image

    root = tmp_path / "r"
    manifest = gen(root, files=3, seed=1, classes=2, workers=1, kind="retinanet")
    assert manifest.generator == shapes.GENERATORS["retinanet"]
    mean = shapes.SHAPES["retinanet"][0]
    for entry in manifest.entries:
        assert entry.path.endswith(".jpg") and abs(entry.size - mean) <= 0.02 * mean
        with Image.open(root / entry.path) as image:
            assert image.format == "JPEG"
    assert dataset_state.state(root, 3, 1, 2, [], "retinanet")["state"] == "ready"
    assert dataset_state.state(root, 3, 1, 2, [], "imagenet-like")["state"] == "other"


def test_cosmoflow_data_set_has_one_sample_per_tfrecord_file(tmp_path):
    root = tmp_path / "c"
    manifest = gen(root, files=6, seed=2, classes=2, kind="cosmoflow")
    info = PackInfo.load(root / "tfrecord")
    assert info.samples_per_shard == 1 and len(info.files) == 6 and info.manifest_hash == manifest.hash
    for name, entry in zip(info.files, manifest.entries, strict=True):
        (record,) = list(read_records(root / "tfrecord" / name))
        assert decode_example(record)["image/encoded"][0] == (root / entry.path).read_bytes()
    assert dataset_state.state(root, 6, 2, 2, ["tfrecord"], "cosmoflow")["state"] == "ready"
    shutil.rmtree(root / "tfrecord")  # packed again by the command line (as the rbd_snapshot role does): same layout
    assert dataset_main(["pack", str(root), "--format", "tfrecord", "--json"]) == 0
    assert PackInfo.load(root / "tfrecord").samples_per_shard == 1


def test_the_npz_reader_refuses_a_file_that_is_not_npz(tmp_path):
    """What an npz sample is (DLIO's resized sample of x) is held in test_loader_npz; here: a damaged file fails."""
    pytest.importorskip("torch", reason="the loader needs torch")
    pytest.importorskip("cv2", reason="the readers import OpenCV")
    from iolab.host.loader.readers import Samples

    root = tmp_path / "u"
    gen(root, files=2, seed=1, classes=2, kind="unet3d")
    manifest = Manifest.load(root)
    dataset = Samples(root, "npz")
    dataset[0]  # a good file reads
    broken = root / manifest.entries[0].path
    broken.write_bytes(b"\0" * manifest.entries[0].size)  # the right size, not an NPZ: decoding fails
    with pytest.raises(ValueError, match="pickled"):  # numpy's refusal: the reader never unpickles
        dataset[0]


@pytest.mark.parametrize("kind", list(shapes.SHAPES))
def test_the_probe_sizes_a_missing_data_set_by_its_kind(tmp_path, kind):
    """The dataset_gen role checks the room a data set needs (its files, then each pack) before generating it."""
    mean = shapes.SHAPES[kind][0]
    found = dataset_state.state(tmp_path / "new", 400, 1, 2, ["tfrecord"], kind)
    assert found["state"] == "missing" and found["needed_bytes"] == int(400 * mean * dataset_state.MARGIN) * 2
