"""Comparability rules (after MLPerf Storage): may this sample be compared with others?

Two rules, checked when reading (stored samples need no migration):

- **potential_caching**: the distinct data a host read must be at least 5× its RAM,
  or the page cache may have served the reads. Distinct data is what was read
  (fio's io_bytes, a loader's bytes_read, else read_bw × the measured window)
  but no more than the data set (fio's file sizes, the loader's dataset_bytes):
  re-reading a 64 MiB file for a minute is 64 MiB of data. fio jobs with `direct=1`
  (O_DIRECT) bypass the page cache and are not judged on size; evidence recorded
  with the run (the telemetry check: page cache growth, silent devices) flags a
  run whatever its size. A campaign's `allow_caching: true` turns the flag into
  `overridden` (kept, with the reason, but the sample stays valid). This check of one host's
  run, and `Flag`, live in iolab.measures.host_flags (`sample_flags`: what bench records with a run).
- **repeats_disagree**: the repetitions of one (backend, workload, setting,
  metric) must lie within 5% of their median (half their range, over the median).
  It applies to the figures of merit (throughput, IOPS, samples/s, AU: the metrics
  iolab.measures.metrics declares `judged`), as MLPerf Storage applies it; latency percentiles
  and CPU show their spread in the report without invalidating a run.

MLPerf Storage's own rules (`mlperf_flags`) are checked on the runs of an MLPerf workload
(`type: mlperf` or `type: dlio`, params.mlperf): a flag `mlperf_<rule>` for every rule a run
breaks — data set size, lab_scale, repetitions, warm-up, shuffle seed, AU threshold. They
leave `valid` alone (the samples stay comparable with each other) and set `mlperf_rules_followed:
false` in exports.

    flags_for(samples)   → {run_id: [Flag, ...]}            every flag of every run
    annotate(samples)    → [{...sample, valid, flags, reasons}, ...]   for exports
    groups(samples)      → the repeats of each (workload, setting, metric, backend)

Settings and metric labels: a run's *setting* is the parameters shared by all
its samples (the workload's configuration, less runtime/ramp/size); parameters
that only some samples carry qualify the metric instead, in telemetry's own
notation: `cpu_cores{mode=user}`, `dev_read_bw{device=vda}`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from iolab.measures import metrics
from iolab.measures.host_flags import MLPERF_PREFIX, Flag, host_run_check, mlperf_flag
from iolab.measures.samples import AGGREGATE_HOST, Sample
from iolab.units import human
from iolab.workloads import kvcache_rules
from iolab.workloads.mlperf import RAM_MULTIPLE

AGREEMENT = 0.05  # repeats within 5% of their median agree (MLPerf Storage)
# The figures of merit the agreement rule judges (the catalogue's `judged`); others show their spread only.
MERIT_METRICS = metrics.named("judged")
# Parameters that size or time a run without changing what it measures: not part of a setting.
NOT_SETTINGS = frozenset(
    {"runtime", "ramp", "size", "allow_caching", "timeout", "warmup", "profilers", "start_skew_max"}
    | {"duration", "trials", "pause"}  # a KV-cache run's length, trials and pause
)
# Settings that are byte counts: labelled with a unit (object_size=1MiB, not 1048576).
BYTE_SETTINGS = frozenset({"object_size", "gpu_bytes", "cpu_bytes"})

REPEATS_DISAGREE = "repeats_disagree"


# --- settings and metric labels -----------------------------------------------------------------


def run_params(samples: Iterable[Sample]) -> dict[str, dict[str, Any]]:
    """run_id → the parameters every sample of the run carries (the run's configuration)."""
    common: dict[str, dict[str, Any]] = {}
    for s in samples:
        if s.run_id not in common:
            common[s.run_id] = dict(s.params)
        else:
            mine = common[s.run_id]
            for key in [k for k in mine if k not in s.params or s.params[k] != mine[k]]:
                del mine[key]
    return common


def setting_of(params: Mapping[str, Any]) -> str:
    """The swept parameters that tell two points of one workload apart, as a JSON key."""
    return json.dumps({k: v for k, v in params.items() if k not in NOT_SETTINGS}, sort_keys=True, default=str)


def metric_label(sample: Sample, common: Mapping[str, Any]) -> str:
    """'read_bw', or 'cpu_cores{mode=user}' when the sample has parameters of its own."""
    own = {k: v for k, v in sample.params.items() if k not in common}
    if not own:
        return sample.metric
    return sample.metric + "{" + ",".join(f"{k}={own[k]}" for k in sorted(own)) + "}"


def base_metric(label: str) -> str:
    return label.split("{", 1)[0]


def setting_labels(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(workload, setting JSON) → 'iodepth=16': only what varies between the workload's settings."""
    by_workload: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for workload, setting in dict.fromkeys(keys):
        by_workload[workload].append(json.loads(setting))
    labels = {}
    for workload, settings in by_workload.items():
        varying = sorted({k for s in settings for k in s if any(o.get(k) != s.get(k) for o in settings)})
        for s in settings:
            labels[(workload, json.dumps(s, sort_keys=True, default=str))] = " ".join(
                f"{k}={_setting_value(k, s.get(k, '—'))}" for k in varying
            )
    return labels


def _setting_value(key: str, value: Any) -> str:
    if key in BYTE_SETTINGS and isinstance(value, int) and not isinstance(value, bool):
        return human(value, "B").replace(" ", "")
    if key == "faults" and isinstance(value, list) and all(isinstance(f, dict) for f in value):
        return "+".join(_fault_label(f) for f in value)
    return str(value)


def _fault_label(fault: dict[str, Any]) -> str:
    """A fault as a point's name shows it, `osd_stop(osd.0)@10s–30s`, `link_down(gpu02)@8s–13s`: never a
    command's whole line (a command fault: its program and a hash of its argv, so two commands stay two points)."""
    argv = fault.get("argv")
    if isinstance(argv, list) and argv:
        digest = hashlib.sha256(json.dumps([argv, fault.get("heal_argv")]).encode()).hexdigest()[:6]
        who = f"{str(argv[0]).rsplit('/', 1)[-1]}#{digest}"
    else:
        who = fault.get("host") or (f"osd.{fault['osd']}" if "osd" in fault else "")
    times = [t for t in (fault.get("at"), fault.get("heal_at")) if t is not None]
    when = "–".join(f"{t:g}s" if isinstance(t, int | float) else str(t) for t in times)
    return f"{fault.get('what')}" + (f"({who})" if who else "") + f"@{when}"


def setting_order(setting: str) -> tuple:
    """Sort key of a setting (its JSON): numbers by value (64KiB before 1MiB, 8 before 16), then text."""

    def value(v: Any) -> tuple:
        number = isinstance(v, int | float) and not isinstance(v, bool)
        return (0, v, "") if number else (1, 0, str(v))

    return tuple((k, value(v)) for k, v in sorted(json.loads(setting).items()))


# --- repeats --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Group:
    """The repeats of one (workload, setting, metric label, backend)."""

    workload: str
    setting: str
    metric: str  # the label: read_bw, cpu_cores{mode=user}
    backend: str
    unit: str
    values: list[float] = dataclasses.field(default_factory=list)
    run_ids: list[str] = dataclasses.field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.workload, self.setting, self.metric, self.backend)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def spread(self) -> float:
        return spread(self.values)

    @property
    def agree(self) -> bool:
        return self.spread <= AGREEMENT


def spread(values: list[float]) -> float:
    """Half the range over the median: 0.03 means every repeat lies within ±3% of the median."""
    median = statistics.median(values)
    return (max(values) - min(values)) / 2 / abs(median) if median else 0.0


def groups(samples: list[Sample]) -> list[Group]:
    """The repeats of each (workload, setting, metric, backend), in the samples' order.

    The aggregate (host "*") is used where a metric has one; otherwise every
    host's value counts as a repeat.
    """
    common = run_params(samples)
    has_aggregate = {(s.run_id, s.metric) for s in samples if s.host == AGGREGATE_HOST}
    out: dict[tuple, Group] = {}
    for s in samples:
        if s.host != AGGREGATE_HOST and (s.run_id, s.metric) in has_aggregate:
            continue
        params = common[s.run_id]
        key = (s.workload, setting_of(params), metric_label(s, params), s.backend)
        group = out.get(key)
        if group is None:
            group = out[key] = Group(*key, unit=s.unit)
        group.values.append(s.value)
        group.run_ids.append(s.run_id)
    return list(out.values())


def _agreement_flags(all_groups: list[Group]) -> dict[str, list[Flag]]:
    flags: dict[str, list[Flag]] = defaultdict(list)
    labels = setting_labels((g.workload, g.setting) for g in all_groups)
    for g in all_groups:
        if g.metric not in MERIT_METRICS or len(g.values) < 2 or g.agree:
            continue
        point = f"{g.workload} {labels[(g.workload, g.setting)]}".strip()
        reason = (
            f"{g.metric} of {point} on {g.backend}: {len(g.values)} repeats spread "
            f"±{g.spread * 100:.1f}% around their median {human(g.median, g.unit)} "
            f"(more than ±{AGREEMENT:.0%}); run more repetitions"
        )
        for run_id in dict.fromkeys(g.run_ids):
            flags[run_id].append(Flag(REPEATS_DISAGREE, reason, metric=g.metric))
    return flags


# --- everything together ---------------------------------------------------------------------------


@dataclasses.dataclass
class Verdicts:
    """The flags and notes of every run of a set of samples."""

    flags: dict[str, list[Flag]]
    notes: dict[str, list[str]]

    def of(self, run_id: str) -> list[Flag]:
        return self.flags.get(run_id, [])

    def valid(self, run_id: str) -> bool:
        return not any(f.blocking for f in self.of(run_id))


def assess(samples: list[Sample], all_groups: list[Group] | None = None) -> Verdicts:
    by_host_run: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for s in samples:
        if s.host != AGGREGATE_HOST:
            by_host_run[(s.run_id, s.host)].append(s)
    flags: dict[str, list[Flag]] = defaultdict(list)
    notes: dict[str, list[str]] = defaultdict(list)
    for (run_id, _), host_samples in by_host_run.items():
        host_flags, host_notes = host_run_check(host_samples)
        flags[run_id] += host_flags
        notes[run_id] += host_notes
    all_groups = all_groups if all_groups is not None else groups(samples)
    for run_id, more in _agreement_flags(all_groups).items():
        flags[run_id] += more
    for run_id, more in mlperf_flags(samples, all_groups).items():
        flags[run_id] += more
    for s in samples:  # runs that are all valid still get an (empty) entry
        flags.setdefault(s.run_id, [])
    return Verdicts(dict(flags), dict(notes))


def flags_for(samples: list[Sample]) -> dict[str, list[Flag]]:
    """run_id → its flags (each naming the host or metric it concerns); [] for a comparable run."""
    return assess(samples).flags


def annotate(samples: list[Sample], verdicts: Verdicts | None = None) -> list[dict[str, Any]]:
    """Every sample as a dict with `valid`, `flags` (names) and `reasons` (one sentence each, then notes).

    A sample carries its run's flags that concern its host (the aggregate "*": all
    hosts) and, for repeats_disagree, its own metric.
    """
    verdicts = verdicts or assess(samples)
    common = run_params(samples)
    out = []
    for s in samples:
        label = metric_label(s, common[s.run_id])
        mine = [
            f
            for f in verdicts.of(s.run_id)
            if (f.host in (None, s.host) or s.host == AGGREGATE_HOST) and f.metric in (None, label)
        ]
        notes = [n for n in verdicts.notes.get(s.run_id, []) if s.host == AGGREGATE_HOST or n.startswith(f"{s.host}: ")]
        row = json.loads(s.to_json())
        row.update(
            valid=not any(f.blocking for f in mine),
            flags=[f.name for f in mine],
            reasons=[f.reason for f in mine] + notes,
        )
        if s.params.get("mlperf") or s.params.get("mlperf_rules"):
            row[MLPERF_FOLLOWED] = not any(f.name.startswith(MLPERF_PREFIX) for f in mine)
        out.append(row)
    return out


# --- MLPerf Storage's rules -----------------------------------------------------------------------

# Whether a run of an MLPerf-Storage-style workload followed MLPerf Storage's rules: a key of the exports.
# Never "valid": a number iolab measures is never an MLPerf result (MLCommons' names). The key was
# `mlperf_valid` before; no store ever held it (it is computed as a report reads the samples), so an old
# store reads as it is and gets the new key.
MLPERF_FOLLOWED = "mlperf_rules_followed"
MLPERF_LAB_SCALE = "mlperf_lab_scale"
MLPERF_DATASET_SIZE = "mlperf_dataset_size"
MLPERF_REPETITIONS = "mlperf_repetitions"
MLPERF_WARMUP = "mlperf_warmup"
MLPERF_SEED = "mlperf_seed"
MLPERF_AU = "mlperf_au"


def _consecutive(runs: dict[str, list[Sample]], samples: list[Sample], all_groups: list[Group]) -> dict[str, str]:
    """run_id → why its point's measured runs were not consecutive: another run on the backend between them."""
    windows: dict[str, tuple[str, str, str]] = {}
    for s in samples:
        lo, hi, backend = windows.get(s.run_id, (s.started_at, s.ended_at, s.backend))
        windows[s.run_id] = (min(lo, s.started_at), max(hi, s.ended_at), backend)
    out = {}
    for g in all_groups:
        if g.metric != "samples_per_s" or not set(g.run_ids) & set(runs):
            continue
        mine = set(g.run_ids)
        first, last = min(windows[r][0] for r in mine), max(windows[r][1] for r in mine)
        between = [r for r, (lo, _, b) in windows.items() if r not in mine and b == g.backend and first < lo < last]
        for run_id in mine:
            if between:
                out[run_id] = f"{g.workload}: {len(between)} other run(s) on {g.backend} between its measured runs"
    return out


def mlperf_flags(samples: list[Sample], all_groups: list[Group]) -> dict[str, list[Flag]]:
    """The MLPerf Storage rules each run of an MLPerf workload (params.mlperf) breaks, one flag per rule.

    Data set at least max(5 × the summed RAM of the run's hosts, 500 steps × batch × accelerators),
    unless lab_scale says a smaller one is meant (flagged all the same); five recorded repetitions
    after an unrecorded warm-up; a new shuffle seed per repetition; AU at the workload's threshold.
    """
    from iolab.workloads.mlperf import PRESETS, checkpoint_run_rules

    flags: dict[str, list[Flag]] = defaultdict(list)
    runs: dict[str, list[Sample]] = defaultdict(list)
    jobs: dict[str, list[Sample]] = defaultdict(list)  # a checkpoint run's hosts: the whole job's processes
    for s in samples:
        if s.params.get("mlperf") in PRESETS:
            runs[s.run_id].append(s)
        elif s.host != AGGREGATE_HOST and s.metric == "checkpoint_write_bw":
            jobs[s.run_id].append(s)
    for run_id, job in jobs.items():
        ranks = sum(int(s.metadata.get("checkpoint", {}).get("write", {}).get("ranks", 0)) for s in job)
        flags[run_id] += [mlperf_flag(n, why) for n, why in checkpoint_run_rules(job[0].params, ranks)]
    for run_id, why in _consecutive(runs, samples, all_groups).items():
        flags[run_id].append(mlperf_flag("mlperf_consecutive", why))
    repeats = {run_id: len(g.values) for g in all_groups if g.metric == "samples_per_s" for run_id in g.run_ids}
    trials = {run_id: len(g.values) for g in all_groups if g.metric == "kv_read_p95_max" for run_id in g.run_ids}
    for s in samples:  # a KV-cache run's settings, sequence and trials (iolab.workloads.kvcache_rules)
        if s.metric == "kv_read_p95_max" and s.host == AGGREGATE_HOST:
            flags[s.run_id] += [mlperf_flag(n, w) for n, w in kvcache_rules.run_rules(s.params, trials[s.run_id])]
    for run_id, mine in runs.items():
        flags[run_id] += _run_flags(mine, repeats.get(run_id, 1))
    return dict(flags)


def _run_flags(mine: list[Sample], count: int) -> list[Flag]:
    """The flags of one run of an MLPerf workload (its samples, all hosts; `count` recorded repetitions):
    lab_scale, the data set against its hosts' RAM, repetitions, warm-up, seed, each host's AU."""
    from iolab.workloads.mlperf import MIN_STEPS, PRESETS, REPETITIONS, required_samples

    params = mine[0].params
    model, batch = params["mlperf"], int(params.get("batch_size", 1))
    accelerators = int(params.get("accelerators", 1))
    preset = PRESETS[model]
    out: list[Flag] = []

    def add(flag: Flag) -> None:
        out.append(mlperf_flag(flag.name, flag.reason, flag.host))

    if params.get("lab_scale"):
        add(Flag(MLPERF_LAB_SCALE, f"{model}: lab_scale: true, a data set below MLPerf's size is meant"))
    hosts = {s.host: s for s in mine if s.host != AGGREGATE_HOST}
    memory = [int((s.metadata.get("host") or {}).get("memory_bytes") or 0) for s in hosts.values()]
    held = min((int(s.metadata.get("dataset_samples") or 0) for s in hosts.values()), default=0)
    if hosts and all(memory):
        needed = required_samples(model, batch, accelerators, memory)
        if held < needed:
            add(
                Flag(
                    MLPERF_DATASET_SIZE,
                    f"{model}: the data set holds {held:,} samples; MLPerf asks for "
                    f"{needed:,}: max({RAM_MULTIPLE} × the {len(memory)} host(s)' "
                    f"{human(sum(memory), 'B')} of RAM, {MIN_STEPS} steps × batch {batch} × "
                    f"{accelerators * len(memory)} accelerators)",
                )
            )
    if count < REPETITIONS:
        add(Flag(MLPERF_REPETITIONS, f"{model}: {count} recorded repetition(s); MLPerf asks for {REPETITIONS}"))
    if not params.get("warmup"):
        add(Flag(MLPERF_WARMUP, f"{model}: no unrecorded warm-up run before the measured ones (warmup: true)"))
    if not params.get("reseed"):
        add(
            Flag(
                MLPERF_SEED,
                f"{model}: every repetition shuffles with seed {params.get('seed', 0)}; "
                "MLPerf asks for a new seed per repetition (reseed: true)",
            )
        )
    for s in mine:
        if s.metric == "au" and s.host != AGGREGATE_HOST and s.value < preset.au_threshold:
            add(
                Flag(
                    MLPERF_AU,
                    f"{s.host}: AU {s.value:.1f} % is below {model}'s {preset.au_threshold:g} %",
                    host=s.host,
                )
            )
    return out
