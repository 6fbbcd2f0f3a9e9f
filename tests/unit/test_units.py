import pytest

from iolab.units import human, parse_duration, parse_size


@pytest.mark.parametrize("text, size", [("2GiB", 2 << 30), ("500MB", 500_000_000), ("64k", 65536),
                                        ("1.5G", 3 << 29), (4096, 4096), ("1 TiB", 1 << 40)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text, seconds", [("10s", 10), ("2m", 120), ("500ms", 0.5), ("1h", 3600), (7, 7)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "-1G", "0", "1.2.3G", "GiB", True, "1 parsec"])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_human_units():
    assert human(1.5 * 2**30, "B/s") == "1.5 GiB/s"
    assert human(123_456, "ns") == "123 µs"
    assert human(45_300, "IOPS") == "45.3 k IOPS"
