"""What a faulted run's clients felt, and what the storage did: figures from the rate's per-second series.

A faulted run's files (iolab.drive.injector: raw/<run_id>/faults.jsonl, ceph_health.jsonl; each host's intact.json)
and each host's per-second rate (the tool's parser's series: fio's bandwidth log, the loaders' per-step records,
the object benchmark's seconds) give, on each host and on host "*" (the hosts' series added up, second by
second):

    <rate>_baseline     the median rate over the steady seconds before the first injection: those wholly
                        before it by a second at least (GUARD_S; all before it in a short lead-in) B/s, samples/s
    <rate>_degraded     the mean rate over the fault window (first injection to last heal)  B/s or samples/s
    floor_pct           the lowest second's rate from the injection until the rate is back at 90 % after
                        the heal (or the end), in % of the baseline: 0 when the clients stopped, 100 and
                        more when they never slowed (`dip` in stores made before 2026-11-29)  %
    time_to_90pct       from the event (params.after: injection or heal) until the rate is back at 90 % of the
    time_to_99pct       baseline after its lowest point since the event; 0 when it never fell out of its usual
                        band (below that share, and below the 10th percentile of its steady seconds: noise is
                        no fault); no figure when it was not back by the series' end           s
    client_errors       errors the clients saw: fio's I/O errors (continue_on_error), failed S3 requests count
    fault_au            AU inside the fault window (loaders with an accelerator)             %
    data_errors         what the check after the run found wrong with the data set          count

and, on host "*" of a Ceph backend, `time_to_health_ok` (s: from the first injection until `ceph status` says
what it said before the fault, and keeps saying it: its health, checks and placement groups' states, HEALTH_OK
and every group active+clean in a healthy cluster) and `degraded_objects_peak` (count). The rate is the first
of samples_per_s, read_bw, write_bw whose series covers the injection (the highest baseline among the
bandwidths: a PUT phase's write_bw when the fault fell in it). "Back at X %" reads a 3-second centred median of
the rate, so that one noisy second neither ends a recovery nor starts one; a point (t, v) covers the second
(t - 1, t], and a second with no line of fio's log moved nothing (0).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Any

from iolab.parsers import HIGHER, LOWER, Measurement, Metric

TOOLS = ()  # not a tool's: iolab.store.record adds these to a faulted run's samples
FAULTS_FILE, HEALTH_FILE, INTACT_FILE = "faults.jsonl", "ceph_health.jsonl", "intact.json"  # iolab.drive.injector's
RATES = ("samples_per_s", "read_bw", "write_bw")  # in the order they are chosen
LEVELS = (90, 99)  # % of the baseline: time_to_90pct, time_to_99pct
BASELINE_POINTS = 3  # steady seconds of the rate before the injection the baseline needs
# The second just before the injection is no steady second: a host's series is placed on the controller's clock by
# the tool's own times (fio's JSON end time less its runtime), which agree with the injector's within a second, and
# that second has held the fault's first effects (a CephFS read at 166 MiB/s against 325).
GUARD_S = 1.0

METRICS = (
    Metric("*_bw_baseline", "B/s", "the rate before the fault (median of its seconds)"),
    Metric("*_bw_degraded", "B/s", "the mean rate from the injection to the heal", HIGHER),
    Metric("samples_per_s_baseline", "samples/s", "the rate before the fault (median of its seconds)"),
    Metric("samples_per_s_degraded", "samples/s", "the mean rate from the injection to the heal", HIGHER),
    Metric("floor_pct", "%", "the lowest second's rate after the injection, in % of the baseline", HIGHER, table=300),
    Metric("time_to_90pct", "s", "time until the rate is back at 90 % of the baseline", LOWER, table=310),
    Metric("time_to_99pct", "s", "time until the rate is back at 99 % of the baseline", LOWER, table=320),
    Metric("client_errors", "count", "errors the clients saw during the faulted run", LOWER, table=330),
    Metric("fault_au", "%", "accelerator utilization inside the fault window", HIGHER, table=340),
    Metric("data_errors", "count", "problems the check after the faulted run found in the data set", LOWER),
    Metric("time_to_health_ok", "s", "from the injection until the cluster is as healthy as before", LOWER, table=350),
    Metric("degraded_objects_peak", "count", "Ceph objects degraded at the most, after the injection", LOWER),
)

Series = list[tuple[float, float]]


# --- the figures of one rate series -----------------------------------------------------------------------------


def completed(points: Series) -> Series:
    """The series in time order, each second missing between two points filled with 0 (nothing moved)."""
    ordered = sorted(points)
    out: Series = []
    for t, v in ordered:
        while out and t - out[-1][0] > 1.5:
            out.append((out[-1][0] + 1.0, 0.0))
        out.append((t, v))
    return out


def steady(points: Series, inject: float) -> list[float]:
    """The rate's seconds the fault cannot have touched: those wholly before `inject` less GUARD_S; where fewer than
    BASELINE_POINTS are (a short lead-in), all those wholly before `inject`."""
    guarded = [v for t, v in points if t <= inject - GUARD_S]
    return guarded if len(guarded) >= BASELINE_POINTS else [v for t, v in points if t <= inject]


def baseline(points: Series, inject: float) -> float | None:
    """The median rate over the steady seconds; None with fewer than BASELINE_POINTS of them."""
    before = steady(points, inject)
    return statistics.median(before) if len(before) >= BASELINE_POINTS else None


def usual_low(points: Series, inject: float) -> float:
    """The low end of the rate's own band before the fault: its steady seconds' 10th percentile (nearest rank)."""
    before = sorted(steady(points, inject))
    return before[max(1, math.ceil(0.1 * len(before))) - 1]


def smoothed(points: Series) -> Series:
    """Each second's centred 3-second median (2 seconds' mean at the ends)."""
    values = [v for _, v in points]
    return [(t, statistics.median(values[max(0, i - 1) : i + 2])) for i, (t, _) in enumerate(points)]


def time_to(points: Series, since: float, level: float, band: float) -> float | None:
    """Seconds from `since` until the rate's 3-second median is back at `level` after its lowest point since then:
    0 when that median never fell below both `level` and `band` (the usual low: a rate that stayed inside its own
    band did not fall, noise is no fault); None when it was not back by the series' end."""
    after = [(t, m) for t, m in smoothed(points) if t > since]
    if not after:
        return None
    low = min(range(len(after)), key=lambda i: after[i][1])
    if after[low][1] >= min(level, band):
        return 0.0
    back = next((t for t, m in after[low + 1 :] if m >= level), None)
    return None if back is None else max(0.0, back - 1 - since)


