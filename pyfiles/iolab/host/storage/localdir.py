"""A local backend's directory checked, or iolab's files in it removed, in one call (host side; roles/storage_local
runs it, and the fan-out's steps: iolab.drive.steps):

    python -m iolab.host.storage.localdir mounted|kept --name NAME --path DIR --host HOST [--make]
                                          [--check-target TARGET --root MOUNT_ROOT [--existing]]
    python -m iolab.host.storage.localdir unmounted|absent --name NAME --path DIR --host HOST
                                          [--stop-dir RUNS_DIR [--keep-archives]]

What the role's tasks and storage.yml's did, in one process, as iolab.host.storage.tmpfs does for a tmpfs (each Ansible
task ≈ 0.3 s, each playbook ≈ 2 s: docs/PERFORMANCE.md). Nothing is mounted. mounted, kept: with --check-target, first
the check of iolab.host.mounts.target_refusal; then the directory must exist, or with --make is made (an rbd backend's
hosts' work directory: roles/storage_rbd, whose image iolab.host.storage.rbdimage makes ready). unmounted, absent: with
--stop-dir, this command's tools ended and its run files removed (iolab.host.runstop); then the host's own directory
below the backend's, DIR/iolab-HOST (its data set, the runs' files), removed; where a tool was left, it is stopped
again and must be gone. Prints {"kept": false, "changed": bool, "stopped": [...]}; a refusal is one line on stderr
naming the host and the fix, exit 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
from typing import Any

from iolab.host.storage.call import Refused, answer, check_target, parser, released


def ready(opts: argparse.Namespace) -> dict[str, Any]:
    check_target(opts)
    if opts.make and not os.path.lexists(opts.path):
        try:
            os.makedirs(opts.path, mode=0o755, exist_ok=True)
        except OSError as exc:
            raise Refused(f"making {opts.path} on {opts.host} failed ({exc.strerror}); check its parent") from None
        return {"kept": False, "changed": True}
    if not os.path.isdir(opts.path):
        what = " (it is not a directory)" if os.path.exists(opts.path) else ""
        raise Refused(
            f"{opts.path} does not exist on {opts.host}{what}; create it or point backend {opts.name} at an "
            "existing directory"
        )
    return {"kept": False, "changed": False}


def gone(opts: argparse.Namespace) -> dict[str, Any]:
    mine = os.path.join(opts.path, f"iolab-{opts.host}")
    removed = []

    def remove() -> None:  # after the stop, which may have removed it already (its runs' files, left empty)
        try:
            if os.path.isdir(mine) and not os.path.islink(mine):
                shutil.rmtree(mine)
            else:
                os.remove(mine)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise Refused(f"removing {mine} on {opts.host} failed ({exc.strerror}); remove it by hand") from None
        removed.append(mine)

    stopped = released(opts, remove)
    return {"kept": False, "changed": bool(removed), "stopped": stopped}


def main(argv: list[str] | None = None) -> int:
    options = parser("iolab.host.storage.localdir")
    options.add_argument("--path", required=True, help="the backend's directory")
    options.add_argument("--make", action="store_true", help="mounted, kept: make the directory where it is missing")
    return answer(options.parse_args(argv), ready, gone)


if __name__ == "__main__":
    raise SystemExit(main())
