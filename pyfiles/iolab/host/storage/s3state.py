"""An s3 backend put in place or taken away in one call (host side; roles/storage_s3 runs it, and the fan-out's steps:
iolab.drive.steps):

    python -m iolab.host.storage.s3state mounted|kept --name NAME --host HOST --s3 CONNECTION_JSON [--readonly]
                                         [--stage] [--check-target TARGET --root ROOT [--existing]]
                                         [--ensure ROOT ARGS...]
    python -m iolab.host.storage.s3state unmounted|absent --name NAME --host HOST --s3 CONNECTION_JSON [--readonly]
                                         [--stop-dir RUNS_DIR [--keep-archives]]

Nothing is mounted: the connection (iolab.host.s3client's: endpoint, bucket, prefix, region, and where the keys are,
never the keys) is checked, the bucket answering. With --ensure (the rest of the line: iolab.host.dataset ensure's
arguments, its root this host's staging copy), the campaign's data set is then made on this host where missing; with
--stage (the first host, as the role's run_once task), uploaded to the bucket once, one object per sample, its
manifest last (iolab.host.dataset.s3stage), unless the backend is read-only. unmounted: this host's benchmark objects
removed (PREFIX/iolab-HOST/objects); absent: all of this host's keys (PREFIX/iolab-HOST); a read-only backend's
none. With --stop-dir, this command's tools are ended first (iolab.host.storage.call.released).

What were the role's four tasks and storage.yml's checks over two playbooks a command, in one process. Prints
{"kept": false, "changed": bool, "stopped": [...]} (with "staged" when it staged); a refusal is one line on stderr,
exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path
from typing import Any

from iolab.host import s3client
from iolab.host.storage.call import Refused, answer, check_target, last_line, parser, released


def ready(opts: argparse.Namespace) -> dict[str, Any]:
    check_target(opts)
    conn = _connection(opts)
    _bucket(conn, lambda s3: s3.head_bucket(Bucket=conn["bucket"]))
    done: dict[str, Any] = {"kept": False, "changed": False}
    if opts.ensure:
        said, complaint = io.StringIO(), io.StringIO()
        from iolab.host.dataset.__main__ import main as dataset

        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(complaint):
            code = dataset(["ensure", *opts.ensure])
        if code != 0:
            raise Refused(last_line(complaint.getvalue()))
        done["changed"] = bool(json.loads(said.getvalue().strip().splitlines()[-1])["changed"])
        if opts.stage and not opts.readonly:
            from iolab.host.dataset.s3stage import stage

            root = Path(opts.ensure[0])
            try:
                done["staged"] = stage(conn, root)
            except Exception as exc:  # botocore's errors, an unreachable endpoint
                raise Refused(f"staging {root} in S3: {exc.__class__.__name__}: {exc}") from None
            done["changed"] = done["changed"] or done["staged"]["staged"]
    return done


def gone(opts: argparse.Namespace) -> dict[str, Any]:
    conn, deleted = _connection(opts), [0]
    under = f"iolab-{opts.host}" + ("/objects" if opts.state == "unmounted" else "")

    def remove() -> None:
        if not opts.readonly:
            deleted[0] = _bucket(conn, lambda s3: s3client.delete_prefix(s3, conn["bucket"], s3client.key(conn, under)))

    stopped = released(opts, remove)
    return {"kept": False, "changed": deleted[0] > 0, "stopped": stopped}


def _connection(opts: argparse.Namespace) -> dict[str, Any]:
    try:
        return s3client.connection(opts.s3)
    except ValueError as exc:
        raise Refused(str(exc)) from None


def _bucket(conn: dict[str, Any], act: Any) -> Any:
    """`act(client)`, its failure one line naming the bucket."""
    where = f"S3 bucket {conn['bucket']} at {conn['endpoint']}"
    try:
        return act(s3client.client(conn, retries=3))
    except ImportError as exc:
        raise Refused(f"{where}: boto3 is missing on this host ({exc}); `invoke lab.setup --dl` installs it") from None
    except Refused:
        raise
    except Exception as exc:  # botocore's errors, an unreachable endpoint, unreadable credentials
        raise Refused(f"{where}: {exc.__class__.__name__}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    options = parser("iolab.host.storage.s3state")
    options.add_argument("--s3", required=True, help="the backend's connection (JSON)")
    options.add_argument("--readonly", action="store_true", help="nothing is uploaded or removed")
    options.add_argument("--stage", action="store_true", help="with --ensure: upload the data set to the bucket")
    options.add_argument("--ensure", nargs=argparse.REMAINDER, help="iolab.host.dataset ensure's arguments")
    return answer(options.parse_args(argv), ready, gone)


if __name__ == "__main__":
    raise SystemExit(main())