@dataclasses.dataclass(frozen=True)
class Figures:
    """One rate's figures around a fault window (see the module's docstring)."""

    rate: str
    baseline: float
    degraded: float | None
    floor: float | None  # % of the baseline
    times: dict[tuple[int, str], float | None]  # (level %, after) → s


def figures(rate: str, points: Series, inject: float, heal: float | None) -> Figures | None:
    """The figures of a rate's series around a fault injected at `inject` and healed at `heal` (None: never, within
    the series); None without a baseline."""
    points = completed(points)
    base = baseline(points, inject)
    if not base:
        return None
    events = {"injection": inject, **({"heal": heal} if heal is not None else {})}
    band = usual_low(points, inject)
    times = {
        (level, after): time_to(points, at, level / 100 * base, band)
        for level in LEVELS
        for after, at in events.items()
    }
    back = times.get((90, "heal" if heal is not None else "injection"))
    ends = (heal if heal is not None else inject) + back + 1 if back is not None else points[-1][0]
    felt = [v for t, v in points if inject < t <= max(ends, inject + 1)]
    window = [v for t, v in points if inject < t <= (heal if heal is not None else points[-1][0])]
    return Figures(
        rate=rate,
        baseline=base,
        degraded=statistics.fmean(window) if window else None,
        floor=100 * min(felt) / base if felt else None,
        times=times,
    )


def measurements(found: Figures, unit: str) -> list[Measurement]:
    out = [Measurement(f"{found.rate}_baseline", found.baseline, unit)]
    if found.degraded is not None:
        out.append(Measurement(f"{found.rate}_degraded", found.degraded, unit))
    if found.floor is not None:
        out.append(Measurement("floor_pct", found.floor, "%"))
    for (level, after), seconds in sorted(found.times.items()):
        if seconds is not None:
            out.append(Measurement(f"time_to_{level}pct", seconds, "s", {"after": after}))
    return out


# --- a faulted run's record ------------------------------------------------------------------------------------


def read_lines(path: Path) -> list[dict[str, Any]]:
    """A JSON-lines record's objects (a torn last line left out)."""
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if isinstance(record, dict):
            out.append(record)
    return out


