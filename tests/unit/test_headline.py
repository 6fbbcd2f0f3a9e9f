"""A run's headline line: the aggregate, or which hosts measured what when only some did."""

from __future__ import annotations

from iolab.measures.samples import AGGREGATE_HOST, Sample
from iolab.store.record import headline
from iolab.units import human
from support import plain_sample

HOSTS = ["gpu01", "gpu02", "gpu03", "gpu04"]


def sample(host: str, value: float, metric: str = "read_bw") -> Sample:
    return plain_sample(host=host, value=value, metric=metric)


def test_the_aggregate_heads_a_run_of_every_host():
    samples = [sample(h, 2**30) for h in HOSTS] + [sample(AGGREGATE_HOST, 4 * 2**30)]
    assert headline(samples, [], HOSTS) == f"read_bw {human(4 * 2**30, 'B/s')}"


def test_samples_from_some_hosts_only_say_how_many_and_their_range():
    samples = [sample("gpu01", 2**30), sample("gpu03", 3 * 2**29), sample("gpu01", 10.0, "read_iops")]
    line = headline(samples, [], HOSTS)
    assert line == (f"2 of 4 hosts (gpu01, gpu03): read_bw {human(2**30, 'B/s')} to {human(3 * 2**29, 'B/s')} per host")
    assert "no samples" not in line


def test_a_failure_comes_first_with_what_the_other_hosts_measured():
    failures = ["seq on tmpfs (rep 1): failed on gpu02: fio: unreachable", "... gpu04 ..."]
    line = headline([sample("gpu01", 2**30), sample("gpu03", 2**30)], failures, HOSTS)
    assert line.startswith(f"[red]failed[/] {failures[0]}; 2 of 4 hosts (gpu01, gpu03): read_bw ")
    assert headline([], failures, HOSTS) == f"[red]failed[/] {failures[0]}"
    assert headline([], [], HOSTS) == "no samples"
