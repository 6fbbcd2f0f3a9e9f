"""Reader s3: each sample one object of an s3 backend's bucket, read with s3torchconnector."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from typing import Any

from iolab.host.dataset.manifest import Manifest
from iolab.host.dataset.s3stage import DATASET
from iolab.shared.protocol import S3_ENV


class S3Objects:
    """Sample i's bytes as one GET of its object, through s3torchconnector (AWS's S3 client for PyTorch).

    The manifest's own copy in the bucket must be the loader's (same hash) before any
    sample is read. The first read of each sample (the first epoch: every worker shares
    the flags) checks its bytes against the manifest's size and sha256.
    """

    def __init__(self, conn: dict[str, Any], manifest: Manifest):
        from s3torchconnector import S3ClientConfig, S3MapDataset

        from iolab.host import s3client

        os.environ.update({name.upper(): value for name, value in s3client.keys(conn["credentials"]).items()})
        self.base = s3client.key(conn, DATASET)
        uris = [f"s3://{conn['bucket']}/{self.base}/{e.path}" for e in manifest.entries]
        self.dataset = S3MapDataset.from_objects(
            [f"s3://{conn['bucket']}/{self.base}/manifest.jsonl", *uris],
            region=conn["region"],
            endpoint=conn["endpoint"],
            s3client_config=S3ClientConfig(force_path_style=True),
        )
        self.entries = manifest.entries
        self.checked = multiprocessing.RawArray("b", len(manifest.entries))
        stored = hashlib.sha256(self.dataset[0].read()).hexdigest()
        if stored != manifest.hash:
            raise ValueError(
                f"s3://{conn['bucket']}/{self.base}/manifest.jsonl is another data set's ({stored[:12]}, "
                f"the loader's is {manifest.hash[:12]}): stage the campaign's data set again"
            )

    @classmethod
    def from_env(cls, manifest: Manifest) -> S3Objects:
        if not os.environ.get(S3_ENV):
            raise ValueError(f"reader s3 reads an s3 backend's bucket: ${S3_ENV} names none (run it on an s3 backend)")
        from iolab.host import s3client

        return cls(s3client.connection(os.environ[S3_ENV]), manifest)

    def read(self, i: int) -> bytes:
        data = self.dataset[i + 1].read()
        if not self.checked[i]:
            entry = self.entries[i]
            digest = hashlib.sha256(data).hexdigest()
            if len(data) != entry.size or digest != entry.sha256:
                raise ValueError(
                    f"{self.base}/{entry.path}: {len(data)} bytes, sha256 {digest[:16]}…, differ "
                    f"from the manifest's sample ({entry.size} bytes, {entry.sha256[:16]}…): the "
                    "bucket's copy is damaged; stage the data set again"
                )
            self.checked[i] = 1
        return data

    def read_into(self, i: int, view: memoryview) -> None:
        view[:] = self.read(i)
