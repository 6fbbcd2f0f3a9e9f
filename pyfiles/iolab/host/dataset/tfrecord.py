"""TFRecord shards of tf.train.Example, written and read without TensorFlow.

A record is framed as TensorFlow frames it (tensorflow/core/lib/io/record_writer.cc):

    uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)   (little-endian)

and its data is a tf.train.Example encoded by hand in protobuf wire format, with the
features of TensorFlow's ImageNet conversion: `image/encoded` (the JPEG),
`image/class/label` (int64) and `image/filename` (the manifest path).

>>> decode_example(encode_example({"image/class/label": 7, "image/encoded": b"\\xff\\xd8"}))
{'image/class/label': [7], 'image/encoded': [b'\\xff\\xd8']}
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

from iolab.host.dataset.crc32c import masked_crc32c
from iolab.host.dataset.manifest import Record, shards

Value = bytes | int | float | list


class TFRecordError(ValueError):
    """A record whose framing or checksum is wrong, or an Example that does not decode."""


def shard_name(k: int, shards: int) -> str:
    """TensorFlow's naming of ImageNet shards: train-00000-of-01024.tfrecord."""
    return f"train-{k:05d}-of-{shards:05d}.tfrecord"


# ----------------------------------------------------------------- framing


def frame(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def read_records(path: Path, check_crc: bool = True) -> Iterator[bytes]:
    """The data of each record of a TFRecord file, checksums verified unless told not to."""
    with open(path, "rb") as f:
        number = 0
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise TFRecordError(f"{path}: record {number}: truncated header")
            length_bytes, (length_crc,) = header[:8], struct.unpack("<I", header[8:])
            if check_crc and masked_crc32c(length_bytes) != length_crc:
                raise TFRecordError(f"{path}: record {number}: length checksum mismatch")
            (length,) = struct.unpack("<Q", length_bytes)
            data = f.read(length)
            footer = f.read(4)
            if len(data) < length or len(footer) < 4:
                raise TFRecordError(f"{path}: record {number}: truncated data")
            if check_crc and masked_crc32c(data) != struct.unpack("<I", footer)[0]:
                raise TFRecordError(f"{path}: record {number}: data checksum mismatch")
            yield data
            number += 1


def write_index(path: Path, index: Path) -> None:
    """Write the index that DALI's TFRecord reader needs (a line "offset size" per record, as DALI's
    tfrecord2idx writes it), from the records' framing alone: lengths are read, data is skipped."""
    lines, offset, end = [], 0, path.stat().st_size
    with open(path, "rb") as f:
        while offset < end:
            f.seek(offset)
            header = f.read(8)
            if len(header) < 8:
                raise TFRecordError(f"{path}: record at byte {offset}: truncated header")
            size = 8 + 4 + struct.unpack("<Q", header)[0] + 4  # length, its CRC, data, the data's CRC
            lines.append(f"{offset} {size}\n")
            offset += size
    if offset != end:
        raise TFRecordError(f"{path}: the last record runs past the end of the file")
    index.write_text("".join(lines))


# ----------------------------------------------------------------- tf.train.Example


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as two's complement, 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(value: Value) -> bytes:
    values = value if isinstance(value, list) else [value]
    blobs = [bytes(v) for v in values if isinstance(v, (bytes, bytearray))]
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    floats = [v for v in values if isinstance(v, float)]
    if len(blobs) == len(values):  # Feature.bytes_list = 1
        return _len_field(1, b"".join(_len_field(1, v) for v in blobs))
    if len(ints) == len(values):  # Feature.int64_list = 3, packed
        return _len_field(3, _len_field(1, b"".join(_varint(v) for v in ints)))
    if len(floats) == len(values):  # Feature.float_list = 2, packed
        return _len_field(2, _len_field(1, struct.pack(f"<{len(floats)}f", *floats)))
    raise TypeError(f"a feature holds bytes, ints or floats, all of one kind; got {value!r}")


def encode_example(features: dict[str, Value]) -> bytes:
    """tf.train.Example bytes; map entries in key order, so encoding is deterministic."""
    entries = b"".join(
        _len_field(1, _len_field(1, key.encode()) + _len_field(2, _feature(features[key]))) for key in sorted(features)
    )
    return _len_field(1, entries)  # Example.features = 1; Features.feature = 1 (map entries)


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise TFRecordError("bad varint in Example")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise TFRecordError(f"unsupported protobuf wire type {wire} in Example")
        if pos > len(buf):
            raise TFRecordError("Example ends inside a field")
        yield number, wire, value


def _signed(value: int | memoryview) -> int:
    if not isinstance(value, int):
        raise TFRecordError("an int64 feature holds a field that is not a varint")
    return value - (1 << 64) if value >= 1 << 63 else value


def _view(value: int | memoryview) -> memoryview:
    """A length-delimited (or fixed-size) field's bytes; a varint where bytes belong is a broken Example."""
    if isinstance(value, int):
        raise TFRecordError("Example holds a varint where a message or bytes belong")
    return value


def _decode_feature(buf: memoryview) -> list:
    out: list = []
    for kind, _, kind_value in _fields(buf):
        for number, wire, value in _fields(_view(kind_value)):
            if number != 1:
                continue
            if kind == 1:
                out.append(bytes(_view(value)))
            elif kind == 3 and wire == 2:  # packed
                packed, pos = _view(value), 0
                while pos < len(packed):
                    v, pos = _read_varint(packed, pos)
                    out.append(_signed(v))
            elif kind == 3:
                out.append(_signed(value))
            elif kind == 2 and wire == 2:
                out.extend(struct.unpack(f"<{len(_view(value)) // 4}f", _view(value)))
            elif kind == 2:
                out.append(struct.unpack("<f", _view(value))[0])
    return out


def decode_example(data: bytes) -> dict[str, list]:
    """{feature name: list of values} from tf.train.Example bytes."""
    features: dict[str, list] = {}
    for number, _, value in _fields(memoryview(data)):
        if number != 1:
            continue
        for entry_number, _, entry in _fields(_view(value)):
            if entry_number != 1:
                continue
            key, feature = "", memoryview(b"")
            for field, _, field_value in _fields(_view(entry)):
                if field == 1:
                    key = bytes(_view(field_value)).decode()
                elif field == 2:
                    feature = _view(field_value)
            features[key] = _decode_feature(feature)
    return dict(sorted(features.items()))


# ----------------------------------------------------------------- shards of a data set


def write(out: Path, records: Iterable[Record], per_shard: int, total: int) -> list[str]:
    """Write total records into ceil(total / per_shard) shards; returns the shard names."""
    count = max(1, -(-total // per_shard))
    names: list[str] = []
    for shard in shards(records, per_shard):
        names.append(shard_name(len(names), count))
        with open(Path(out) / names[-1], "wb") as f:
            for record in shard:
                assert record.path is not None  # packs name paths
                example: dict[str, Value] = {"image/encoded": record.data, "image/class/label": record.label}
                example["image/filename"] = record.path.encode()
                f.write(frame(encode_example(example)))
    return names


def read(path: Path) -> Iterator[Record]:
    """The samples of one shard in order, checksums verified."""
    for number, data in enumerate(read_records(path)):
        try:
            example = decode_example(data)
            (jpeg,), (label,) = example["image/encoded"], example["image/class/label"]
            filename = example.get("image/filename", [b""])[0].decode()
        except (TFRecordError, KeyError, ValueError, UnicodeDecodeError) as exc:
            raise TFRecordError(f"{path}: record {number}: not an image Example ({exc})") from None
        yield Record(position=None, path=filename or None, label=label, data=jpeg)
