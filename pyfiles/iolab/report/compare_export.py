"""report.compare's machine-readable output: `--format json` (schema iolab.compare/1, described in
iolab.report.compare's docstring) and `--format junit` (a test case per check, for a CI's test report)."""

from __future__ import annotations

import datetime as dt
import json
import socket
import statistics

from iolab.measures.welch import LEVEL
from iolab.report.compare import FAILED, PASSED, SKIPPED, Check, Comparison
from iolab.units import printable

JSON_SCHEMA = "iolab.compare/1"


def _side(values: list[float]) -> dict:
    return {"median": statistics.median(values) if values else None, "n": len(values), "values": values}


def to_dict(comparison: Comparison) -> dict:
    """The comparison as `--format json` prints it (the shape is in the module's docstring)."""
    checks: dict[int, list[Check]] = {}
    for check in comparison.checks():
        checks.setdefault(id(check.point), []).append(check)
    points = []
    for p in comparison.points:
        r = p.ratio
        points.append(
            {
                "workload": p.workload,
                "setting": json.loads(p.setting),
                "setting_label": p.setting_label,
                "metric": p.metric,
                "backend": p.backend,
                "unit": p.unit,
                "baseline": _side(p.a),
                "candidate": _side(p.b),
                "ratio": r.ratio if r else None,
                "change": r.change if r else None,
                "low": r.low if r else None,
                "high": r.high if r else None,
                "lost": p.lost,
                "answers": {"baseline": p.answers[0], "candidate": p.answers[1]} if p.answers[0] else None,
                "checks": [
                    {"rule": c.rule.text, "outcome": c.outcome, "message": c.message} for c in checks.get(id(p), [])
                ],
            }
        )
    return {
        "schema": JSON_SCHEMA,
        "baseline": comparison.a.label,
        "candidate": comparison.b.label,
        "level": LEVEL,
        "rules": [r.text for r in comparison.rules],
        "only_in_baseline": comparison.only_a,
        "only_in_candidate": comparison.only_b,
        "regressions": len(comparison.violations()),
        "points": points,
    }


def to_json(comparison: Comparison) -> str:
    return printable(json.dumps(to_dict(comparison), indent=1, ensure_ascii=False))


def to_junit(comparison: Comparison, timestamp: dt.datetime | None = None, hostname: str | None = None) -> str:
    """JUnit XML as Jenkins, GitLab and the Ant junit task read it: a test case per rule and point.

    One <testsuite> for the comparison; each test case's classname is the workload
    (with its setting), its name the metric, backend and rule; a broken rule is a
    <failure type="regression">, a point without a ratio (a median of 0) <skipped>.
    """
    from xml.etree import ElementTree as ET

    from iolab.report.tables import point_label

    checks = comparison.checks()
    count = {o: sum(c.outcome == o for c in checks) for o in (FAILED, SKIPPED)}
    stamp = (timestamp or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%S")
    title = f"report.compare {comparison.b.label} against {comparison.a.label}"
    totals = {"tests": str(len(checks)), "failures": str(count[FAILED]), "errors": "0", "time": "0"}
    root = ET.Element("testsuites", {"name": title, **totals})
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": title,
            "package": "iolab.report.compare",
            "id": "0",
            "timestamp": stamp,
            "hostname": hostname or socket.gethostname(),
            **totals,
            "skipped": str(count[SKIPPED]),
        },
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in [
        ("baseline", comparison.a.label),
        ("candidate", comparison.b.label),
        ("level", f"{LEVEL:g}"),
        *(("rule", r.text) for r in comparison.rules),
    ]:
        ET.SubElement(properties, "property", {"name": name, "value": value})
    for c in checks:
        p = c.point
        name = p.metric + (f" on {p.backend}" if p.backend else "") + f": {c.rule.text}"
        case = ET.SubElement(
            suite, "testcase", {"name": name, "classname": point_label(p.workload, p.setting_label), "time": "0"}
        )
        if c.outcome == FAILED:
            ET.SubElement(
                case, "failure", {"message": c.message, "type": "regression"}
            ).text = f"baseline {comparison.a.label}: {p.a}\ncandidate {comparison.b.label}: {p.b} ({p.unit})"
        elif c.outcome == SKIPPED:
            ET.SubElement(case, "skipped", {"message": c.message})
    ET.SubElement(suite, "system-out").text = "\n".join(c.message for c in checks if c.outcome == PASSED)
    ET.SubElement(suite, "system-err").text = "\n".join(c.message for c in checks if c.outcome == FAILED)
    ET.indent(root)
    return printable(ET.tostring(root, encoding="unicode", xml_declaration=True)) + "\n"
