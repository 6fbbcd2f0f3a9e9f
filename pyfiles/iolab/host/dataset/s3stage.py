"""Stage a generated data set in an S3 bucket: one object per sample, then its manifest (host side, boto3).

    python -m iolab.host.dataset.s3stage --s3 CONNECTION_JSON --root DATASET_DIR [--threads 16]

The samples go to <prefix>/dataset/<the manifest's path>, and manifest.jsonl last, so
that its presence means the data set is complete (as on a file system). A bucket whose
manifest is already this data set's (same bytes) is left as it is: the data set is
uploaded once, whatever number of runs and mounts follow. Prints one JSON object:
{"staged": true|false, "objects": N, "bytes": B, "seconds": S}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from iolab.host import s3client
from iolab.host.dataset.manifest import MANIFEST_NAME, Manifest

DATASET = "dataset"  # the data set's keys under the backend's prefix (iolab.host.loader.s3_objects reads them)


def stored_manifest(s3, bucket: str, key: str) -> bytes | None:
    """The bucket's manifest object, or None when there is none."""
    from botocore.exceptions import ClientError

    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise


def stage(conn: dict, root: Path, threads: int = 16) -> dict:
    """Upload the data set at `root` unless the bucket holds it already; what was done."""
    manifest = Manifest.load(root)
    local = (root / MANIFEST_NAME).read_bytes()
    s3, bucket, base = s3client.client(conn, retries=3), conn["bucket"], s3client.key(conn, DATASET)
    started = time.time()
    if stored_manifest(s3, bucket, f"{base}/{MANIFEST_NAME}") == local:
        return {"staged": False, "objects": manifest.files, "bytes": manifest.total_bytes, "seconds": 0.0}
    s3.delete_object(Bucket=bucket, Key=f"{base}/{MANIFEST_NAME}")  # incomplete until the last upload

    def put(path: str) -> None:
        s3.put_object(Bucket=bucket, Key=f"{base}/{path}", Body=(root / path).read_bytes())

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, [e.path for e in manifest.entries]))
    s3.put_object(Bucket=bucket, Key=f"{base}/{MANIFEST_NAME}", Body=local)
    return {
        "staged": True,
        "objects": manifest.files,
        "bytes": manifest.total_bytes,
        "seconds": round(time.time() - started, 3),
    }


def main(args: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m iolab.host.dataset.s3stage", description=__doc__.split("\n")[0])
    p.add_argument("--s3", required=True, help="the s3 backend's connection (JSON; names the credentials' source)")
    p.add_argument("--root", type=Path, required=True, help="the generated data set (its manifest.jsonl)")
    p.add_argument("--threads", type=int, default=16, help="uploads in flight")
    opts = p.parse_args(args)
    try:
        print(json.dumps(stage(s3client.connection(opts.s3), opts.root, opts.threads)))
    except Exception as exc:  # botocore's errors, an unreachable endpoint, no data set at --root
        print(f"staging {opts.root} in S3: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
