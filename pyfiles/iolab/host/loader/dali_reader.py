"""reader dali: NVIDIA DALI reads, decodes and resizes the samples, in place of the DataLoader.

    python -m iolab.host.loader.dali_reader    exit 0 if NVIDIA DALI can be imported here, else 2 and one line

A DALI pipeline per rank reads the data set's files in the manifest's order, with its
labels (fn.readers.file, one shard per rank) — or, with input "tfrecord", the records of
the data set's TFRecord pack (fn.readers.tfrecord over the shards, with index files made
from the shards' framing in a temporary directory) — decodes them with fn.decoders.image on
"mixed" (nvJPEG on the GPU, the rank's device) or "cpu", resizes the shorter side to 224
and crops the centre 224×224 square, as the other readers do, and hands uint8 [B, H, W, C]
batches to the training loop through DALI's PyTorch iterator — on the GPU when decoded
there. DALI runs its own threads (the workload's `workers`) instead of DataLoader worker
processes; a batch's bytes are the encoded sizes of its samples (the files' shapes).

Written against DALI's documented API (pipeline_def, fn.readers.file, fn.readers.tfrecord, fn.decoders.image,
fn.resize, fn.crop, DataNode.shape, plugin.pytorch.DALIGenericIterator). The "cpu" decoder has run
with DALI 2.4 on a machine without a GPU (tests/unit/test_dali_reader.py, when DALI is importable);
the "mixed" (GPU) decoder has not run in iolab's tests.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from iolab.host.dataset import tfrecord
from iolab.host.dataset.manifest import Manifest
from iolab.host.dataset.pack import PackInfo

SIZE = 224
READER_NAME = "samples"  # the reader operator's name, which the iterator asks for the shard's size
DECODERS = ("auto", "mixed", "cpu")
INPUTS = ("files", "tfrecord")  # the data set's files, or its TFRecord pack (root/tfrecord)


def missing() -> str | None:
    """Why reader dali cannot run with this Python, in one line; None when NVIDIA DALI imports."""
    try:
        import nvidia.dali  # noqa: F401
    except ImportError as error:
        return (
            f"reader dali needs NVIDIA DALI, which {sys.executable} cannot import ({error}); install it "
            f"into that environment (pip install nvidia-dali-cuda120, or -cuda130, on a host with a CUDA GPU) "
            f"or choose reader pil, cv2-imread, cv2-imdecode or packed"
        )
    return None


def decoder_for(choice: str, cuda: bool) -> str:
    """The decoder's device: 'mixed' (GPU) or 'cpu'; 'auto' is mixed when a CUDA GPU is there."""
    if choice not in DECODERS:
        raise ValueError(f"unknown DALI decoder {choice!r}: choose one of {', '.join(DECODERS)}")
    if choice == "auto":
        return "mixed" if cuda else "cpu"
    return choice


