"""iolab's KV-cache clients against MLCommons' kv-cache.py: the same settings and storage, trials interleaved.

    sudo .venv/bin/python bench/kvcache_agreement.py --source /path/to/mlcommons-storage/kv_cache_benchmark
                                                     [--config two-clients|one-client-70b]
                                                     [--backends tmpfs,local:/var/tmp] [--trials 3] [--model M]
                                                     [--users N] [--clients N] [--duration S] [--scale F]

One campaign on this machine (`bench.all --allow-commands`, localhost): on each backend, trial after trial,
iolab's clients (engine iolab) then kv-cache.py under mpirun (engine mlperf-kvcache, installed from
--source into the hosts' virtualenv), each a run of its own with the caches dropped before it, no GPU or
CPU tier, in one of CONFIGS (a flag given overrides its value). Prints, per backend and engine, each
trial's read GiB/s and max-of-P95 device read latency (ms), their medians, and the difference of iolab's
median from the reference's (%).

The target: read GiB/s within 15 %; a larger gap is to be explained from both codes (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from _common import lab, samples, write_campaign

ENGINES = {"iolab": {}, "reference": {"engine": "mlperf-kvcache"}}
# Configurations of different regimes, so that an agreement in one is not taken for all (docs/PERFORMANCE.md):
CONFIGS = {
    # two clients of few users, the smaller model, large entries (up to 195 MiB), 30 s
    "two-clients": {"model": "llama3.1-8b", "users": 4, "clients": 2, "duration": 30, "scale": 1 / 16},
    # the larger model, one client of more users, a longer run, smaller entries (up to 122 MiB)
    "one-client-70b": {"model": "llama3.1-70b", "users": 12, "clients": 1, "duration": 60, "scale": 1 / 64},
}


def campaign(args: argparse.Namespace, backends: list[dict]) -> dict:
    common = {
        "type": "kvcache",
        "model": args.model,
        "users": args.users,
        "clients": args.clients,
        "duration": f"{args.duration}s",
        "context_scale": args.scale,
        "concurrent_allocs": 16,
    }
    workloads = [
        {"name": f"{engine}-t{trial}", **common, **extra} | ({"kvcache_source": args.source} if extra else {})
        for trial in range(1, args.trials + 1)
        for engine, extra in ENGINES.items()
    ]
    return {"name": "kvcache-agreement", "backends": backends, "workloads": workloads}


def backend_of(spec: str) -> dict:
    if spec.startswith("local:"):
        return {"name": "bench-kv-local", "type": "local", "path": spec.split(":", 1)[1]}
    return {"name": "bench-kv-tmpfs", "type": "tmpfs", "size": "3GiB"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="kv-cache.py's folder (kv_cache_benchmark) or git+URL@COMMIT")
    parser.add_argument("--backends", default="tmpfs,local:/var/tmp")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--config", choices=CONFIGS, default="two-clients", help="the values of the flags below")
    parser.add_argument("--model", choices=("llama3.1-8b", "llama3.1-70b"))
    parser.add_argument("--users", type=int, help="per client")
    parser.add_argument("--clients", type=int, help="per host")
    parser.add_argument("--duration", type=int, help="seconds per trial")
    parser.add_argument("--scale", type=float, help="the contexts' scale (entries of a lab's size)")
    args = parser.parse_args()
    for key, value in CONFIGS[args.config].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    print(
        f"{args.config}: {args.model}, {args.clients} client(s) × {args.users} user(s), {args.duration} s a trial, "
        f"contexts × {args.scale:g}, {args.trials} trial(s) per engine"
    )
    results = Path(tempfile.mkdtemp(prefix="iolab-kvcache-agreement-"))
    data = campaign(args, [backend_of(spec) for spec in args.backends.split(",")])
    lab("bench.all", "--campaign", str(write_campaign(data)), "--allow-commands", results=results)
    found = samples(results, "kvcache-agreement")
    print(f"results in {results}")
    print(f"{'backend':<16} {'engine':<10} {'read GiB/s per trial':<28} {'median':>7}  ", end="")
    print(f"{'P95 ms per trial':<24} {'median':>7}")
    medians: dict[tuple[str, str], tuple[float, float]] = {}
    for backend in dict.fromkeys(s["backend"] for s in found):
        for engine in ENGINES:

            def trials(metric: str, scale: float, engine: str = engine, backend: str = backend) -> list[float]:
                return [
                    s["value"] / scale
                    for s in found
                    if s["backend"] == backend and s["host"] == "*" and s["metric"] == metric
                    and s["workload"].startswith(f"{engine}-")
                ]  # fmt: skip

            read, p95 = trials("read_bw", 2**30), trials("kv_read_p95_max", 1e-3)
            if not read:
                print(f"{backend:<16} {engine:<10} no result")
                continue
            read_median, p95_median = medians[(backend, engine)] = (statistics.median(read), statistics.median(p95))
            print(f"{backend:<16} {engine:<10} {' '.join(f'{v:.3f}' for v in read):<28} {read_median:>7.3f}  ", end="")
            print(f"{' '.join(f'{v:.1f}' for v in p95):<24} {p95_median:>7.1f}")
        if (backend, "iolab") in medians and (backend, "reference") in medians:
            (ri, pi), (rr, pr) = medians[(backend, "iolab")], medians[(backend, "reference")]
            print(f"{backend:<16} iolab − reference: read {100 * (ri - rr) / rr:+.1f} %, ", end="")
            print(f"P95 {100 * (pi - pr) / pr:+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
