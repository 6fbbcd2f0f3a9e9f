"""The fio parser on output captured from real fio 3.33 runs (tests/fixtures/fio/README.md).

Expected values are read from the fixtures' own JSON here, independently of the
parser, so a test fails if the parser sums, merges or skips the wrong thing.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from iolab.kinds.registry import parser_for
from iolab.measures.samples import UNITS
from iolab.parsers import Parsed, ParseError, fio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio"
SINGLE_JOB = ["seq-read-1m", "imagenet-bssplit", "seq-write-128k", "randrw-4k"]
WITH_JSON = SINGLE_JOB + ["rand-read-16k", "two-jobs-read-write", "two-jobs-one-fails", "error-enospc", "error-erofs"]
FIO_KEYS = {"p50": "50.000000", "p99": "99.000000", "p999": "99.900000"}


def raw(case: str) -> dict[str, Any]:
    """The fixture's fio JSON, read without the parser."""
    text = (FIXTURES / case / "fio.json").read_text()
    return json.loads(text[text.index("{") :])


def metrics(parsed: Parsed) -> dict[str, float]:
    return {m.metric: m.value for m in parsed.measurements}


def merged_bins(case: str, ddir: str) -> Counter[int]:
    total: Counter[int] = Counter()
    for job in raw(case)["jobs"]:
        total.update({int(k): v for k, v in job[ddir]["clat_ns"].get("bins", {}).items()})
    return total


@pytest.mark.parametrize("case", WITH_JSON)
def test_every_unit_is_canonical(case: str) -> None:
    for m in fio.parse(FIXTURES / case).measurements:
        assert m.unit in UNITS, m


def test_parser_for_fio_is_this_parser() -> None:
    assert parser_for("fio") is fio.parse


def test_bandwidth_and_iops_are_sums_over_the_two_jobs() -> None:
    jobs = raw("rand-read-16k")["jobs"]
    got = metrics(fio.parse(FIXTURES / "rand-read-16k"))
    assert len(jobs) == 2
    assert got["read_bw"] == sum(j["read"]["bw_bytes"] for j in jobs)
    assert got["read_iops"] == pytest.approx(sum(j["read"]["iops"] for j in jobs))
    assert got["read_bw"] > max(j["read"]["bw_bytes"] for j in jobs)


def test_cpu_is_the_sum_over_jobs_in_percent_of_one_core() -> None:
    jobs = raw("rand-read-16k")["jobs"]
    got = metrics(fio.parse(FIXTURES / "rand-read-16k"))
    assert got["cpu_usr"] == pytest.approx(sum(j["usr_cpu"] for j in jobs))
    assert got["cpu_sys"] == pytest.approx(sum(j["sys_cpu"] for j in jobs))
    assert got["cpu_usr"] + got["cpu_sys"] > 100  # two busy jobs: more than one core


@pytest.mark.parametrize("suffix", FIO_KEYS)
def test_two_job_percentile_comes_from_the_merged_histogram(suffix: str) -> None:
    """Nearest rank on all IOs: >= p % of them at or below it, < p % strictly below."""
    bins = merged_bins("rand-read-16k", "read")
    total = sum(bins.values())
    value = metrics(fio.parse(FIXTURES / "rand-read-16k"))[f"read_clat_{suffix}"]
    share = float(FIO_KEYS[suffix]) / 100
    assert value in bins
    assert sum(c for ns, c in bins.items() if ns <= value) >= share * total
    assert sum(c for ns, c in bins.items() if ns < value) < share * total


@pytest.mark.parametrize("suffix", FIO_KEYS)
def test_two_job_percentile_is_not_the_average_of_the_jobs_percentiles(suffix: str) -> None:
    """A percentile of the union lies between the jobs' own; their mean is not a percentile."""
    per_job = [j["read"]["clat_ns"]["percentile"][FIO_KEYS[suffix]] for j in raw("rand-read-16k")["jobs"]]
    value = metrics(fio.parse(FIXTURES / "rand-read-16k"))[f"read_clat_{suffix}"]
    assert per_job[0] != per_job[1]
    assert min(per_job) <= value <= max(per_job)
    assert value != pytest.approx(sum(per_job) / 2, rel=1e-3)