class DaliBatches:
    """Rank `shard` of `shards`: the data set at `root` as batches {"images", "labels", "bytes"}, epoch by epoch."""

    def __init__(
        self,
        root: str | Path,
        *,
        batch_size: int,
        threads: int,
        decoder: str,
        device_id: int | None,
        shard: int,
        shards: int,
        shuffle: bool,
        seed: int,
        size: int = SIZE,
        source: str = "files",
    ):
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        if source not in INPUTS:
            raise ValueError(f"unknown DALI input {source!r}: choose one of {', '.join(INPUTS)}")
        self.root = Path(root)
        manifest = Manifest.load(self.root)
        self.manifest_hash = manifest.hash
        self.total_bytes = manifest.total_bytes
        self.samples = len(manifest.entries)
        self.delivered = 0
        # What ran: the decoder's device (mixed: nvJPEG on the GPU), for the run's record
        self.facts = {"reader": "dali", "decoder": decoder, "device_id": device_id, "input": source}
        shard_of: dict[str, Any] = dict(shard_id=shard, num_shards=shards, random_shuffle=shuffle, pad_last_batch=True)
        if source == "tfrecord":
            read = self._tfrecord_reader(manifest, shard_of)
        else:
            read = _files_reader(self.root, manifest, shard_of)
        self.pipeline = _pipeline(read, batch_size, threads, device_id, seed, decoder, size)
        self.iterator = DALIGenericIterator(
            [self.pipeline],
            ["images", "labels", "bytes"],
            reader_name=READER_NAME,
            last_batch_policy=LastBatchPolicy.PARTIAL,
            auto_reset=True,
        )

    def _tfrecord_reader(self, manifest: Manifest, shard_of: dict[str, Any]) -> Callable[[], Sequence[Any]]:
        """The reader of the data set's TFRecord pack (encoded image, label), with index files made from the
        shards' framing in a temporary directory that lives as long as this object."""
        from nvidia.dali import fn
        from nvidia.dali import tfrecord as tfrec

        pack = self.root / "tfrecord"
        info = PackInfo.of(self.root, "tfrecord", manifest.hash)
        self._indexes = tempfile.TemporaryDirectory(prefix="iolab-dali-idx-")  # removed with this object
        paths = [pack / name for name in info.files]
        indexes = [Path(self._indexes.name) / f"{name}.idx" for name in info.files]
        for path, index in zip(paths, indexes, strict=True):
            tfrecord.write_index(path, index)
        features = {
            "image/encoded": tfrec.FixedLenFeature([], tfrec.string, ""),
            "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
        }

        def read() -> Sequence[Any]:
            # Given features, the reader returns its outputs by feature name: a dict, which DALI's stub lacks.
            record: dict[str, Any] = fn.readers.tfrecord(  # type: ignore[assignment]
                path=[str(p) for p in paths],
                index_path=[str(i) for i in indexes],
                features=features,
                name=READER_NAME,
                **shard_of,
            )
            return record["image/encoded"], record["image/class/label"]

        return read

    def __len__(self) -> int:
        return self.samples

    @property
    def samples_read(self) -> int:
        """Samples delivered to the training loop so far (DALI's prefetched ones are not counted)."""
        return self.delivered

    def epoch(self, _: int) -> Iterator[dict[str, Any]]:
        """One pass over the shard. DALI resets only at an epoch's end: after a run that stopped
        early (steps), the next epoch goes on where that one stopped."""
        for outputs in self.iterator:
            out = outputs[0]
            labels = out["labels"].reshape(-1).long()
            self.delivered += len(labels)
            yield {"images": out["images"], "labels": labels, "bytes": int(out["bytes"].sum())}


def _files_reader(root: Path, manifest: Manifest, shard_of: dict[str, Any]) -> Callable[[], Sequence[Any]]:
    """The reader of the data set's files in the manifest's order, with their labels."""
    from nvidia.dali import fn

    files = [str(root / entry.path) for entry in manifest.entries]
    labels = [entry.label for entry in manifest.entries]

    def read() -> Sequence[Any]:
        return fn.readers.file(files=files, labels=labels, name=READER_NAME, **shard_of)

    return read


def _pipeline(
    read: Callable[[], Sequence[Any]],
    batch_size: int,
    threads: int,
    device_id: int | None,
    seed: int,
    decoder: str,
    size: int,
) -> Any:
    """The DALI pipeline: `read`'s samples decoded on `decoder`'s device, the shorter side resized to `size`, the
    centre square cropped; its outputs images, labels and each sample's encoded length."""
    from nvidia.dali import fn, pipeline_def, types

    # device_id None: a pipeline without a GPU (decoder "cpu" on a host without one). DALI documents None
    # (Pipeline's device_id); its stub of pipeline_def takes an int only.
    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id, seed=seed)  # type: ignore[arg-type]
    def read_decode_resize():
        encoded, label = read()
        nbytes = encoded.shape()  # [length] of each encoded file
        images = fn.decoders.image(encoded, device=decoder, output_type=types.RGB)
        images = fn.resize(images, resize_shorter=size)  # the shorter side to `size`, aspect kept
        images = fn.crop(images, crop=(size, size))  # the centre square (crop_pos 0.5 by default)
        return images, label, nbytes

    return read_decode_resize()


def main() -> int:
    problem = missing()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
