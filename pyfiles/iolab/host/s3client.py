"""An S3 client for the host side (boto3) from a backend's connection: endpoint, bucket, prefix, region, credentials.

The connection names where the keys are, never the keys: `credentials` is a file in AWS's
shared-credentials format (profile default, as role service_ceph writes it) or `env`,
boto3's default chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ... of this process).
"""

from __future__ import annotations

import configparser
import json
from typing import Any

POOL = 64  # connections a client keeps: more than any thread count or worker pool here


def connection(text: str) -> dict[str, Any]:
    """The backend's connection from its JSON (a command-line argument); ValueError if a key is missing."""
    conn = json.loads(text)
    missing = [k for k in ("endpoint", "bucket", "prefix", "region", "credentials") if k not in conn]
    if missing:
        raise ValueError(f"--s3: missing {', '.join(missing)} (the s3 backend's connection)")
    return conn


def keys(credentials: str) -> dict[str, str]:
    """boto3's key arguments from a credentials file; {} for `env` (boto3 looks them up itself)."""
    if credentials == "env":
        return {}
    profile = configparser.ConfigParser()
    try:
        with open(credentials) as file:
            profile.read_file(file)
        return {
            "aws_access_key_id": profile["default"]["aws_access_key_id"],
            "aws_secret_access_key": profile["default"]["aws_secret_access_key"],
        }
    except (OSError, KeyError, configparser.Error) as exc:
        raise ValueError(
            f"S3 credentials {credentials}: not readable as an AWS credentials file with "
            f"aws_access_key_id and aws_secret_access_key in [default] ({exc.__class__.__name__})"
        ) from None


def client(conn: dict[str, Any], retries: int = 1) -> Any:
    """A boto3 S3 client for the connection; `retries` 1 makes a failed request an error, not a slow request."""
    import boto3
    from botocore.config import Config

    config = Config(
        region_name=conn["region"],
        max_pool_connections=POOL,
        s3={"addressing_style": "path"},
        retries={"total_max_attempts": retries, "mode": "standard"},
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=conn["endpoint"], config=config, **keys(conn["credentials"])
    )


def key(conn: dict[str, Any], *parts: str) -> str:
    """An object key under the backend's prefix."""
    return "/".join(p for p in (conn["prefix"], *parts) if p)


def delete_prefix(s3: Any, bucket: str, prefix: str) -> int:
    """Delete every object under `prefix/`; the number deleted."""
    deleted = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/"):
        batch = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if batch:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
            deleted += len(batch)
    return deleted
