"""ImageNet-shaped data sets: generated for real in tmp_path, decoded, packed, read back.

Tolerances, and why:
- Bucket counts: within one file of files·weight/100 — `gen` gives each bucket its
  share by largest remainder, so anything more is a bug, not noise.
- Mean size: within 2% of MLPerf's 114,660 B — files land within 2% of their target
  and the targets' expected mean is 114,660 B by construction.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import random
import re
import shutil
import statistics
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest

from iolab.errors import UserError
from iolab.host.dataset import crc32c as crc
from iolab.host.dataset import histogram as hist
from iolab.host.dataset import tfrecord
from iolab.host.dataset.__main__ import main
from iolab.host.dataset.manifest import MANIFEST_NAME, Manifest

FILES = 300
SEED = 7
REFERENCE = {2048: 1, 4096: 2, 8192: 4, 16384: 8, 32768: 13, 65536: 38, 131072: 33, 262144: 1}
MLPERF_MEAN = 114_660


@pytest.fixture(scope="module")
def gen():
    pytest.importorskip("PIL", reason="gen needs Pillow (pip install 'iolab[dl]')")
    pytest.importorskip("numpy", reason="gen needs numpy (pip install 'iolab[dl]')")
    from iolab.host.dataset.gen import gen

    return gen


@pytest.fixture(scope="module")
def dataset(gen, tmp_path_factory):
    """300 files generated with 2 workers; shared by the tests that only read it."""
    root = tmp_path_factory.mktemp("imagenet") / "ds"
    calls = []
    manifest = gen(root, files=FILES, seed=SEED, workers=2, progress=lambda d, t: calls.append((d, t)))
    return root, manifest, calls


@pytest.fixture()
def small(gen, tmp_path):
    """A 40-file data set of its own, for tests that damage it."""
    root = tmp_path / "small"
    return root, gen(root, files=40, seed=1, classes=5, workers=2)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------- gen


def test_files_are_real_jpegs_in_class_folders(dataset):
    from PIL import Image

    root, manifest, _ = dataset
    assert len(manifest.entries) == FILES
    for i, entry in enumerate(manifest.entries):
        data = (root / entry.path).read_bytes()
        assert entry.path == f"train/n{i % 100:03d}/{i:08d}.jpg" and entry.label == i % 100
        assert (len(data), sha256(data)) == (entry.size, entry.sha256)
        # Starts with SOI, ends with EOI: no padding after the image.
        assert data[:2] == b"\xff\xd8" and data[-2:] == b"\xff\xd9"
        Image.open(io.BytesIO(data)).verify()
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            assert image.format == "JPEG" and image.mode == "RGB"
            width, height = image.size
            assert 8 <= min(width, height) and max(width, height) <= 2048


def test_sizes_follow_the_imagenet_histogram_and_mlperf_mean(dataset):
    root, manifest, _ = dataset
    counts = hist.histogram(root)
    assert set(counts) == set(REFERENCE)
    for bucket, weight in REFERENCE.items():
        assert abs(counts[bucket] - FILES * weight / 100) <= 1, (bucket, counts)
    mean = statistics.mean(e.size for e in manifest.entries)
    assert abs(mean / MLPERF_MEAN - 1) <= 0.02, mean
    # The modal file looks like ImageNet's most common one: a few hundred pixels a side.
    from PIL import Image

    typical = [e for e in manifest.entries if 100_000 <= e.size <= 130_000][:5]
    for entry in typical:
        with Image.open(root / entry.path) as image:
            assert 300 <= max(image.size) <= 700, image.size


def test_manifest_hash_is_the_sha256_of_the_manifest_file(dataset):
    root, manifest, _ = dataset
    raw = (root / MANIFEST_NAME).read_bytes()
    assert manifest.hash == sha256(raw) == Manifest.load(root).hash
    header = json.loads(raw.splitlines()[0])
    assert header == {
        "kind": "iolab.manifest/1",
        "files": FILES,
        "seed": SEED,
        "classes": 100,
        "generator": "iolab.host.dataset.gen/1",
    }


def test_same_seed_gives_identical_bytes_with_any_worker_count(gen, dataset, tmp_path):
    root, manifest, _ = dataset
    again = gen(tmp_path / "one-worker", files=FILES, seed=SEED, workers=1)
    assert again.hash == manifest.hash
    assert (tmp_path / "one-worker" / MANIFEST_NAME).read_bytes() == (root / MANIFEST_NAME).read_bytes()
    other = gen(tmp_path / "other-seed", files=20, seed=SEED + 1, workers=1)
    assert {e.sha256 for e in other.entries}.isdisjoint(e.sha256 for e in manifest.entries[:20])


def test_progress_reaches_the_total(dataset):
    _, _, calls = dataset
    assert calls[0] == (0, FILES) and calls[-1] == (FILES, FILES)
    done = [d for d, _ in calls]
    assert done == sorted(done) and len(calls) > 3


def test_gen_on_a_generated_root_returns_it_without_rewriting(gen, dataset):
    root, manifest, _ = dataset
    before = {e.path: os.stat(root / e.path).st_mtime_ns for e in manifest.entries}
    again = gen(root, files=FILES, seed=SEED, workers=2)
    assert again.hash == manifest.hash
    assert before == {e.path: os.stat(root / e.path).st_mtime_ns for e in manifest.entries}


def test_another_config_in_the_same_root_is_a_user_error(gen, small):
    root, manifest = small
    for kwargs in ({"seed": 2, "classes": 5}, {"seed": 1, "classes": 6}):
        with pytest.raises(UserError, match="use another directory or remove it"):
            gen(root, files=40, workers=1, **kwargs)
    with pytest.raises(UserError, match="seed=1"):
        gen(root, files=41, seed=1, classes=5, workers=1)
    assert Manifest.load(root).hash == manifest.hash


def test_replace_makes_the_new_data_set_where_iolabs_scratch_holds_another(gen, small, tmp_path):
    root, manifest = small
    scratch = tmp_path / "staging"
    shutil.copytree(root, scratch)
    other = gen(scratch, files=12, seed=2, classes=3, workers=1, replace=True)  # an s3 backend's staging copy
    assert (other.files, other.seed) == (12, 2) and Manifest.load(scratch).hash == other.hash
    assert len([p for p in scratch.rglob("*.jpg")]) == 12  # nothing of the old set is left
    assert Manifest.load(root).hash == manifest.hash


def test_a_damaged_or_foreign_root_is_a_user_error(gen, small, tmp_path):
    root, manifest = small
    victim = root / manifest.entries[3].path
    victim.write_bytes(victim.read_bytes()[:-10])
    with pytest.raises(UserError, match="missing or changed"):
        gen(root, files=40, seed=1, classes=5, workers=1)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        gen(foreign, files=10, seed=1, workers=1)


def test_an_interrupted_generation_is_resumed(gen, small, tmp_path):
    root, manifest = small
    resumed = tmp_path / "resumed"
    shutil.copytree(root, resumed)
    (resumed / MANIFEST_NAME).unlink()  # as if killed before the manifest was written
    (resumed / ".iolab-gen.json").write_text(json.dumps({"classes": 5, "files": 40, "seed": 1}))
    assert gen(resumed, files=40, seed=1, classes=5, workers=1).hash == manifest.hash
    assert not (resumed / ".iolab-gen.json").exists()


# ----------------------------------------------------------------- histogram and bssplit


def test_bssplit_of_the_generated_set_is_the_reference(dataset):
    root, _, _ = dataset
    split = hist.bssplit(hist.histogram(root))
    assert split == "2k/1:4k/2:8k/4:16k/8:32k/13:64k/38:128k/33:256k/1"
    assert hist.parse_bssplit(split) == REFERENCE


def test_histogram_walks_files_like_find_but_skips_iolab_metadata(tmp_path):
    for name, size in [("a", 0), ("b", 1), ("c", 2047), ("d/e", 2048), ("d/f/g", 4095), ("h", 1 << 20)]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * size)
    (tmp_path / MANIFEST_NAME).write_text("{}\n")
    (tmp_path / "packed").mkdir()
    (tmp_path / "packed" / "pack.json").write_text("{}")
    (tmp_path / "packed" / "data.bin").write_bytes(b"x" * 5000)
    os.symlink(tmp_path / "h", tmp_path / "link")
    assert hist.histogram(tmp_path) == {0: 1, 1: 1, 1024: 1, 2048: 2, 1 << 20: 1}


def test_bssplit_rounds_to_whole_percentages_summing_to_100():
    assert hist.bssplit({4096: 1, 8192: 1, 16384: 1}) == "4k/34:8k/33:16k/33"
    assert hist.bssplit({0: 5, 512: 1, 4096: 999}) == "4k/100"  # empty files and <0.5% left out
    assert hist.bssplit({1 << 20: 2, 3 << 20: 1, 1536: 1}) == "1536/25:1m/50:3m/25"
    rng = random.Random(0)
    for _ in range(200):
        counts = {1 << rng.randrange(9, 24): rng.randrange(1, 1000) for _ in range(rng.randrange(1, 12))}
        assert sum(hist.parse_bssplit(hist.bssplit(counts)).values()) == 100
    with pytest.raises(ValueError, match="no non-empty files"):
        hist.bssplit({0: 3})


@pytest.mark.parametrize("bad", ["2x/50:64k/50", "2k/1:4k/98", "4k/50:4k/50", "4k:8k/100", ""])
def test_parse_bssplit_rejects_what_fio_would_silently_accept(bad):
    with pytest.raises(ValueError, match=re.escape(repr(bad))):  # the message quotes the whole split
        hist.parse_bssplit(bad)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_fio_reads_with_the_sizes_the_bssplit_says(dataset, tmp_path):
    """fio parses anything; the proof it read our string right is the mean size of its reads."""
    root, _, _ = dataset
    split = hist.bssplit(hist.histogram(root))
    out = subprocess.run(
        [
            "fio",
            "--name=bssplit",
            "--ioengine=null",
            "--rw=randread",
            f"--bssplit={split}",
            "--size=64g",
            "--number_ios=20000",
            "--random_generator=tausworthe64",
            "--output-format=json",
            f"--output={tmp_path / 'fio.json'}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.returncode == 0
    read = json.loads((tmp_path / "fio.json").read_text())["jobs"][0]["read"]
    expected = sum(size * pct / 100 for size, pct in hist.parse_bssplit(split).items())
    assert read["total_ios"] == 20000
    assert abs(read["io_bytes"] / read["total_ios"] / expected - 1) < 0.03


# ----------------------------------------------------------------- crc32c and TFRecord


def test_example_encoding_matches_the_protobuf_wire_format():
    # Worked by hand from example.proto / feature.proto:
    # Example{features{feature{key:"a" value{int64_list{value:[1]}}}}}, int64 packed.
    assert tfrecord.encode_example({"a": 1}) == bytes.fromhex("0a0c0a0a0a016112051a030a0101")
    # bytes_list: Feature field 1, BytesList.value field 1
    assert tfrecord.encode_example({"b": b"xy"}) == bytes.fromhex("0a0d0a0b0a016212060a040a027879")
    features = {"image/encoded": [b"\xff\xd8jpeg", b""], "image/class/label": [3, -1, 1 << 40], "weights": [0.5, -2.0]}
    assert tfrecord.decode_example(tfrecord.encode_example(features)) == dict(sorted(features.items()))


def test_tfrecord_framing_round_trip_and_corruption(tmp_path):
    path = tmp_path / "x.tfrecord"
    records = [b"", b"abc", random.Random(1).randbytes(70_000)]
    path.write_bytes(b"".join(tfrecord.frame(r) for r in records))
    assert list(tfrecord.read_records(path)) == records
    # frame layout: length, masked crc of length, data, masked crc of data
    raw = path.read_bytes()
    assert struct.unpack("<Q", raw[16:24])[0] == 3 and raw[28:31] == b"abc"
    assert struct.unpack("<I", raw[31:35])[0] == crc.masked_crc32c(b"abc")
    for offset, message in [(30, "data checksum"), (17, "length checksum")]:
        damaged = bytearray(raw)
        damaged[offset] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(tfrecord.TFRecordError, match=message):
            list(tfrecord.read_records(path))
    path.write_bytes(raw[:-3])
    with pytest.raises(tfrecord.TFRecordError, match="truncated"):
        list(tfrecord.read_records(path))


# ----------------------------------------------------------------- packing


@pytest.fixture(scope="module")
def packs(dataset):
    from iolab.host.dataset.pack import pack

    root, manifest, _ = dataset
    return {fmt: pack(root, fmt, samples_per_shard=128) for fmt in ("packed", "wds", "tfrecord")}


def test_packed_reader_gives_every_sample_by_random_access(dataset, packs):
    from iolab.host.dataset.packed import PackedReader

    root, manifest, _ = dataset
    assert sorted(os.listdir(root / "packed")) == ["data.bin", "index.tsv", "pack.json"]
    assert os.path.getsize(root / "packed" / "data.bin") == manifest.total_bytes
    with PackedReader(root / "packed") as reader:
        assert len(reader) == FILES
        order = list(range(FILES))
        random.Random(3).shuffle(order)
        for i in order:
            entry = manifest.entries[i]
            assert sha256(reader.read(i)) == entry.sha256
            assert (reader.label(i), reader.path(i)) == (entry.label, entry.path)
        # spawned loader workers get a reader through pickle: it reopens the file
        clone = pickle.loads(pickle.dumps(reader))
        assert sha256(clone.read(FILES - 1)) == manifest.entries[-1].sha256
        clone.close()


def test_tar_shards_are_webdataset_shaped(dataset, packs):
    root, manifest, _ = dataset
    shards = sorted(p.name for p in (root / "wds").glob("*.tar"))
    assert shards == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    seen = 0
    for name in shards:
        with tarfile.open(root / "wds" / name) as tar:
            members = tar.getmembers()
            assert [m.name.split(".", 1)[1] for m in members] == ["jpg", "cls"] * (len(members) // 2)
            for jpg, cls in zip(members[0::2], members[1::2], strict=False):
                key = int(jpg.name.split(".")[0])
                assert key == seen and cls.name == f"{key:08d}.cls"
                entry = manifest.entries[key]
                assert sha256(tar.extractfile(jpg).read()) == entry.sha256
                assert int(tar.extractfile(cls).read()) == entry.label
                seen += 1
    assert seen == FILES


def test_tfrecord_shards_hold_examples_with_image_and_label(dataset, packs):
    root, manifest, _ = dataset
    shards = sorted(p.name for p in (root / "tfrecord").glob("*.tfrecord"))
    assert shards == [f"train-0000{k}-of-00003.tfrecord" for k in range(3)]
    seen = 0
    for name in shards:
        for data in tfrecord.read_records(root / "tfrecord" / name):
            example = tfrecord.decode_example(data)
            entry = manifest.entries[seen]
            assert sha256(example["image/encoded"][0]) == entry.sha256
            assert example["image/class/label"] == [entry.label]
            assert example["image/filename"] == [entry.path.encode()]
            seen += 1
    assert seen == FILES


def test_default_tfrecord_shards_hold_1251_samples(gen, tmp_path):
    from iolab.host.dataset.pack import pack
    from iolab.shared.shapes import SAMPLES_PER_SHARD

    assert SAMPLES_PER_SHARD == 1251
    root = tmp_path / "ds"
    gen(root, files=20, seed=3, workers=1)
    info = pack(root, "tfrecord")
    assert list(info.files) == ["train-00000-of-00001.tfrecord"] and info.samples_per_shard == 1251


def test_packing_again_keeps_the_pack_and_new_settings_replace_it(dataset, packs, tmp_path):
    from iolab.host.dataset.pack import pack

    root, _, _ = dataset
    out = tmp_path / "wds"
    first = pack(root, "wds", out=out, samples_per_shard=100)
    mtime = os.stat(out / "shard-000000.tar").st_mtime_ns
    assert pack(root, "wds", out=out, samples_per_shard=100) == first
    assert os.stat(out / "shard-000000.tar").st_mtime_ns == mtime
    second = pack(root, "wds", out=out, samples_per_shard=250)
    assert sorted(p.name for p in out.glob("*.tar")) == list(second.files) == ["shard-000000.tar", "shard-000001.tar"]
    # same data set, same settings: byte-identical shards
    assert (out / "shard-000000.tar").read_bytes() != b""
    again = pack(root, "wds", out=tmp_path / "wds2", samples_per_shard=250)
    assert again.files == second.files
    assert (tmp_path / "wds2" / "shard-000001.tar").read_bytes() == (out / "shard-000001.tar").read_bytes()


def test_verify_finds_a_flipped_byte_in_files_and_in_every_pack(small):
    from iolab.host.dataset.pack import pack
    from iolab.host.dataset.verify import verify

    root, manifest = small
    for fmt in ("packed", "wds", "tfrecord"):
        pack(root, fmt, samples_per_shard=16)
    result = verify(root)
    assert result.ok and result.packs == {"packed": 40, "tfrecord": 40, "wds": 40}

    def flip(path: Path, offset: int) -> None:
        data = bytearray(path.read_bytes())
        data[offset] ^= 0x10
        path.write_bytes(bytes(data))

    entry = manifest.entries[9]
    flip(root / "packed" / "data.bin", sum(e.size for e in manifest.entries[:9]) + 1000)
    flip(root / "tfrecord" / "train-00001-of-00003.tfrecord", 5000)
    jpeg = (root / entry.path).read_bytes()  # its headers are every file's; the noise is its own
    start = (root / "wds" / "shard-000000.tar").read_bytes().index(jpeg[1000:1064]) - 1000
    flip(root / "wds" / "shard-000000.tar", start + 700)
    flip(root / manifest.entries[30].path, 2000)

    problems = verify(root).problems
    assert any("packed/data.bin: sample 9" in p and "sha256" in p for p in problems), problems
    assert any("train-00001-of-00003.tfrecord" in p and "checksum" in p for p in problems), problems
    assert any("shard-000000.tar: sample 9" in p for p in problems), problems
    assert any(manifest.entries[30].path in p and "sha256" in p for p in problems), problems
    assert len(problems) == 4  # one per damaged place: a shard that stops reading is one problem

    assert main(["verify", str(root)]) == 2

    (root / "wds" / "pack.json").write_text("{")
    assert any("wds/pack.json: not a pack description" in p for p in verify(root).problems)


def test_pack_refuses_a_damaged_source(small):
    from iolab.host.dataset.pack import pack

    root, manifest = small
    victim = root / manifest.entries[5].path
    data = bytearray(victim.read_bytes())
    data[500] ^= 1
    victim.write_bytes(bytes(data))
    with pytest.raises(UserError, match="differs from the manifest"):
        pack(root, "packed")
    assert not (root / "packed" / "pack.json").exists()


# ----------------------------------------------------------------- manifest and command line


def test_manifest_errors_name_the_file_and_line(small):
    root, _ = small
    path = root / MANIFEST_NAME
    lines = path.read_text().splitlines()
    path.write_text(
        "\n".join(lines[:3] + ['{"label":0,"path":"../../etc/passwd","sha256":"x","size":1}'] + lines[4:]) + "\n"
    )
    with pytest.raises(UserError, match=r"manifest.jsonl:4: path '../../etc/passwd' must be relative"):
        Manifest.load(root)
    path.write_text("\n".join(lines[:2] + ["{not json"] + lines[3:]) + "\n")
    with pytest.raises(UserError, match=r"manifest.jsonl:3: not JSON"):
        Manifest.load(root)


def test_command_line_prints_json_for_ansible(dataset, packs, capsys):
    root, manifest, _ = dataset
    assert main(["gen", str(root), "--files", str(FILES), "--seed", str(SEED), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["generated"] is False and out["manifest_hash"] == manifest.hash

    assert main(["histogram", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bssplit"] == "2k/1:4k/2:8k/4:16k/8:32k/13:64k/38:128k/33:256k/1"
    assert sum(out["histogram"].values()) == FILES

    assert main(["histogram", str(root)]) == 0
    text = capsys.readouterr().out
    assert "64 KiB" in text and text.rstrip().endswith("bssplit 2k/1:4k/2:8k/4:16k/8:32k/13:64k/38:128k/33:256k/1")

    assert main(["pack", str(root), "--format", "packed", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["packs"]["packed"]["samples"] == FILES

    assert main(["gen", str(root), "--files", str(FILES), "--seed", "99"]) == 2
    assert "use another directory or remove it" in capsys.readouterr().err


def test_the_data_set_step_is_one_call_on_either_route_and_refuses_before_writing(tmp_path, capsys):
    """The fan-out's step (iolab.drive.steps) and roles/dataset_gen's task run the same argv (iolab.shared.calls):
    made where missing with its packs, kept the second time, refused in one line where another data set is there or
    the storage has no room — before a file is written."""
    from iolab.drive import runner, steps
    from iolab.shared import calls

    variables = {"dataset_gen_target": str(tmp_path), "dataset_gen_files": 12, "dataset_gen_seed": 1}
    variables |= {"dataset_gen_classes": 3, "dataset_gen_kind": "imagenet-like", "dataset_gen_formats": ["packed"]}
    extra = {"iolab_python": "python3", "iolab_host_dir": "/opt/iolab", "iolab_owner": "me"}
    argvs = steps.calls(runner.Phase("dataset.yml", variables), ["h1", "h2"], {"h1", "h2"}, extra, {})
    assert argvs == {h: calls.dataset("python3", h, variables) for h in ("h1", "h2")}
    root = tmp_path / "iolab-h1" / "dataset"
    assert argvs["h1"][3:5] == ["ensure", str(root)] and "--formats" in argvs["h1"]
    report = steps.calls(
        runner.Phase("dataset.yml", {**variables, "dataset_gen_report_dest": "/r"}), ["h1"], set(), extra, {}
    )
    assert report is None  # data.gen's reports go to the controller: its play

    def ensure(argv: list[str]) -> tuple[int, dict | str]:
        code = main(argv[3:])
        out, err = capsys.readouterr()
        return code, json.loads(out) if code == 0 else err.strip()

    code, made = ensure(argvs["h1"])
    assert code == 0 and made["changed"] and made["before"]["state"] == "missing"
    assert made["after"]["state"] == "ready" and made["packed"] == ["packed"] and made["generated"]["files"] == 12
    code, kept = ensure(argvs["h1"])
    assert code == 0 and not kept["changed"] and kept["before"]["state"] == "ready"
    code, said = ensure(calls.dataset("python3", "h1", {**variables, "dataset_gen_seed": 2}))
    assert code == 2 and said == (
        f"error: {root} holds another data set (files=12, seed=1, classes=3, generator=iolab.host.dataset.gen/1), not "
        "files=12, seed=2, classes=3, generator=iolab.host.dataset.gen/1 on h1; remove it or give the data set another "
        "place"
    )
    code, said = ensure(calls.dataset("python3", "h2", {**variables, "dataset_gen_files": 10**9}))
    assert code == 2 and re.fullmatch(
        r"error: the data set \(1000000000 files and packs: packed\) needs about \d+ MiB but \S+ has \d+ MiB free on "
        "h2; give the backend more space or the data set fewer files",
        said,
    ), said
    assert not (tmp_path / "iolab-h2").exists()
