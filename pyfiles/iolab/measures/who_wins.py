"""Who wins: the repeats of each point summarized per backend (median, range, spread), and at each point two
backends measured at least twice compare (the catalogue's `wins` metrics), the best, the runner-up and by how much.

    summarize(samples) → [{workload, setting, metric, backend, median, min, max, spread, agree, ...}]
    winners(rows)      → [{winner, runner_up, ratio, margin, sure, ...}]   per point of contests(rows)
"""

from __future__ import annotations

from collections import defaultdict

from iolab.measures import metrics, validity
from iolab.measures.samples import Sample
from iolab.parsers import LOWER


def lower_is_better(metric: str) -> bool:
    """Latencies, waits and costs win by being small; throughput, IOPS and AU by being large (the catalogue's
    `better`)."""
    return metrics.of(validity.base_metric(metric)).better == LOWER


def summarize(samples: list[Sample], groups: list[validity.Group] | None = None) -> list[dict]:
    """One row per (workload, setting, metric, backend): median, spread and agreement over repeats."""
    groups = validity.groups(samples) if groups is None else groups
    labels = validity.setting_labels((g.workload, g.setting) for g in groups)
    order = {w: i for i, w in enumerate(dict.fromkeys(g.workload for g in groups))}
    return [
        {
            "order": order[g.workload],
            "workload": g.workload,
            "setting": g.setting,
            "setting_label": labels[(g.workload, g.setting)],
            "metric": g.metric,
            "backend": g.backend,
            "median": g.median,
            "min": min(g.values),
            "max": max(g.values),
            "n": len(g.values),
            "spread": g.spread,
            "agree": g.agree,
            "unit": g.unit,
            "run_ids": list(dict.fromkeys(g.run_ids)),
        }
        for g in groups
    ]


def contests(rows: list[dict]) -> dict[tuple, list[dict]]:
    """(workload, setting, metric) the catalogue says `wins` compares, measured on two backends or more → its rows
    that were measured at least twice (a range to compare: a search's single probes have none), in campaign order.
    """
    by_point: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        if row["metric"] in metrics.named("wins"):
            by_point[(row["workload"], row["setting"], row["metric"])].append(row)
    return {
        point: [r for r in contenders if r["n"] >= 2]
        for point, contenders in sorted(
            by_point.items(),
            key=lambda kv: (kv[1][0]["order"], validity.setting_order(kv[0][1]), metrics.rank(kv[0][2])),
        )
        if len(contenders) >= 2
    }


def winners(rows: list[dict]) -> list[dict]:
    """Per point of `contests` with two backends measured at least twice: the best, the runner-up, by how much.

    `ratio` is how many times better the winner is (≥ 1: best/second for
    throughput, second/best for latency). `sure` says whether the repeats keep
    them apart: 'yes' when the winner's worst repeat beats the runner-up's best,
    'overlap' when their ranges overlap. A point measured once on a backend (a
    search's probe) compares nothing and is left out.
    """
    out = []
    for (workload, setting, metric), contenders in contests(rows).items():
        if len(contenders) < 2:
            continue
        low = lower_is_better(metric)
        ranked = sorted(contenders, key=lambda r: r["median"], reverse=not low)
        best, second = ranked[0], ranked[1]
        if low:
            ratio = second["median"] / best["median"] if best["median"] else float("inf")
            apart = best["max"] < second["min"]
        else:
            ratio = best["median"] / second["median"] if second["median"] else float("inf")
            apart = best["min"] > second["max"]
        sure = "yes" if apart else "overlap"
        out.append(
            {
                "workload": workload,
                "setting": setting,
                "setting_label": best["setting_label"],
                "metric": metric,
                "unit": best["unit"],
                "winner": best["backend"],
                "best": best["median"],
                "runner_up": second["backend"],
                "second": second["median"],
                "ratio": ratio,
                "margin": margin(ratio, low),
                "sure": sure,
                "lower_is_better": low,
                "run_ids": best["run_ids"] + second["run_ids"],
            }
        )
    return out


def margin(ratio: float, lower: bool) -> str:
    """'6.8×', '+23%' (or '23% lower' for a latency): how much better the winner is."""
    if ratio == float("inf"):
        return "∞"
    if ratio >= 2:
        times = f"{ratio:,.0f}×" if ratio >= 10 else f"{ratio:.1f}×"
        return times + (" lower" if lower else "")
    if lower:
        return f"{(1 - 1 / ratio) * 100:.0f}% lower"
    return f"+{(ratio - 1) * 100:.0f}%"
