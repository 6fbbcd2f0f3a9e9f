"""The flags of one host's run: what bench records with it (`sample_flags`) and the report reads again
(`host_run_check`), and `Flag`, the form every rule of iolab.measures.validity gives its verdict in.

- **potential_caching**: the distinct data the host read against 5× its RAM (iolab.measures.validity's docstring says
  the rule); `overridden` where the campaign allows caching.
- **start_skewed**: a host of a run on several that started later than the run's bound.
- MLPerf Storage's rules that one host's run breaks (iolab.workloads.mlperf.host_rules), and the flags
  recorded with the run (the telemetry evidence check).

A flag named `mlperf_<rule>`, `overridden` or `start_skewed` leaves the sample comparable (`Flag.blocking`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from iolab.measures.samples import AGGREGATE_HOST, Sample
from iolab.units import human, parse_size
from iolab.workloads.mlperf import RAM_MULTIPLE

POTENTIAL_CACHING = "potential_caching"
OVERRIDDEN = "overridden"
START_SKEWED = "start_skewed"  # a host of a run on several started late: said, the sample stays comparable
START_SKEW_MAX = 1.0  # s, where the workload sets no start_skew_max: as far as the hosts' clocks may disagree
MLPERF_PREFIX = "mlperf_"  # MLPerf Storage's rules: said, they leave `valid` alone


@dataclasses.dataclass(frozen=True)
class Flag:
    """One reason a run may not be comparable; `overridden` is kept for the record but does not invalidate."""

    name: str
    reason: str
    host: str | None = None
    metric: str | None = None

    @property
    def blocking(self) -> bool:
        """Whether it makes the sample incomparable; MLPerf's rules make it `mlperf_rules_followed: false` only."""
        return self.name not in (OVERRIDDEN, START_SKEWED) and not self.name.startswith(MLPERF_PREFIX)


def mlperf_flag(name: str, why: str, host: str | None = None) -> Flag:
    """A flag of MLPerf's rule `name`, its reason led by the rule's number in MLPerf Storage's rules document."""
    from iolab.workloads.mlperf import rule_of

    rule = rule_of(name)
    return Flag(name, f"MLPerf Storage {rule}: {why}" if rule else why, host=host)


def _host_rules(sample: Sample) -> list[tuple[str, str]]:
    from iolab.workloads.mlperf import host_rules

    return host_rules(sample.metadata, sample.params, sample.host)


def _options_list(options: Any) -> list[dict[str, str]]:
    """fio_options is one mapping (all jobs alike) or one mapping per job name."""
    if not isinstance(options, dict) or not options:
        return []
    if all(isinstance(v, dict) for v in options.values()):
        return list(options.values())
    return [options]


def _direct(options: list[dict[str, str]]) -> bool:
    return bool(options) and all(
        str(o.get("direct", "0")) == "1" or str(o.get("buffered", "1")) == "0" for o in options
    )


def _fio_data_set(options: list[dict[str, str]]) -> int | None:
    """Bytes of the files the jobs work on: one file per filename, else one per job thread."""
    files: dict[str, int] = {}
    for index, o in enumerate(options):
        try:
            size = parse_size(o["size"])
        except (KeyError, ValueError):
            return None
        if o.get("filename"):
            files[o["filename"]] = max(files.get(o["filename"], 0), size)
        else:
            files[f"#{index}"] = size * int(o.get("numjobs", 1) or 1)
    return sum(files.values()) if files else None


def _read_figures(meta: Mapping[str, Any], read_bw: float | None) -> tuple[float | None, int | None, str]:
    """(bytes read in the window, data set bytes, where the figures came from)."""
    if "bytes_read" in meta:  # a loader that counts its bytes
        return float(meta["bytes_read"]), meta.get("dataset_bytes"), "the loader's bytes_read"
    if meta.get("dataset_bytes"):  # the PyTorch loader: its data set, its ranks' windows
        windows = [r.get("window_s") or 0 for r in meta.get("ranks") or [] if isinstance(r, dict)]
        if read_bw is not None and windows:
            return read_bw * max(windows), meta["dataset_bytes"], "read_bw × the loader's window"
        return float(meta["dataset_bytes"]), meta["dataset_bytes"], "the data set's size"
    options = _options_list(meta.get("fio_options"))
    if "fio_read_bytes" in meta:
        return float(meta["fio_read_bytes"]), _fio_data_set(options), "fio's io_bytes"
    if read_bw is not None and meta.get("fio_runtime_ms"):
        return read_bw * meta["fio_runtime_ms"] / 1000, _fio_data_set(options), "read_bw × fio's runtime"
    return None, _fio_data_set(options), ""


