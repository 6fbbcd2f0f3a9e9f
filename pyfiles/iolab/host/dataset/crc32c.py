"""CRC-32C (Castagnoli), the checksum of TFRecord framing, without TensorFlow.

>>> hex(crc32c(b"123456789"))
'0xe3069283'

`crc32c` is Google's CRC32C library through the `google-crc32c` package (pinned in
the hosts' deep-learning stack): hardware CRC32 instructions where the CPU has them,
gigabytes per second. Where the package cannot be imported, `crc32c` is `crc32c_py`,
the table-driven reference kept here: one table lookup per byte, about 14 MB/s in
CPython (bench/tfrecord_crc.py), correct but slow for shards of a large data set.
`IMPLEMENTATION` says which one is in use.
"""

from __future__ import annotations

from types import ModuleType

google_crc32c: ModuleType | None
try:
    import google_crc32c
except ImportError:  # not installed on this host: the table loop below, same values
    google_crc32c = None

_POLY = 0x82F63B78  # reflected Castagnoli polynomial
_MASK_DELTA = 0xA282EAD8  # TFRecord's checksum mask (tensorflow/core/lib/hash/crc32c.h)


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c_py(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of data, continuing from a previous crc (zlib.crc32 convention)."""
    state = crc ^ 0xFFFFFFFF
    table = _TABLE
    for byte in bytes(data):
        state = table[(state ^ byte) & 0xFF] ^ (state >> 8)
    return state ^ 0xFFFFFFFF


def _crc32c_library(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of data, continuing from a previous crc; google-crc32c takes bytes only."""
    assert google_crc32c is not None  # chosen only where it is installed
    return google_crc32c.extend(crc, data if isinstance(data, bytes) else bytes(data))


if google_crc32c is not None:
    crc32c = _crc32c_library
    IMPLEMENTATION = f"google-crc32c ({google_crc32c.implementation})"
else:
    crc32c = crc32c_py
    IMPLEMENTATION = "pure Python (google-crc32c is not installed)"


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The CRC as TFRecord stores it: rotated and offset, so that CRCs of CRCs stay strong."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
