"""A run's files on the controller: each host's archives (in its output, or fetched by collect.yml) unpacked into
results/<campaign>/raw/<run_id>/<host>/; an archive that cannot be read fails its host, a full results disk stops
the command (StoreError) before more is lost.

    unpack(result, raw_dir, hosts) → the hosts whose files must be fetched
    extract(result, host, data, host_dir)
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO

from iolab.drive import runner
from iolab.errors import DISK_ERRORS, StoreError


def unpack(result: runner.Result, raw_dir: Path, hosts: list[str]) -> list[str]:
    """Put the files each host returned in its output in raw_dir/<host>/; return the hosts whose files must
    be fetched (too large to come back in the output)."""
    fetch = []
    for host in hosts:
        outcome = result.hosts.get(host)
        if outcome is None or outcome.unreachable:
            continue
        for archive in outcome.archives:  # a failure's record may follow the run's own files
            extract(result, host, io.BytesIO(archive), raw_dir / host)
        if not outcome.archives and outcome.ok and not outcome.failed:
            fetch.append(host)
    return fetch


def extract(result: runner.Result, host: str, data: IO[bytes], host_dir: Path) -> None:
    """Unpack a host's run archive into host_dir; an unreadable one fails the host in `result`."""
    import tarfile
    import zlib

    try:
        host_dir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=data) as tar:
            tar.extractall(host_dir, filter="data")
    except OSError as exc:
        if exc.errno in DISK_ERRORS:  # the results disk, not the host: stop before more is lost
            raise StoreError(
                f"could not store the files of {host} in {host_dir}: {exc.strerror}; that run is not "
                "stored (a resume runs it again); free space on the results disk or point "
                "$IOLAB_RESULTS elsewhere, then run the same command again"
            ) from None
        _unreadable(result, host, exc)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        _unreadable(result, host, exc)


def _unreadable(result: runner.Result, host: str, exc: BaseException) -> None:
    """Fail `host` in `result`: the archive it returned cannot be read."""
    outcome = result.hosts.setdefault(host, runner.HostOutcome(host))
    outcome.failed, outcome.task = True, "unpack the run's files on the controller"
    outcome.message = f"the archive that came back is unreadable ({exc.__class__.__name__}: {exc})"
