"""metadata.json (iolab.kinds.metadata.host) on one host → readdir, stat and open rates.

readdir_per_s   directory entries listed per second (scandir over the whole tree)   ops/s
stat_per_s      stat calls per second over the data files                          ops/s
open_per_s      open + close pairs per second over the data files                  ops/s
"""

from __future__ import annotations

from pathlib import Path

from iolab.parsers import SUM, Measurement, Metric, Parsed, ParseError, load_json

KIND = "iolab.metadata/1"
OPERATIONS = {"readdir": "readdir_per_s", "stat": "stat_per_s", "open": "open_per_s"}
TOOLS = ("metadata",)

METRICS = (
    Metric("readdir_per_s", "ops/s", "directory entries listed per second", hosts=SUM),
    Metric("stat_per_s", "ops/s", "stat calls per second", hosts=SUM, headline=60),
    Metric("open_per_s", "ops/s", "open and close pairs per second", hosts=SUM),
)


def parse(host_dir: Path) -> Parsed:
    path = Path(host_dir) / "metadata.json"
    document = load_json(path, "the metadata benchmark")
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise ParseError(f"{path}: not a metadata result (expected kind {KIND!r})")
    out = []
    for operation, metric in OPERATIONS.items():
        found = document.get("operations", {}).get(operation)
        if not found or found.get("seconds", 0) <= 0:
            raise ParseError(f"{path}: operation {operation!r} missing or not timed")
        out.append(Measurement(metric, found["ops"] / found["seconds"], "ops/s"))
    return Parsed(
        measurements=out,
        metadata={
            "dataset_manifest_hash": document.get("manifest_hash"),
            "files": document.get("files"),
            "threads": document.get("threads"),
            "operations": document.get("operations"),
        },
    )
