"""The report's answer for a replayed trace: per backend, its time at recorded timing, its stall, its fast rate."""

from __future__ import annotations

from iolab.measures.samples import Sample
from iolab.report import replay


def _sample(backend: str, timing: str, metric: str, value: float, rep: int = 1, host: str = "*") -> Sample:
    unit = "B/s" if metric == "replay_bw" else "s"
    params = {"trace": "3f2a0c1d9e8b7a65", "timing": timing, "processes": 1}
    return Sample("c", f"r{rep}", rep, host, backend, f"job-{timing}", metric, value, unit, "", "", params, {})


def test_each_backend_gets_its_line_with_the_medians_over_repetitions():
    samples = [
        *(_sample("nvme", "recorded", "replay_s", v, rep) for rep, v in enumerate((8.0, 8.2, 9.0), start=1)),
        *(_sample("nvme", "recorded", "replay_stall_s", v, rep) for rep, v in enumerate((0.0, 0.2, 1.0), start=1)),
        _sample("nvme", "fast", "replay_bw", 2.5 * (1 << 30)),
        _sample("nvme", "fast", "replay_bw", 9e9, host="gpu01"),  # a host's own, not the aggregate
        _sample("nfs", "recorded", "replay_s", 12.5),
        _sample("nfs", "recorded", "replay_stall_s", 4.5),
    ]
    assert replay.answers(samples) == {
        "3f2a0c1d9e8b7a65": [
            "nvme: this job's I/O on it: finishes in 8.2 s at recorded timing (stalls 0.2 s) / 2.5 GiB/s as fast as "
            "possible",
            "nfs: this job's I/O on it: finishes in 12.5 s at recorded timing (stalls 4.5 s)",
        ]
    }
    assert replay.table([s for s in samples if s.metric == "cpu"]) is None
