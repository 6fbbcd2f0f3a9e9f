"""kvcache_run_summary.json on one host (iolab.kinds.kvcache.host.summarize, both engines) → the KV-cache figures.

The summary holds the host's ranks added up as MLPerf Storage's rules add them (6.3.4), and each
rank's own figures. Both engines write it the same way from their ranks' result files, which are
kv-cache.py's (`engine: mlperf-kvcache`) or in its shape (iolab's), so one parser reads both:

    read_bw, write_bw        Σ ranks  storage-tier KV bytes read / written per second       B/s
    tokens_per_s             Σ ranks  tokens generated per second (kv-cache.py's wall-clock
                             throughput)                                                      tokens/s
    storage_tokens_per_s     Σ ranks  the rules' Storage Throughput: tokens per second of the
                             requests' summed storage time                                   tokens/s
    kv_read_p50|p95|p99      each rank's device read latency (np.load), params.rank         s
    kv_write_p50|p95|p99     each rank's device write latency (fsync), params.rank          s
    kv_read_p95_max          the most of the ranks' read P95s: the rules' latency figure
                             (max over ranks, never a pooled P95); host "*": over hosts      s
    kv_write_p95_max         the same of writes                                             s
    kv_<tier>_read_bytes     bytes read from a tier: kv_gpu_…, kv_cpu_…, kv_storage_…       B
    kv_<tier>_write_bytes    bytes written to a tier                                         B
    kv_errors                ranks that left no result, and I/O operations that failed      count

The metadata keeps every rank's figures (`kv_ranks`), the ranks that never reached the storage
(`kv_cpu_tier_ranks`, rule 6.3.4.4), the option's aggregate as written, and which tool ran.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iolab.parsers import LOWER, SUM, Measurement, Metric, Parsed, ParseError, Stored, load_json

TOOLS = ("kvcache", "mlperf_kvcache")  # both engines write the same summary (iolab.kinds.kvcache.host.summarize)
SUMMARY = "kvcache_run_summary.json"
REFERENCE_INFO = "mlperf_kvcache.json"  # iolab.kinds.kvcache.host_reference's: the kv-cache.py that ran
GIB = 1 << 30


def most_of_hosts(group: Sequence[Stored], run: Sequence[Stored]) -> tuple[float, dict[str, Any]]:
    """A max-of-P95 over every host: the most of the hosts' (each already the most of its ranks')."""
    worst = max(group, key=lambda s: s.value)
    return worst.value, {"aggregate": "the most of every host's ranks' P95s", "worst_host": worst.host}


METRICS = (
    Metric("tokens_per_s", "tokens/s", "tokens generated/s", hosts=SUM, table=64, wins=True, headline=65),
    Metric("storage_tokens_per_s", "tokens/s", "tokens per second of storage time (the rules')", hosts=SUM, table=65),
    Metric("kv_read_p95_max", "s", "the most of the ranks' read P95s", LOWER, hosts=most_of_hosts, table=66, wins=True),
    Metric("kv_write_p95_max", "s", "the most of the ranks' write P95s", LOWER, hosts=most_of_hosts, table=67),
    Metric("kv_read_p*", "s", "a rank's device read latency at a percentile", LOWER),
    Metric("kv_write_p*", "s", "a rank's device write latency at a percentile", LOWER),
    Metric("kv_*_bytes", "B", "KV bytes moved in a tier (gpu, cpu, storage)", hosts=SUM),
    Metric("kv_errors", "count", "ranks without a result, failed I/O", LOWER, hosts=SUM),
)


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value) / 1000.0


def parse(host_dir: Path) -> Parsed:
    path = Path(host_dir) / SUMMARY
    document = load_json(path, "the KV-cache workload")
    options = document.get("options")
    ranks = document.get("ranks")
    if not isinstance(options, dict) or len(options) != 1 or not isinstance(ranks, list):
        raise ParseError(f"{path}: not a KV-cache run summary (one option, its ranks)")
    option = next(iter(options.values()))
    if not ranks:
        raise ParseError(f"{path}: no rank left a result ({', '.join(option.get('missing_files', []))})")
    out = [
        Measurement("read_bw", option["aggregated_read_bandwidth_gbps"] * GIB, "B/s"),
        Measurement("write_bw", option["aggregated_write_bandwidth_gbps"] * GIB, "B/s"),
        Measurement("tokens_per_s", option["aggregated_avg_throughput_tokens_per_sec"], "tokens/s"),
        Measurement("storage_tokens_per_s", option["aggregated_storage_throughput_tokens_per_sec"], "tokens/s"),
    ]
    for op in ("read", "write"):
        most = _seconds(option.get(f"aggregated_device_{op}_p95_ms"))
        if most is not None:
            out.append(Measurement(f"kv_{op}_p95_max", most, "s"))
        for rank in ranks:
            for point, value in (rank.get(f"{op}_device_ms") or {}).items():
                if value is not None:
                    out.append(Measurement(f"kv_{op}_{point}", float(value) / 1000.0, "s", {"rank": rank["rank"]}))
    for tier in ("gpu", "cpu", "storage"):
        for op in ("read", "write"):
            moved = sum(r["tier_gib"][tier][op] for r in ranks) * GIB
            out.append(Measurement(f"kv_{tier}_{op}_bytes", moved, "B"))
    failed = len(option.get("missing_files", [])) + sum(int(r.get("errors") or 0) for r in ranks)
    out.append(Measurement("kv_errors", float(failed), "count"))
    metadata: dict[str, Any] = {
        "kv_tool": document.get("tool"),
        "kv_ranks": ranks,
        "kv_option": option,
        "kv_cpu_tier_ranks": option.get("cpu_tier_ranks", []),
    }
    info = Path(host_dir) / REFERENCE_INFO
    if info.exists():
        metadata["kv_reference"] = json.loads(info.read_text()).get("installed")
    return Parsed(out, metadata)