@dataclasses.dataclass(frozen=True)
class Record:
    """A faulted run's last attempt, as iolab.drive.injector recorded it."""

    events: list[dict[str, Any]]  # its lines: start, clock, inject, heal, never, health, end
    health: list[dict[str, Any]]  # `ceph status` once a second (a Ceph backend's)

    @property
    def start_at(self) -> float | None:
        return next((e["start_at"] for e in self.events if e.get("type") == "clock"), None)

    @property
    def inject(self) -> float | None:
        """When the first fault that took began: the fault window's start."""
        return min((e["started_at"] for e in self.events if e.get("type") == "inject" and e.get("ok")), default=None)

    @property
    def heal(self) -> float | None:
        """When the last scheduled heal began (a heal of the teardown comes after the run: None)."""
        healed = [e["started_at"] for e in self.events if e.get("type") == "heal" and e.get("by") == "schedule"]
        return max(healed) if healed and self.inject is not None and max(healed) > self.inject else None

    def summary(self) -> dict[str, Any]:
        """What every sample of the faulted run keeps of it: each event on the run's clock, the window."""
        start = self.start_at
        kept = ("type", "fault", "what", "target", "ok", "detail", "by", "late_s", "why")

        def since(t: float | None) -> float | None:
            return None if t is None or start is None else round(t - start, 3)

        return {
            "start_at": start,
            "events": [
                {**{k: e[k] for k in kept if k in e}, "at_s": since(e.get("started_at"))}
                for e in self.events
                if e.get("type") in ("inject", "heal", "never", "health")
            ],
            "window_s": [since(self.inject), since(self.heal)],
        }


def load(raw: Path) -> Record | None:
    """The faulted run's record under raw/<run_id>/ (its last attempt: from its last `start` line); None if none."""
    lines = read_lines(raw / FAULTS_FILE)
    starts = [i for i, e in enumerate(lines) if e.get("type") == "start"]
    if not starts:
        return None
    events = lines[starts[-1] :]
    first = events[0].get("t", 0.0)
    return Record(events, [h for h in read_lines(raw / HEALTH_FILE) if h.get("t", 0.0) >= first])


def rate(series: dict[str, Series], inject: float) -> str | None:
    """The series the figures are of (see the module's docstring)."""
    covering = [
        name
        for name in RATES
        if baseline(completed(series.get(name, [])), inject) is not None
        and any(t > inject for t, _ in series.get(name, []))
    ]
    if "samples_per_s" in covering:
        return "samples_per_s"
    return max(covering, key=lambda name: baseline(completed(series[name]), inject) or 0.0, default=None)


def summed(series: list[Series]) -> Series:
    """Hosts' series added up second by second, over the seconds every host covers: each point to the nearest second
    of the first host's grid (one host's series stays as it is)."""
    hosts = [completed(points) for points in series if points]
    if len(hosts) != len(series) or not hosts:
        return []
    offset = hosts[0][0][0] % 1.0
    per_host = [{math.floor(t - offset + 0.5): v for t, v in points} for points in hosts]
    common = set.intersection(*(set(p) for p in per_host))
    return [(t + offset, sum(p[t] for p in per_host)) for t in sorted(common)]


def health_key(poll: dict[str, Any]) -> tuple[Any, ...]:
    """What 'as healthy as before' compares of one `ceph status`: the status, its checks and the placement groups'
    states (HEALTH_OK with every group active+clean, in a healthy cluster)."""
    return poll.get("health"), tuple(poll.get("checks") or ()), tuple(sorted(poll.get("pgs") or {}))


def health_text(poll: dict[str, Any]) -> str:
    """'HEALTH_WARN OSD_DOWN, pgs stale+active+clean' of one `ceph status`."""
    health, checks, pgs = health_key(poll)
    return " ".join(filter(None, [health, ", ".join(checks)])) + (f", pgs {', '.join(pgs)}" if pgs else "")


def health_measurements(record: Record) -> list[Measurement]:
    """time_to_health_ok and degraded_objects_peak from the polls of `ceph status` (host "*")."""
    inject = record.inject
    polls = [h for h in record.health if "health" in h]
    before = [h for h in polls if inject is not None and h["t"] < inject]
    if inject is None or not before:
        return []
    usual = health_key(before[-1])
    after = [h for h in polls if h["t"] >= inject]
    peak = max((h.get("degraded_objects", 0) for h in after), default=0)
    out = [Measurement("degraded_objects_peak", float(peak), "count")]
    if after and health_key(after[-1]) == usual:  # back as it was: from the start of the last stretch so
        stretch = len(after)
        while stretch > 0 and health_key(after[stretch - 1]) == usual:
            stretch -= 1
        back = after[stretch]["t"] if stretch < len(after) else inject
        out.append(Measurement("time_to_health_ok", max(0.0, back - inject), "s"))
    return out