def _size_check(meta: Mapping[str, Any], read_bw: float | None, host: str) -> tuple[list[Flag], list[str]]:
    """The data-set-versus-RAM rule for one host's run: (flags, notes on why it was not judged)."""
    memory = (meta.get("host") or {}).get("memory_bytes")
    if _direct(_options_list(meta.get("fio_options"))):
        return [], [
            f"{host}: not judged on data set size: fio ran with direct=1 (O_DIRECT), "
            "which bypasses the page cache, so RAM cannot serve the reads"
        ]
    read, data_set, source = _read_figures(meta, read_bw)
    if read is None:
        return [], []  # not a reading tool, or nothing known about what it read
    if not read:
        return [], [f"{host}: not judged on data set size: the run read nothing"]
    if not memory:
        return [], [f"{host}: not judged on data set size: the host's memory is not recorded"]
    distinct = min(read, data_set) if data_set else read
    if distinct >= RAM_MULTIPLE * memory:
        return [], []
    over = f" from a {human(data_set, 'B')} data set" if data_set and data_set < read else ""
    reason = (
        f"{host} read {human(read, 'B')} ({source}){over}: {human(distinct, 'B')} of distinct data is "
        f"{distinct / memory:.2g}× its {human(memory, 'B')} of RAM, less than the "
        f"{RAM_MULTIPLE}× ({human(RAM_MULTIPLE * memory, 'B')}) that defeats the page cache"
    )
    return [Flag(POTENTIAL_CACHING, reason, host=host)], []


def _skew_check(meta: Mapping[str, Any], host: str) -> list[Flag]:
    """A host of a run on several that started further from the common start than the run's bound
    (metadata.start_skew_max_s, recorded for runs on several hosts only)."""
    skew, bound = meta.get("start_skew_s"), meta.get("start_skew_max_s")
    if not isinstance(skew, int | float) or not isinstance(bound, int | float) or abs(skew) <= bound:
        return []
    return [
        Flag(
            START_SKEWED,
            f"{host} started {skew:.3g} s after the hosts' common start, more than start_skew_max ({bound:g} s): "
            "it did not run together with the others for all of the run",
            host=host,
        )
    ]


def _recorded(meta: Mapping[str, Any], host: str, known: set[str]) -> list[Flag]:
    """Flags recorded with the run (the telemetry evidence check, and bench's own `sample_flags`).

    Reasons this check gives again (`known`) are not repeated.
    """
    names = [str(n) for n in meta.get("flags") or []]
    reasons = [str(r) for r in meta.get("flag_reasons") or [] if str(r) not in known]
    if not names:
        return []
    why = "; ".join(reasons)
    if why and not why.startswith(f"{host} ") and not why.startswith(f"{host}: "):
        why = f"{host}: {why}"
    return [Flag(name, why, host=host) for name in dict.fromkeys(names)]


def _overridden(flags: list[Flag], allowed: bool) -> list[Flag]:
    if not allowed:
        return flags
    return [
        dataclasses.replace(
            f, name=OVERRIDDEN, reason=f"{POTENTIAL_CACHING} overridden by the campaign's allow_caching: {f.reason}"
        )
        if f.name == POTENTIAL_CACHING
        else f
        for f in flags
    ]


def host_run_check(samples: list[Sample]) -> tuple[list[Flag], list[str]]:
    """The caching check of one host's run, from that host's samples of it: (flags, notes)."""
    first = samples[0]
    read_bw = next((s.value for s in samples if s.metric == "read_bw" and not s.params.get("syscall")), None)
    flags, notes = _size_check(first.metadata, read_bw, first.host)
    flags += _skew_check(first.metadata, first.host)
    flags += [mlperf_flag(name, why, first.host) for name, why in _host_rules(first)]
    recorded = _recorded(first.metadata, first.host, {f.reason for f in flags} | set(notes))
    # The size check and the evidence check may both fire: one flag, both reasons.
    merged: dict[str, Flag] = {}
    for flag in [*flags, *recorded]:
        if flag.name in merged:
            if not flag.reason or flag.reason in merged[flag.name].reason:
                continue
            flag = dataclasses.replace(flag, reason=f"{merged[flag.name].reason}; {flag.reason}")
        elif not flag.reason:
            flag = dataclasses.replace(flag, reason=f"{first.host}: recorded with the run")
        merged[flag.name] = flag
    return _overridden(list(merged.values()), bool(first.params.get("allow_caching"))), notes


def sample_flags(sample: Sample) -> tuple[list[str], list[str]]:
    """(flag names, reasons) of one sample on its own: what bench records with a run's samples.

    Reasons explain each flag, and also why a rule did not apply (O_DIRECT).
    The repeats rule needs the other repetitions: `flags_for` adds it at report time.
    """
    if sample.host == AGGREGATE_HOST:
        return [], []
    flags, notes = host_run_check([sample])
    return [f.name for f in flags], [f.reason for f in flags] + notes
