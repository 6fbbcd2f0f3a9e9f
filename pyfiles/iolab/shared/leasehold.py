"""Hold a host's lease for one campaign (host side, stdlib only).

    python3 -c "<this file>" DIR INFO_JSON [STEAL_PID]

iolab.drive.lease starts this once per host and campaign, over the campaign's own SSH
connection (a plain process for a host reached without SSH), before the campaign
touches the host. It runs this file's text, so a host needs no iolab installed yet.

The lease is an flock on DIR/netns-<inode>.lock: the inode of the host's network
namespace tells simulated hosts apart (they share one file system) and is one value
on a real host. Beside it DIR/netns-<inode>.json says who holds it (INFO_JSON: the
campaign, its controller, user, PID, start time, plus this process's PID).

One line on stdout answers:

    iolab-lease held {"previous": null | <the record of a holder that ended without releasing>}
    iolab-lease busy <the holder's record>

Held, it waits for end of file on stdin and exits. The kernel drops an flock with
the process that holds it, so a lease cannot outlive its holder: the controller's end
(exit, Ctrl-C, crash) closes the connection, stdin reaches its end, the holder exits.
A controller that ends normally (after its teardown) writes RELEASE first, and the
holder removes its record; without it (the controller killed outright) the record
stays beside the free lock, and the next campaign to take the lease cleans what that
campaign left on the host — its tools, its run directory, the mounts it did not keep —
with `iolab.host.hostrun stop --orphaned-mounts` from the release it ran (INFO_JSON's
`owner`, `host` and `release`), and answers what was done:

    iolab-lease held {"previous": <record>, "cleaned": [lines], "clean_error": null | "why not"}

Every held answer also says whether this host has the controller's release (INFO_JSON's `release`) unpacked
(`release_here`): lab.setup then skips its look for it there (roles/iolab_host), one Ansible task a command.

Anything that keeps it from answering for sure — a lease directory it cannot make, a lock
it cannot open, a record that is not a JSON object with an integer `holder_pid` (so it
cannot tell who holds the host, nor what a crashed holder left) — is answered, never
guessed past:

    iolab-lease error {"message": "why, and what to do"}

STEAL_PID ends a holder that the controller found orphaned (its campaign gone) by the
PID its record gives, before taking the lease.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

LINE = "iolab-lease"
RELEASE = b"release\n"  # the controller's last words to a holder: its campaign ended normally


class Damaged(Exception):
    """A lease record that is not one a holder wrote: no command may take the host on a guess."""


def _read(path: str) -> dict | None:
    """The lease record at `path`, or None where there is none (records are replaced whole, never torn)."""
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if not isinstance(record, dict) or type(record.get("holder_pid")) is not int:
        raise Damaged(
            f"the lease record {path} is damaged (not a JSON object with an integer holder_pid): iolab cannot "
            "tell who holds this host or what its last command left; check that no command uses the host, "
            "then remove that file"
        )
    return record


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(path: str) -> dict:
    """The live holder's record; it may be writing it just now (two campaigns at once). Damaged when the record
    is still not one a holder wrote after 2 s."""
    deadline = time.monotonic() + 2.0
    while True:
        try:
            record, damaged = _read(path), None
        except Damaged as exc:
            record, damaged = None, exc
        if record and _alive(record["holder_pid"]):
            return record
        if time.monotonic() > deadline:
            if damaged:
                raise damaged
            return record or {}
        time.sleep(0.02)


def _end(pid: int, record: dict | None) -> None:
    """End the orphaned holder `pid`, if the record names it (a PID is never taken on trust alone)."""
    if not record or record.get("holder_pid") != pid:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5.0
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def main(argv: list[str]) -> int:
    try:
        return _hold(argv)
    except Damaged as exc:
        message = str(exc)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        message = f"cannot take the lease in {argv[0]}: {exc.strerror or exc}{where}"
    print(f"{LINE} error {json.dumps({'message': message})}", flush=True)
    return 4


def _hold(argv: list[str]) -> int:
    started = time.time()  # this host's clock, with the answer's: the controller compares it with its own
    directory, info = argv[0], json.loads(argv[1])
    os.makedirs(directory, exist_ok=True)
    key = "netns-" + os.readlink("/proc/self/ns/net").strip("net:[]")
    lock_path, record_path = os.path.join(directory, key + ".lock"), os.path.join(directory, key + ".json")
    if len(argv) > 2:
        _end(int(argv[2]), _read(record_path))
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"{LINE} busy {json.dumps(_holder(record_path))}", flush=True)
        return 3
    previous = _read(record_path)
    answer = {"previous": previous, **(_clean(os.path.dirname(directory), previous) if previous else {})}
    answer["release_here"] = _has_release(os.path.dirname(directory), info.get("release"))
    answer["clock"] = [started, time.time()]
    tmp = f"{record_path}.{os.getpid()}.tmp"
    with open(tmp, "w") as handle:
        json.dump({**info, "holder_pid": os.getpid()}, handle)
    os.replace(tmp, record_path)
    print(f"{LINE} held {json.dumps(answer)}", flush=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the end of stdin releases the lease
    said = b""
    while chunk := sys.stdin.buffer.read(4096):
        said = (said + chunk)[-len(RELEASE) :]
    if said == RELEASE:  # else the record stays for the next campaign to clean after this one
        os.unlink(record_path)
    return 0


def _has_release(host_dir: str, release: object) -> bool:
    """This host has `release` unpacked: the file roles/iolab_host's own look for it checks."""
    if not isinstance(release, str) or not release or "/" in release:
        return False
    return os.path.isfile(os.path.join(host_dir, "releases", release, "iolab", "__init__.py"))


def _clean(host_dir: str, previous: dict) -> dict:
    """Clean what the campaign of `previous` (a holder that ended without release) left on this host."""
    owner, host, release = previous.get("owner"), previous.get("host"), previous.get("release")
    if not (owner and host and release) or "/" in owner + host + release:
        return {"cleaned": [], "clean_error": "its record does not say what it ran (an older iolab)"}
    code = os.path.join(host_dir, "releases", release)
    if not os.path.isdir(code):
        return {"cleaned": [], "clean_error": None}  # nothing of it ran here: its release never came
    argv = [
        sys.executable,
        "-m",
        "iolab.host.hostrun",
        "stop",
        "--dir",
        os.path.join(host_dir, "runs", owner, host),
        "--orphaned-mounts",
    ]
    try:
        done = subprocess.run(
            argv,
            env={**os.environ, "PYTHONPATH": code},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"cleaned": [], "clean_error": "iolab.host.hostrun stop did not end within 60 s"}
    error = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1] if done.returncode else None
    return {"cleaned": done.stdout.splitlines(), "clean_error": error}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
