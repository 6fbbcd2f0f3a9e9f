"""MLPerf Storage v3.0's rules for the KV-cache workload (its rules document, section 6; docs/REFERENCE_FIGURES.md).

    OPTIONS[2]                       the CLOSED option 2's settings (Table KVCache-1)
    apply(entry)                     `mlperf: true` on a kvcache entry: what the rules fix, where the file is silent
    run_rules(params, repeats)       (flag, why) for each rule a run's settings break
    result_rules(samples)            (flag, why) for each rule a run's results break (every rank in memory)

A CLOSED submission runs three options (Table KVCache-1), each three times (trials) with seed 42 and
90 s between options; a client is an MPI rank and load grows by clients, each with the option's users.
iolab applies them as a campaign's `mlperf: true` asks: a kvcache entry without `option` becomes the
three options (a sweep), each key the file leaves out takes the option's value, and any key it sets
otherwise is kept and flagged, by the number of the rule it breaks (workloads.mlperf.RULES).
"""

from __future__ import annotations

from typing import Any

GIB = 1 << 30
# Table KVCache-1: the CLOSED options, as iolab's keys (tiers in bytes).
OPTIONS: dict[int, dict[str, Any]] = {
    1: {"model": "llama3.1-8b", "users": 200, "duration": 300.0, "gpu_bytes": 0, "cpu_bytes": 0,
        "concurrent_allocs": 16},
    2: {"model": "llama3.1-8b", "users": 100, "duration": 300.0, "gpu_bytes": 0, "cpu_bytes": 4 * GIB,
        "concurrent_allocs": 16},
    3: {"model": "llama3.1-70b", "users": 70, "duration": 300.0, "gpu_bytes": 0, "cpu_bytes": 0,
        "concurrent_allocs": 4},
}  # fmt: skip
# Rule 6.3.2.1's sequence locks and rule 6.6.1's other fixed settings.
SEED = 42
TRIALS = 3
PAUSE_S = 90.0
FIXED = {"generation": "none", "context_scale": 1.0, "seed": SEED}


def apply(entry: dict[str, Any]) -> dict[str, Any]:
    """A kvcache entry under `mlperf: true`: the three options when it names none; 3 trials and the 90 s pause
    where it gives none. The option's own values stand for the keys it leaves out (KvcacheWorkload.settled)."""
    out = {"option": [1, 2, 3], "trials": TRIALS, "pause": PAUSE_S, **entry}
    if isinstance(out.get("option"), list) and len(out["option"]) == 1:
        out["option"] = out["option"][0]
    return out


def run_rules(params: dict[str, Any], repeats: int) -> list[tuple[str, str]]:
    """(flag, why) for each rule a kvcache run's settings break: its option's table values (6.3.1.1), the other
    settings CLOSED fixes (6.6.1), the sequence (6.3.2.1: seed, `repeats` trials, the pause); under mlperf_rules."""
    if not params.get("mlperf_rules"):
        return []
    option = params.get("option")
    if option not in OPTIONS:
        return [("mlperf_kv_option", "no CLOSED option named (option: 1, 2 or 3)")]
    broken = []
    table = OPTIONS[option]
    differ = [f"{k} {params.get(k)!r} (option {option}: {v!r})" for k, v in table.items() if params.get(k) != v]
    if differ:
        broken.append(("mlperf_kv_option", f"option {option} run with " + ", ".join(differ)))
    other = [f"{k} {params.get(k)!r} (CLOSED: {v!r})" for k, v in FIXED.items() if params.get(k, v) != v]
    if params.get("search"):
        other.append(f"search: {params['search']} (CLOSED runs each option as it is)")
    if other:
        broken.append(("mlperf_kv_fixed", ", ".join(other)))
    if repeats < TRIALS or (params.get("pause") or 0.0) < PAUSE_S:
        broken.append(
            (
                "mlperf_kv_sequence",
                f"{repeats} trial(s) recorded, {params.get('pause') or 0:g} s before the option's first; "
                f"CLOSED asks for {TRIALS} trials and {PAUSE_S:g} s between options",
            )
        )
    return broken


def result_rules(metadata: dict[str, Any], params: dict[str, Any]) -> list[tuple[str, str]]:
    """(flag, why) for rule 6.3.4.4: a run whose every rank kept its working set in memory measured no storage
    latency. From one host's sample metadata; under mlperf_rules."""
    if not params.get("mlperf_rules"):
        return []
    ranks = metadata.get("kv_ranks") or []
    if ranks and all(r.get("storage_entries") == 0 for r in ranks):
        return [("mlperf_kv_cpu_tier", f"all {len(ranks)} rank(s) served their working set from memory tiers")]
    return []
