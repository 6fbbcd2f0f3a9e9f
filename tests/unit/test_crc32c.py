"""CRC-32C: google-crc32c and the pure-Python fallback give the same, known values."""

from __future__ import annotations

import importlib
import random
import sys

import pytest

from iolab.dataset import crc32c as crc

# (data, CRC-32C): the check value of the Castagnoli CRC, and RFC 3720 (iSCSI), appendix B.4.
KNOWN = [
    (b"", 0),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


@pytest.mark.parametrize("data,expected", KNOWN)
def test_library_and_fallback_give_the_known_values(data, expected):
    assert crc.IMPLEMENTATION.startswith("google-crc32c")
    assert crc.crc32c(data) == expected
    assert crc.crc32c_py(data) == expected


def test_library_and_fallback_agree_on_record_sized_buffers_and_continuations():
    rng = random.Random(5)
    for length in [1, 31, 4096, 4097, 114_660]:
        data = rng.randbytes(length)
        start = rng.getrandbits(32)
        assert crc.crc32c(data, start) == crc.crc32c_py(data, start), length
    data = rng.randbytes(50_000)
    whole = crc.crc32c(data)
    assert crc.crc32c(data[20_000:], crc.crc32c(data[:20_000])) == whole
    assert crc.crc32c(memoryview(data)) == crc.crc32c(bytearray(data)) == whole


def test_without_the_library_the_fallback_is_used(monkeypatch):
    masked = crc.masked_crc32c(b"123456789")
    monkeypatch.setitem(sys.modules, "google_crc32c", None)  # import google_crc32c now raises ImportError
    try:
        fallback = importlib.reload(crc)
        assert fallback.crc32c is fallback.crc32c_py
        assert fallback.IMPLEMENTATION.startswith("pure Python")
        assert fallback.masked_crc32c(b"123456789") == masked
        assert all(fallback.crc32c(data) == expected for data, expected in KNOWN)
    finally:
        monkeypatch.undo()
        importlib.reload(crc)
    assert crc.crc32c is not crc.crc32c_py