def fault_au(loader: dict[str, Any], inject: float, heal: float | None) -> float | None:
    """AU inside the fault window: each rank's compute time within the window (and within the rank's own measured
    span: a window in the loader's start-up is no AU) over the time they share, in %, the ranks' mean; None where
    no rank's span meets the window."""
    columns = loader.get("columns", [])
    if "ready_at" not in columns or "compute_s" not in columns:
        return None
    ready, compute = columns.index("ready_at"), columns.index("compute_s")
    per_rank = []
    for rank in loader.get("ranks", []):
        records = rank.get("records") or []
        span = rank.get("window") or {}
        first = span.get("start", records[0][ready] if records else inject)
        last = span.get("end", max((r[ready] + r[compute] for r in records), default=inject))
        lo, hi = max(inject, first), min(heal if heal is not None else last, last)
        if hi > lo:
            busy = sum(max(0.0, min(r[ready] + r[compute], hi) - max(r[ready], lo)) for r in records)
            per_rank.append(100 * busy / (hi - lo))
    return statistics.fmean(per_rank) if per_rank else None


def client_errors(host_dir: Path) -> int:
    """What the clients counted as errors: fio's I/O errors (continue_on_error), the object benchmark's failed
    requests; 0 for a loader (a loader that raised stored no samples)."""
    if (host_dir / "fio.json").exists():
        from iolab.parsers.fio import errors

        return errors(host_dir)
    try:
        objects = json.loads((host_dir / "objects.json").read_text())
    except (OSError, ValueError):
        return 0
    return sum(int(phase.get("errors", 0)) for phase in objects.get("phases", {}).values())


def data_errors(host_dir: Path) -> int | None:
    """What the check after the run found wrong with the data set (intact.json); None where it checked none."""
    try:
        found = json.loads((host_dir / INTACT_FILE).read_text()).get("dataset", {})
    except (OSError, ValueError, AttributeError):
        return None
    if found.get("checked") is False:
        return None
    return int(found.get("problem_count", 0 if found.get("ok") else 1))


def _unit(rate: str) -> str:
    return "samples/s" if rate == "samples_per_s" else "B/s"


def host_figures(record: Record, host_dir: Path, series: dict[str, Series]) -> list[Measurement]:
    """One host's figures of a faulted run: its rate's, its clients' errors, AU in the window, the data set's."""
    inject, heal = record.inject, record.heal
    out = [Measurement("client_errors", float(client_errors(host_dir)), "count")]
    if (found := data_errors(host_dir)) is not None:
        out.append(Measurement("data_errors", float(found), "count"))
    if inject is None:
        return out
    chosen = rate(series, inject)
    if chosen and (found_figures := figures(chosen, series[chosen], inject, heal)):
        out += measurements(found_figures, _unit(chosen))
    try:
        loader = json.loads((host_dir / "loader.json").read_text())
    except (OSError, ValueError):
        loader = None
    au = (
        fault_au(loader, inject, heal)
        if isinstance(loader, dict) and loader.get("config", {}).get("accelerator", "none") != "none"
        else None
    )
    if au is not None:
        out.append(Measurement("fault_au", au, "%"))
    return out


def run_figures(record: Record, series: list[dict[str, Series]], hosts: list[list[Measurement]]) -> list[Measurement]:
    """Host "*"'s figures: the hosts' rate added up second by second, their errors added up (`hosts`: each host's
    figures), and the cluster's health."""
    out = health_measurements(record)
    for counted in ("client_errors", "data_errors"):
        found = [m.value for made in hosts for m in made if m.metric == counted]
        out += [Measurement(counted, sum(found), "count")] if found else []
    inject = record.inject
    if inject is None or not series:
        return out
    chosen = rate(series[0], inject)
    if chosen and all(chosen in s for s in series):
        aggregate = figures(chosen, summed([s[chosen] for s in series]), inject, record.heal)
        out += measurements(aggregate, _unit(chosen)) if aggregate else []
    return out