@pytest.mark.parametrize("case", SINGLE_JOB)
@pytest.mark.parametrize("suffix", FIO_KEYS)
def test_single_job_percentiles_agree_with_fios_own(case: str, suffix: str) -> None:
    """Within one histogram bucket of fio's value (equal on every fixture here).

    fio computes its percentiles from the same buckets with the same nearest-rank
    rule, but compares p/100 * N in floating point; when that product is an integer
    the rank can differ by one, i.e. the adjacent bucket. Buckets are 1/64 of a power
    of two wide, so adjacent values are at most 1.5/64 apart: rel=1/32 allows one
    bucket and no more.
    """
    job = raw(case)["jobs"][0]
    got = metrics(fio.parse(FIXTURES / case))
    checked = 0
    for ddir in fio.DIRECTIONS:
        if job[ddir]["io_bytes"]:
            fios = job[ddir]["clat_ns"]["percentile"][FIO_KEYS[suffix]]
            assert got[f"{ddir}_clat_{suffix}"] == pytest.approx(fios, rel=1 / 32)
            checked += 1
    assert checked


def test_write_only_job_has_no_read_metrics() -> None:
    got = metrics(fio.parse(FIXTURES / "seq-write-128k"))
    assert set(got) == {
        "write_bw",
        "write_iops",
        "write_clat_p50",
        "write_clat_p99",
        "write_clat_p999",
        "cpu_usr",
        "cpu_sys",
    }
    assert got["write_bw"] == raw("seq-write-128k")["jobs"][0]["write"]["bw_bytes"]


def test_read_only_job_has_no_write_metrics() -> None:
    got = metrics(fio.parse(FIXTURES / "seq-read-1m"))
    assert not [name for name in got if name.startswith("write_")]
    assert got["read_clat_p50"] <= got["read_clat_p99"] <= got["read_clat_p999"]


def test_mixed_job_has_both_directions() -> None:
    job = raw("randrw-4k")["jobs"][0]
    got = metrics(fio.parse(FIXTURES / "randrw-4k"))
    assert got["read_bw"] == job["read"]["bw_bytes"]
    assert got["write_iops"] == pytest.approx(job["write"]["iops"])
    assert {"read_clat_p999", "write_clat_p999"} <= set(got)


def test_metadata_records_version_jobs_runtime_and_timestamp() -> None:
    document = raw("rand-read-16k")
    meta = fio.parse(FIXTURES / "rand-read-16k").metadata
    assert meta["fio_version"] == document["fio version"] == "fio-3.33"
    assert meta["fio_jobs"] == 2
    assert meta["fio_runtime_ms"] == max(j["read"]["runtime"] for j in document["jobs"])
    assert meta["fio_timestamp"] == document["timestamp"]


@pytest.mark.parametrize("case", ["rand-read-16k", "two-jobs-read-write", "seq-write-128k"])
def test_metadata_records_bytes_moved_per_direction_summed_over_jobs(case: str) -> None:
    jobs = raw(case)["jobs"]
    meta = fio.parse(FIXTURES / case).metadata
    for ddir in fio.DIRECTIONS:
        assert meta[f"fio_{ddir}_bytes"] == sum(j[ddir]["io_bytes"] for j in jobs)
    assert meta["fio_read_bytes"] + meta["fio_write_bytes"] > 0


def test_identical_jobs_share_one_options_mapping() -> None:
    options = fio.parse(FIXTURES / "rand-read-16k").metadata["fio_options"]
    assert options["numjobs"] == "2"
    assert options["rw"] == "randread"
    assert options["name"] == "rand-read-16k"


def test_different_jobs_get_options_per_job_over_the_global_ones() -> None:
    options = fio.parse(FIXTURES / "two-jobs-read-write").metadata["fio_options"]
    assert set(options) == {"reader", "writer"}
    assert options["reader"]["rw"] == "randread" and options["writer"]["bs"] == "64k"
    assert options["reader"]["iodepth"] == options["writer"]["iodepth"] == "8"  # global


def test_jobs_with_one_name_and_different_options_are_told_apart(tmp_path: Path) -> None:
    document = raw("two-jobs-read-write")
    for job in document["jobs"]:
        job["jobname"] = "same"
    (tmp_path / "fio.json").write_text(json.dumps(document))
    assert set(fio.parse(tmp_path).metadata["fio_options"]) == {"same#0", "same#1"}


