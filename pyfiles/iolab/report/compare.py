"""B against A: the ratio B/A per (workload, setting, metric) with a 95% confidence interval, and rules.

    ./lab report.compare last-month this-month --rule "read_bw >= -5%" --rule "read_clat_p99 <= +10%"
    ./lab report.compare local tmpfs --campaign quick --rules ci-rules.yml     two backends of one campaign
    ./lab report.compare quick@2026-11-21 quick@2026-12-19     a campaign's runs of two dates (the results index)

A is the baseline. Two campaigns are matched per (backend, workload, setting,
metric); two backends of one campaign per (workload, setting, metric).
(Invoke has no optional positional arguments, so two backends are named as A
and B with --campaign rather than with a separate --backends A,B.)

**The interval** is a Welch t-interval on the logarithms of the repeats,
exponentiated: ratio = exp(mean(log B) − mean(log A)), the ratio of geometric
means. Logs because performance compares by ratios (a 10% drop and a 10% gain
are symmetric there, and the bounds stay positive); Welch because the two sides
need not share a variance or a count; t rather than a bootstrap because
campaigns have 2–5 repetitions, where resampling sees only a handful of distinct
resamples and gives intervals far too narrow, while t's quantiles widen as they
should (df = 1 gives 12.7 standard errors). With a single repeat on either side
the variance is unknown, and so is the interval: it is reported as unknown.

**Rules** bound the change B/A − 1 of every point whose metric matches (a
shell pattern: `read_clat_*`). `read_bw >= -5%`: not more than 5% below the
baseline; `read_clat_p99 <= +10%`: at most 10% slower. The point estimate is
judged (a regression is not excused by noise); each violation says whether the
whole interval is past the limit. A rules file is YAML: `rules: [...]` or a
bare list of such strings.

**From zero**: a point whose median is 0 in A (a time to recover where A's clients never slowed) has no
ratio; B's median above 0 breaks every upper bound (`time_to_90pct <= +20%`: any rise from 0 is past it), and
0 in B too holds every rule (unchanged).

**A loss** breaks every rule that matches it: a point whose median fell to 0 from a
baseline above 0, or that B has no value of though it measured that workload at that
setting (it lost the metric, or comparing campaigns, the backend). A rule that can
never hold (`read_bw <= -200%`: B/A − 1 is never below -100%) or that guards nothing
(`read_bw >= -150%`) is refused as it is read.

**Output** (`--format`): `table` (default) prints the table and one REGRESSION line
per broken rule; `junit` and `json` print only a document on stdout, for CI. Either
way the exit status is 1 when a rule is broken. Both hold one *check* per rule and
point the rule matches (a test case in JUnit): `passed`, `failed` (a regression, a
loss among them) or `skipped` (a repeat of 0 or below on either side, no loss: no
ratio). Names from the
samples are written with their control characters escaped (`\u001b`). JUnit XML has one <testsuite> whose
test cases are named `METRIC[ on BACKEND]: RULE` with the workload as classname;
a failure's type is `regression`. The JSON shape (`schema` "iolab.compare/1"; keys
are only ever added, never renamed, under this schema name):

    {"schema": "iolab.compare/1", "baseline": A, "candidate": B, "level": 0.95,
     "rules": ["read_bw >= -5%", ...], "only_in_baseline": 0, "only_in_candidate": 0,
     "regressions": 1,
     "points": [{"workload": "seq-read", "setting": {"iodepth": 1}, "setting_label": "iodepth=1",
                 "metric": "read_bw", "backend": "tmpfs" (null for two backends of one campaign),
                 "unit": "B/s",
                 "baseline": {"median": ..., "n": 3, "values": [...]}, "candidate": {...},
                 "ratio": 0.9, "change": -0.1, "low": 0.85, "high": 0.95 (null: unknown or no ratio),
                 "lost": false (true: B has no value, or its median fell to 0),
                 "answers": {"baseline": ["6 h100 (6–7)"], "candidate": ["≥ 4 h100 (limited by this host)"]}
                            (accelerators_fed only, as the report writes each answer; else null),
                 "checks": [{"rule": "read_bw >= -5%", "outcome": "failed", "message": "REGRESSION ..."}]}]}
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import statistics
from pathlib import Path

from iolab import yamlfile
from iolab.errors import UserError
from iolab.measures import metrics, validity
from iolab.measures.samples import AGGREGATE_HOST, ResultStore, Sample
from iolab.measures.welch import LEVEL, Ratio, ratio_ci
from iolab.report.layout import NUMBER, TEXT, Column, Fitted
from iolab.units import human, printable

_RULE = re.compile(
    r"^\s*(?P<metric>[A-Za-z0-9_*?\[\]{}=,.-]+)\s*(?P<op>>=|<=|>|<)\s*"
    r"(?P<limit>[+-]?[0-9]+(?:\.[0-9]+)?)\s*%\s*$"
)


# --- rules ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Rule:
    text: str
    metric: str  # a shell pattern over metric labels
    op: str
    limit: float  # a fraction: -0.05 for -5%

    def matches(self, metric: str) -> bool:
        return fnmatch.fnmatchcase(metric, self.metric) or fnmatch.fnmatchcase(
            validity.base_metric(metric), self.metric
        )

    def holds(self, change: float) -> bool:
        return {
            ">=": change >= self.limit - 1e-12,
            "<=": change <= self.limit + 1e-12,
            ">": change > self.limit,
            "<": change < self.limit,
        }[self.op]


def parse_rule(text: str, where: str = "--rule") -> Rule:
    match = _RULE.match(str(text))
    if not match:
        raise UserError(
            f"{where}: cannot read rule {text!r}; write METRIC OP CHANGE%, e.g. "
            "'read_bw >= -5%' (not more than 5% below the baseline) or 'read_clat_p99 <= +10%'"
        )
    op, limit = match["op"], float(match["limit"]) / 100
    if limit < -1 or (limit == -1 and op.startswith("<")):
        raise UserError(
            f"{where}: rule {text!r} {'can never hold' if op.startswith('<') else 'guards nothing'}: "
            "B/A − 1 is never below -100% (B is never below 0); bound the change above -100%, e.g. 'read_bw >= -5%'"
        )
    return Rule(str(text).strip(), match["metric"], op, limit)


def load_rules(path: str | Path) -> list[Rule]:
    path = Path(path)
    raw = yamlfile.load(path, "rules file", "--rules")
    items = raw.get("rules") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise UserError(f"{path}: expected `rules:` with a list of strings such as 'read_bw >= -5%'")
    return [parse_rule(item, f"{path}: rules[{i}]") for i, item in enumerate(items)]


# --- the comparison -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Side:
    label: str  # 'quick' or 'quick:tmpfs'
    samples: list[Sample]
    backend: str | None = None  # only this backend's samples, matched without the backend
    store: ResultStore | None = None  # where they were read (its skipped lines)


@dataclasses.dataclass
class Point:
    backend: str | None
    workload: str
    setting: str
    setting_label: str
    metric: str
    unit: str
    a: list[float]
    b: list[float]  # empty: B has no value of this metric
    ratio: Ratio | None  # None when a value is 0 or negative, or B has none
    violations: list[Rule] = dataclasses.field(default_factory=list)
    answers: tuple[list[str], list[str]] = ([], [])  # accelerators_fed: A's and B's answers with their interval

    @property
    def lost(self) -> bool:
        """B has no value of the metric, or its median fell to 0 (or below) from a baseline above 0."""
        return lost(self.a, self.b)

    @property
    def from_zero(self) -> str | None:
        """Where A's median is 0, B's against it (`from_zero`)."""
        return from_zero(self.a, self.b)

    def where(self) -> str:
        text = f"{self.metric} of {self.workload}"
        text += f" {self.setting_label}" if self.setting_label else ""
        return text + (f" on {self.backend}" if self.backend else "")


@dataclasses.dataclass
class Comparison:
    a: Side
    b: Side
    points: list[Point]
    only_a: int
    only_b: int
    rules: list[Rule]

    def violations(self) -> list[str]:
        """One line per violated rule and point (names' control characters escaped)."""
        return [printable(self.violation(p, rule)) for p in self.points for rule in p.violations]

    def violation(self, p: Point, rule: Rule) -> str:
        r = p.ratio
        if r is None and p.from_zero == "risen":
            return (
                f"REGRESSION {p.where()}: {self.b.label} has a median of {human(statistics.median(p.b), p.unit)} "
                f"({len(p.b)}) where {self.a.label} has 0 ({len(p.a)}): a rise from 0 is past any upper bound; "
                f"breaks '{rule.text}'"
            )
        if r is None:  # a loss: every rule that matches it is broken
            got = f"a median of {human(statistics.median(p.b), p.unit)} ({len(p.b)})" if p.b else "no value"
            return (
                f"REGRESSION {p.where()}: {self.b.label} has {got} where {self.a.label} has "
                f"{human(statistics.median(p.a), p.unit)} ({len(p.a)}), lost entirely; breaks '{rule.text}'"
            )
        past = ""
        if r.low is not None and r.high is not None:
            whole = all(rule.holds(x - 1) is False for x in (r.low, r.high))
            past = ", the whole interval past the limit" if whole else ", the interval reaches within it"
        return (
            f"REGRESSION {p.where()}: {self.b.label}/{self.a.label} = {r.ratio:.3g} "
            f"({r.change * 100:+.1f}%, 95% CI {r.interval()}{past}) breaks '{rule.text}'"
        )

    def checks(self) -> list[Check]:
        """Every rule against every point it matches, as the rules are evaluated: one test case each."""
        out = []
        for p in self.points:
            for rule in self.rules:
                if not rule.matches(p.metric):
                    continue
                if rule in p.violations:
                    out.append(Check(rule, p, FAILED, self.violation(p, rule)))
                elif p.ratio is None and p.from_zero:
                    said = "0 on both sides, unchanged" if p.from_zero == "same" else "risen from 0, within the rule"
                    out.append(Check(rule, p, PASSED, f"{p.where()}: {said}; holds '{rule.text}'"))
                elif p.ratio is None:
                    out.append(Check(rule, p, SKIPPED, f"{p.where()}: not compared, a repeat is 0 (no ratio)"))
                else:
                    out.append(
                        Check(
                            rule,
                            p,
                            PASSED,
                            f"{p.where()}: {self.b.label}/{self.a.label} = "
                            f"{p.ratio.ratio:.3g} ({p.ratio.change * 100:+.1f}%) "
                            f"holds '{rule.text}'",
                        )
                    )
        return out


PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclasses.dataclass(frozen=True)
class Check:
    """One rule judged on one point: passed, failed (a regression) or skipped (no ratio)."""

    rule: Rule
    point: Point
    outcome: str
    message: str


def _points(side: Side, by_backend: bool) -> dict[tuple, validity.Group]:
    samples = [s for s in side.samples if side.backend is None or s.backend == side.backend]
    out = {}
    for g in validity.groups(samples):
        out[(g.backend if by_backend else None, g.workload, g.setting, g.metric)] = g
    return out


def _ran(side: Side, by_backend: bool) -> set[tuple]:
    """(backend, workload, setting) of every run the side's records name, failed ones too: what it ran, measured
    or not. A record of an older store has no params: its setting is None (it ran the workload)."""
    records = side.store.run_records() if side.store else []
    return {
        (
            r.get("backend") if by_backend else None,
            r.get("workload"),
            validity.setting_of(r["params"]) if isinstance(r.get("params"), dict) else None,
        )
        for r in records
        if side.backend is None or r.get("backend") == side.backend
    }


def _answers(side: Side, group: validity.Group) -> list[str]:
    """A search's answers (accelerators_fed, all hosts) as the report writes them, with their interval and flags;
    none for another metric."""
    from iolab.report.tables import VERDICT_METRIC, fed_label

    if group.metric != VERDICT_METRIC:
        return []
    runs = set(group.run_ids)
    return [
        fed_label(s.value, s.metadata, s.params.get("accelerator_type", ""))
        for s in side.samples
        if s.run_id in runs and s.metric == VERDICT_METRIC and s.host == AGGREGATE_HOST
    ]


def judge(
    metric: str, a: list[float], b: list[float], rules: list[Rule], level: float | None = LEVEL
) -> tuple[Ratio | None, list[Rule]]:
    """B's repeats against A's for one point of `metric`: the ratio (None where a value is 0 or below, or B has
    none; its interval at `level`, None: none) and the rules it breaks, which the point estimate decides; a
    loss (B has no value, or its median fell to 0) breaks every rule that matches. report.compare judges each
    point so, and report.history each point of a series against the one before (without the interval)."""
    ratio = ratio_ci(a, b, level) if b and min(a + b) > 0 else None
    ruled = [r for r in rules if r.matches(metric)]
    if lost(a, b):
        return ratio, ruled
    risen = from_zero(a, b) == "risen"  # a rise from 0 is past any upper bound
    return ratio, [r for r in ruled if (ratio and not r.holds(ratio.change)) or (risen and r.op in ("<=", "<"))]


def from_zero(a: list[float], b: list[float]) -> str | None:
    """Where A's median is 0, B's against it: 'risen' (above 0: no ratio, past any upper bound: a time to
    recover that was none) or 'same' (0 too: unchanged); None where A's is not 0."""
    if not b or statistics.median(a) != 0:
        return None
    return "risen" if statistics.median(b) > 0 else "same" if statistics.median(b) == 0 else None


def lost(a: list[float], b: list[float]) -> bool:
    """B has no value, or its median fell to 0 (or below) from a baseline above 0."""
    return statistics.median(a) > 0 and (not b or statistics.median(b) <= 0)


def compare(a: Side, b: Side, rules: list[Rule]) -> Comparison:
    by_backend = a.backend is None and b.backend is None
    pa, pb = _points(a, by_backend), _points(b, by_backend)
    common = [k for k in pa if k in pb]
    # What B lost: a point of A that a rule judges and B has no value of, though B measured that workload at
    # that setting, or ran it and could not measure it (a metric, a backend, or the whole workload lost: its
    # runs failed); not a workload B does not run.
    measured = {(k[1], k[2]) for k in pb}
    ran = _ran(b, by_backend)

    def lost(k: tuple) -> bool:
        tried = (k[1], k[2]) in measured or (k[0], k[1], k[2]) in ran or (k[0], k[1], None) in ran
        return tried and any(r.matches(k[3]) for r in rules)

    keys = [k for k in pa if k in pb or lost(k)]
    labels = validity.setting_labels([(k[1], k[2]) for k in keys])
    order = {w: i for i, w in enumerate(dict.fromkeys(k[1] for k in keys))}
    keys.sort(key=lambda k: (order[k[1]], validity.setting_order(k[2]), metrics.rank(k[3]), k[0] or ""))
    points = []
    for key in keys:
        va, vb = pa[key].values, pb[key].values if key in pb else []
        point = Point(key[0], key[1], key[2], labels[(key[1], key[2])], key[3], pa[key].unit, va, vb, None)
        point.answers = (_answers(a, pa[key]), _answers(b, pb[key]) if key in pb else [])
        point.ratio, point.violations = judge(point.metric, va, vb, rules)
        points.append(point)
    if not common:

        def workloads(points: dict) -> str:
            return ", ".join(dict.fromkeys(k[1] for k in points)) or "none"

        raise UserError(
            f"{a.label} and {b.label} have no (workload, setting, metric"
            f"{', backend' if by_backend else ''}) in common: workloads of {a.label}: {workloads(pa)}; "
            f"of {b.label}: {workloads(pb)}"
        )
    for rule in rules:
        if not any(rule.matches(p.metric) and (p.ratio is not None or p.lost or p.from_zero) for p in points):
            compared = sorted({validity.base_metric(p.metric) for p in points})
            raise UserError(
                f"rule '{rule.text}' matches no metric measured in both {a.label} and {b.label} "
                f"(compared: {', '.join(compared[:12]) or 'nothing'})"
            )
    return Comparison(a, b, points, len(set(pa) - set(pb)), len(set(pb) - set(pa)), rules)


def sides(results: Path, a: str, b: str, campaign: str | None = None) -> tuple[Side, Side]:
    """Campaigns A and B (or the samples of a date, NAME@DATE or @DATE), or with `campaign` its backends A and B."""
    from iolab.report.tables import find_store

    if campaign:
        store = find_store(results, campaign)
        samples = store.samples()
        have = list(dict.fromkeys(s.backend for s in samples))
        for name in (a, b):
            if name not in have:
                raise UserError(
                    f"campaign {campaign} has no backend {name!r} (it has: {', '.join(have)}); "
                    "with --campaign, A and B name two of its backends"
                )
        return Side(a, samples, a, store), Side(b, samples, b, store)
    return _campaign_side(results, a), _campaign_side(results, b)


def _campaign_side(results: Path, name: str) -> Side:
    """A campaign's store; NAME@DATE or @DATE: the samples of that date, from the results index."""
    from iolab.report.tables import find_store

    if "@" in name:
        from iolab.results.query import samples_at

        return Side(name, samples_at(results, name))
    store = find_store(results, name)
    return Side(name, store.samples(), None, store)


def table(comparison: Comparison, metrics: tuple[str, ...] | None = None) -> Fitted:
    """The comparison, a line per point, then a row per metric (and backend) in the unit its line's header
    names; `metrics` limits it to those metrics (rule metrics are always shown)."""
    from iolab.report.tables import number, unit_scale, with_unit

    a, b = comparison.a.label, comparison.b.label
    skipped = comparison.only_a + comparison.only_b
    with_backend = any(p.backend for p in comparison.points)
    out = Fitted(
        [Column("metric"), *([Column("backend")] if with_backend else []), Column("A (n)", TEXT, "right")]
        + [Column("B (n)", TEXT, "right"), Column("B/A", NUMBER), Column("95% CI", TEXT), Column("rules", TEXT)],
        title=f"B: {b} against A: {a} (baseline): ratio of geometric means over repeats, {LEVEL:.0%} Welch "
        "t-interval on logs",
        after=[
            (f"{comparison.only_a} point(s) only in {a}, {comparison.only_b} only in {b}; " if skipped else "")
            + "✗ breaks a rule"
        ],
    )
    for p in comparison.points:
        ruled = [r for r in comparison.rules if r.matches(p.metric)]
        if metrics is not None and p.metric not in metrics and not ruled:
            continue
        ratio = p.ratio
        factor, label = unit_scale(p.unit, max(abs(statistics.median(v)) for v in (p.a, p.b) if v))

        out.add_row(
            with_unit(p.metric, label) if not any(p.answers) else p.metric,
            *([p.backend or ""] if with_backend else []),
            _side(p.a, p.answers[0], factor),
            _side(p.b, p.answers[1], factor),
            number(ratio.ratio) if ratio else ("lost" if p.lost else "—"),
            ratio.interval() if ratio else "—",
            "✗ " + "; ".join(r.text for r in p.violations) if p.violations else ("ok" if ruled else ""),
            group=f"{p.workload} {p.setting_label}".strip(),
        )
    return out


def _side(values: list[float], answers: list[str], factor: float) -> str:
    """A side's cell: its answers (a search's), else its median in the row's unit and its n."""
    from iolab.report.tables import number

    if answers:
        return "; ".join(answers)
    return f"{number(statistics.median(values) / factor)} ({len(values)})" if values else "none (0)"


class Regression(UserError):
    """A rule was broken: the lines above say which, the exit status is 1 (for CI)."""

    exit_code = 1


def run(results: Path, a: str, b: str, campaign: str | None, rules: list[str], rules_file: str | None) -> Comparison:
    """What `report.compare` does: resolve the two sides and the rules, then compare."""
    parsed = [parse_rule(r) for r in rules] + (load_rules(rules_file) if rules_file else [])
    side_a, side_b = sides(results, a, b, campaign)
    return compare(side_a, side_b, parsed)
