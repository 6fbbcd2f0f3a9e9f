"""CRC-32C (Castagnoli), the checksum of TFRecord framing, without TensorFlow.

>>> hex(crc32c(b"123456789"))
'0xe3069283'

`crc32c_py` is the table-driven reference: one table lookup per byte, about
5 MB/s in CPython, far too slow for shards of a data set larger than RAM.
`crc32c` gives the same value and uses numpy for buffers of a few KiB and more
(well over 100 MB/s): CRC is linear over GF(2), so the buffer is cut into
fixed-size chunks whose CRCs are computed side by side (one table lookup per
chunk per byte position), then folded pairwise, each level shifting the left
half over the length of the right one with precomputed tables.
"""

from __future__ import annotations

_POLY = 0x82F63B78  # reflected Castagnoli polynomial
_MASK_DELTA = 0xA282EAD8  # TFRecord's checksum mask (tensorflow/core/lib/hash/crc32c.h)
_CHUNK = 32  # bytes per chunk in the vectorized path
_NUMPY_FROM = 4096  # below this, the plain loop is as fast


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


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of data, continuing from a previous crc; same value as crc32c_py."""
    if len(data) < _NUMPY_FROM:
        return crc32c_py(data, crc)
    try:
        import numpy  # noqa: F401  (host-side dependency; the plain loop is the fallback)
    except ImportError:
        return crc32c_py(data, crc)
    return _crc32c_numpy(data, crc)


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The CRC as TFRecord stores it: rotated and offset, so that CRCs of CRCs stay strong."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class _Shifts:
    """Tables that advance a CRC register over runs of zero bytes, for the fold."""

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        self.table = np.array(_TABLE, dtype=np.uint32)
        # Register after _CHUNK zero bytes, starting from each single-bit state.
        images = []
        for bit in range(32):
            state = 1 << bit
            for _ in range(_CHUNK):
                state = _TABLE[state & 0xFF] ^ (state >> 8)
            images.append(state)
        self.levels = [self._tables(np.array(images, dtype=np.uint32))]
        self._lists: dict[int, list[list[int]]] = {}

    def _tables(self, images):
        """4 x 256 lookup tables of the linear map whose single-bit images are given."""
        np = self.np
        values = np.arange(256, dtype=np.uint32)
        tables = np.zeros((4, 256), dtype=np.uint32)
        for byte in range(4):
            for bit in range(8):
                tables[byte] ^= np.where((values >> bit) & 1, images[8 * byte + bit], 0).astype(np.uint32)
        return tables

    def shift(self, level: int, registers):
        """Registers advanced over _CHUNK * 2**level zero bytes."""
        while len(self.levels) <= level:
            # Doubling the run length: apply the previous shift twice to every basis image.
            previous = len(self.levels) - 1
            basis = self.np.left_shift(self.np.uint32(1), self.np.arange(32, dtype=self.np.uint32))
            self.levels.append(self._tables(self.shift(previous, self.shift(previous, basis))))
        t = self.levels[level]
        return (t[0].take(registers & 0xFF) ^ t[1].take((registers >> 8) & 0xFF)
                ^ t[2].take((registers >> 16) & 0xFF) ^ t[3].take(registers >> 24))

    def lists(self, level: int) -> list[list[int]]:
        """The tables of a level as Python lists, for the last, sequential steps of the fold."""
        if level not in self._lists:
            self.shift(level, self.np.zeros(1, dtype=self.np.uint32))
            self._lists[level] = self.levels[level].tolist()
        return self._lists[level]


_shifts: _Shifts | None = None


def _crc32c_numpy(data: bytes | bytearray | memoryview, crc: int) -> int:
    global _shifts
    if _shifts is None:
        _shifts = _Shifts()
    np = _shifts.np
    raw = np.frombuffer(data, dtype=np.uint8)
    # Leading zeros leave a zero register unchanged, so pad in front to whole chunks,
    # and start from a zero register: the initial state XORed into the first four
    # bytes has the same effect as starting from it (the update is linear).
    pad = (-len(raw)) % _CHUNK
    buf = np.zeros(pad + len(raw), dtype=np.uint8)
    buf[pad:] = raw
    buf[pad:pad + 4] ^= np.frombuffer((crc ^ 0xFFFFFFFF).to_bytes(4, "little"), dtype=np.uint8)
    columns = np.ascontiguousarray(buf.reshape(-1, _CHUNK).T)  # row j: byte j of every chunk
    table = _shifts.table
    registers = np.zeros(columns.shape[1], dtype=np.uint32)
    for column in columns:
        registers = table.take((registers & 0xFF) ^ column) ^ (registers >> 8)
    level = 0
    while len(registers) > 64:  # fold pairwise while numpy calls pay off
        if len(registers) % 2:  # a zero chunk in front changes nothing
            registers = np.concatenate([np.zeros(1, dtype=np.uint32), registers])
        registers = _shifts.shift(level, registers[0::2]) ^ registers[1::2]
        level += 1
    t0, t1, t2, t3 = _shifts.lists(level)
    state = 0
    for register in registers.tolist():
        state = t0[state & 0xFF] ^ t1[(state >> 8) & 0xFF] ^ t2[(state >> 16) & 0xFF] ^ t3[state >> 24] ^ register
    return state ^ 0xFFFFFFFF
