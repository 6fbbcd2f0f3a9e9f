"""objects.json (iolab.kinds.objects.host) on one host → object PUT and GET figures, in the names fio's figures use.

    write_bw, read_bw             PUT, GET bytes over the window after the ramp     B/s
    write_iops, read_iops         PUT, GET requests completed per second           IOPS
    write_clat_p50/p90/p99/p999   PUT latency: request start to response end       ns
    read_clat_p50/p90/p99/p999    GET latency: request start to the body's last byte  ns

The shared names put an S3 bucket's figures in the same report rows as a file backend's;
the metadata says they are object requests (object_size, client). Per-second series of
the B/s and IOPS figures let the aggregate add the hosts up over their common window.
"""

from __future__ import annotations

from pathlib import Path

from iolab.parsers import Measurement, Parsed, ParseError, load_json, stderr_hint

FILE = "objects.json"
DIRECTIONS = {"put": "write", "get": "read"}


TOOLS = ("objects",)


def parse(host_dir: Path) -> Parsed:
    path = Path(host_dir) / FILE
    document = load_json(path, "the object benchmark")
    out, series = [], {}
    for phase, direction in DIRECTIONS.items():
        record = document.get("phases", {}).get(phase)
        if not record:
            raise ParseError(f"{path}: no {phase.upper()} phase recorded{stderr_hint(path)}")
        opens, closes = record["window"]
        seconds = closes - opens
        if seconds <= 0 or record["requests"] <= 0:
            raise ParseError(f"{path}: the {phase.upper()} phase has {record['requests']} requests in {seconds} s")
        out += [
            Measurement(f"{direction}_bw", record["bytes"] / seconds, "B/s"),
            Measurement(f"{direction}_iops", record["requests"] / seconds, "IOPS"),
        ]
        out += [
            Measurement(f"{direction}_clat_{name}", float(record["latency_ns"][name]), "ns")
            for name in ("p50", "p90", "p99", "p999")
        ]
        series[f"{direction}_bw"] = [(t, float(moved)) for t, moved, _ in record["series"]]
        series[f"{direction}_iops"] = [(t, float(requests)) for t, _, requests in record["series"]]
    return Parsed(
        measurements=out,
        series=series,
        metadata={
            "object_client": f"{document.get('client')} {document.get('boto3', '')}".strip(),
            "object_size": document["size"],
            "object_threads": document["threads"],
            "object_keys": document["objects"],
            "object_endpoint": document["endpoint"],
            "object_bucket": document["bucket"],
            "object_requests": {phase: document["phases"][phase]["requests"] for phase in DIRECTIONS},
            "object_latency_ns": {phase: document["phases"][phase]["latency_ns"] for phase in DIRECTIONS},
        },
    )
