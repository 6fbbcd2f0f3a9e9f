"""Backend kind `s3`: a bucket (and key prefix) of an S3 endpoint, such as the lab's Ceph radosgw.

Nothing is mounted: role storage_s3 checks that each host reaches the endpoint and the
bucket with the backend's credentials, and the workloads that speak S3 (type objects,
the pytorch reader s3) get the endpoint, bucket, prefix, region and the credentials'
*source* as role variables (the loader's host call hands it to reader s3 as $IOLAB_S3). The
keys themselves stay in the credentials file on the hosts (or in their environment) and never
reach a campaign, a command line, a result or a log (docs/DESIGN.md, "Secrets").

The campaign's data set is staged by role storage_s3 as it checks the bucket: each host
generates it in its own directory, STAGING/<backend>/iolab-<host>/dataset, with role dataset_gen
(whose preflight refuses a disk without room for it before a file is written; the loader reads
the manifest there; hosts that share a disk, as simulated hosts do, never write into one
directory), and the first host uploads it once, one object per sample, under
<prefix>/dataset/ with its manifest last (iolab.host.dataset.s3stage).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator

from iolab import faults
from iolab.backends.base import DATASET_DIR, LAB_CEPH_DIR, Backend, Workload, host_root
from iolab.schema import AbsPath, Bool, Name

if TYPE_CHECKING:
    from iolab.schema import Dataset

# What `invoke lab.services-up` publishes (roles/service_ceph, defaults): radosgw on loopback.
LAB_S3 = {
    "endpoint": "http://127.0.0.1:7480",
    "bucket": "iolab",
    "region": "us-east-1",
    "credentials": f"{LAB_CEPH_DIR}/s3.credentials",
}
# Where hosts keep their generated copies of the campaign's data set: <STAGING>/<backend>/iolab-<host>/dataset.
STAGING = "/opt/iolab/s3-staging"


def _endpoint(value: str) -> str:
    match = re.fullmatch(r"https?://[A-Za-z0-9.\-]+(?::([0-9]{1,5}))?/?", value)
    if not match:
        raise ValueError(f"{value!r} is not an S3 endpoint: give http(s)://HOST[:PORT], e.g. http://10.77.0.1:7480")
    if match[1] is not None and not 1 <= int(match[1]) <= 65535:
        raise ValueError(f"{value!r}: port {int(match[1])} is not a TCP port (1 to 65535)")
    return value.rstrip("/")


def _bucket(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]", value) or ".." in value:
        raise ValueError(f"{value!r} is not a bucket name: 3 to 63 lower-case letters, digits, '.' and '-'")
    return value


def _prefix(value: str) -> str:
    parts = value.strip("/").split("/") if value.strip("/") else []
    if any(p in ("", ".", "..") or not re.fullmatch(r"[A-Za-z0-9._\-]+", p) for p in parts):
        raise ValueError(
            f"{value!r} is not a key prefix: '/'-separated names of letters, digits, '.', '_' and '-' (no '..')"
        )
    return "/".join(parts)


def _region(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9\-]{1,32}", value):
        raise ValueError(f"{value!r} is not a region name (e.g. us-east-1)")
    return value


class S3Backend(Backend):
    """A bucket of an S3 endpoint; objects go under `prefix`/iolab-<host>/ (each host its own keys).

    credentials: a file on the hosts in AWS's shared-credentials format (profile
    default; the lab's by default), or `env`: the hosts' own AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY (boto3's default chain).
    """

    fault_kinds: ClassVar[tuple[str, ...]] = (*faults.EVERYWHERE, "rgw_stop")
    name: Name
    type: Literal["s3"]
    endpoint: Annotated[str, AfterValidator(_endpoint)] = LAB_S3["endpoint"]
    bucket: Annotated[str, AfterValidator(_bucket)] = LAB_S3["bucket"]
    prefix: Annotated[str, AfterValidator(_prefix)] = ""
    region: Annotated[str, AfterValidator(_region)] = LAB_S3["region"]
    credentials: AbsPath | Literal["env"] = LAB_S3["credentials"]
    readonly: Bool = False

    @property
    def target(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    stages_dataset: ClassVar[bool] = True

    def places(self) -> list[tuple[str, str, bool]]:
        return []  # nothing is mounted; the staging directory is iolab's own

    @property
    def staging(self) -> str:
        """Where the hosts generate their copies of the data set, each under iolab-<host>/ as on a writable backend:
        the loader reads its host's manifest there (the samples come from the bucket)."""
        return f"{STAGING}/{self.name}"

    def client(self) -> dict[str, Any]:
        """How a host reaches the bucket: endpoint, bucket, prefix, region and where the keys are (not the keys)."""
        return {
            "endpoint": self.endpoint,
            "bucket": self.bucket,
            "prefix": self.prefix,
            "region": self.region,
            "credentials": self.credentials,
        }

    def role_vars(self, state: str, dataset: Dataset | None = None, formats: Sequence[str] = ()) -> dict[str, Any]:
        """The storage role's variables; with the campaign's data set, what role storage_s3 stages."""
        variables = super().role_vars(state, dataset, formats)
        if dataset is not None:
            variables |= {"storage_s3_dataset": dataset.identity(), "storage_s3_staging": self.staging}
        return variables

    def dataset_note(self) -> str | None:
        return (
            f"each host makes its copy in {host_root(self.staging, '<host>')} (refused first where that disk has no "
            f"room for it), the first host uploads it to {self.target.rstrip('/')}/{DATASET_DIR}/"
        )

    def run_vars(self, workload: Workload, variables: dict[str, Any]) -> dict[str, Any]:
        """The connection for the workload's role (the loader's host call gives it to reader s3 as $IOLAB_S3). The
        loader's host facts and telemetry describe the staging copy's disk (the bucket has no local device)."""
        local = {"bench_pytorch_target": self.staging} if workload.tool == "pytorch" else {}
        return {**variables, **local, f"bench_{workload.tool}_s3": self.client()}
