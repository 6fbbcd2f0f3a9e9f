import pytest

from iolab.units import counted, human, parse_duration, parse_size


@pytest.mark.parametrize(
    "text, size",
    [("2GiB", 2 << 30), ("500MB", 500_000_000), ("64k", 65536), ("1.5G", 3 << 29), (4096, 4096), ("1 TiB", 1 << 40)],
)
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text, seconds", [("10s", 10), ("2m", 120), ("500ms", 0.5), ("1h", 3600), (7, 7)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "-1G", "0", "1.2.3G", "GiB", True, "1 parsec"])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError, match=r"a size such as 2GiB|size must be positive|unknown size unit"):
        parse_size(bad)


def test_human_units():
    assert human(1.5 * 2**30, "B/s") == "1.5 GiB/s"
    assert human(123_456, "ns") == "123 µs"
    assert human(45_300, "IOPS") == "45.3 k IOPS"


@pytest.mark.parametrize(
    "bad, says",
    [
        ("0.5", "not a whole number of bytes"),  # became 0: an unlimited tmpfs
        (0.5, "not a whole number of bytes"),
        (0, "must be positive"),
        ("0GiB", "must be positive"),
        ("2EiB", "unknown size unit"),
        ("2000000TiB", "more than 1024 PiB"),
    ],
)
def test_sizes_are_whole_positive_byte_counts(bad, says):
    with pytest.raises(ValueError, match=says):
        parse_size(bad)


def test_a_duration_past_a_week_is_a_typo():
    with pytest.raises(ValueError, match="more than 7 days"):
        parse_duration("99999999999h")


def test_a_count_names_its_noun_in_the_plural_where_it_is_not_one():
    assert [counted(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]