def test_a_reader_and_a_writer_job_give_each_direction_from_its_job() -> None:
    reader, writer = raw("two-jobs-read-write")["jobs"]
    got = metrics(fio.parse(FIXTURES / "two-jobs-read-write"))
    assert got["read_bw"] == reader["read"]["bw_bytes"]
    assert got["write_bw"] == writer["write"]["bw_bytes"]
    assert got["write_clat_p99"] == writer["write"]["clat_ns"]["percentile"]["99.000000"]


def test_failed_io_gives_job_errno_and_strerror_and_no_measurements() -> None:
    parsed = fio.parse(FIXTURES / "error-enospc")
    assert parsed.error == f"job 'error-enospc' (#0): errno 28, {os.strerror(28)}"
    assert parsed.measurements == []
    assert parsed.metadata["fio_jobs"] == 1


def test_setup_failure_with_a_notice_before_the_json_is_parsed() -> None:
    assert (FIXTURES / "error-erofs" / "fio.json").read_text().startswith("fio: ")
    parsed = fio.parse(FIXTURES / "error-erofs")
    assert parsed.error == f"job 'error-erofs' (#0): errno 30, {os.strerror(30)}"
    assert parsed.measurements == []


def test_one_failed_job_keeps_the_other_jobs_measurements() -> None:
    reader, writer = raw("two-jobs-one-fails")["jobs"]
    parsed = fio.parse(FIXTURES / "two-jobs-one-fails")
    got = metrics(parsed)
    assert parsed.error == f"job 'writer' (#1): errno 28, {os.strerror(28)}"
    assert got["read_bw"] == reader["read"]["bw_bytes"]
    assert got["write_bw"] == writer["write"]["bw_bytes"]  # it wrote 32 MiB before the disk filled


def test_leading_notice_lines_are_tolerated(tmp_path: Path) -> None:
    original = (FIXTURES / "seq-read-1m" / "fio.json").read_text()
    notices = "fio: file hash not empty on exit\nfio: pid=0, err=30/file:filesetup.c:150\n"
    (tmp_path / "fio.json").write_text(notices + original)
    assert fio.parse(tmp_path) == fio.parse(FIXTURES / "seq-read-1m")


def test_missing_json_names_the_file_and_quotes_stderr() -> None:
    with pytest.raises(ParseError) as caught:
        fio.parse(FIXTURES / "error-no-json")
    message = str(caught.value)
    assert str(FIXTURES / "error-no-json" / "fio.json") in message
    assert "failed to load engine" in message


@pytest.mark.parametrize(
    "content, reason",
    [
        ("", "empty"),
        ("fio: engine libaio not loadable\n", "no line starts with"),
        ("truncated", "not valid JSON"),
        ('{"fio version": "fio-3.33", "jobs": []}\n', '"jobs"'),
    ],
)
def test_unusable_json_raises_parse_error_naming_the_file(tmp_path: Path, content: str, reason: str) -> None:
    if content == "truncated":
        content = (FIXTURES / "seq-read-1m" / "fio.json").read_text()[:4000]
    (tmp_path / "fio.json").write_text(content)
    with pytest.raises(ParseError, match=reason) as caught:
        fio.parse(tmp_path)
    assert str(tmp_path / "fio.json") in str(caught.value)


def test_plain_json_without_histograms_is_refused(tmp_path: Path) -> None:
    document = raw("seq-read-1m")
    del document["jobs"][0]["read"]["clat_ns"]["bins"]
    (tmp_path / "fio.json").write_text(json.dumps(document))
    with pytest.raises(ParseError, match="json\\+"):
        fio.parse(tmp_path)


def test_job_without_a_required_field_names_it(tmp_path: Path) -> None:
    document = raw("seq-read-1m")
    del document["jobs"][0]["read"]["bw_bytes"]
    (tmp_path / "fio.json").write_text(json.dumps(document))
    with pytest.raises(ParseError, match="job #0 has no 'bw_bytes'"):
        fio.parse(tmp_path)


def test_fixtures_are_real_fio_output_of_reasonable_size() -> None:
    for path in FIXTURES.glob("*/fio.json"):
        assert path.stat().st_size < 200_000, path
        assert raw(path.parent.name)["fio version"] == "fio-3.33"
