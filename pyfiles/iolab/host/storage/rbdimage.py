"""An rbd backend's image made ready in one call, on one host (host side, stdlib only; roles/storage_rbd runs it once,
and the fan-out's steps on the first host: iolab.drive.steps):

    python -m iolab.host.storage.rbdimage --name NAME --host HOST --pool POOL --image IMAGE --size BYTES [--prefill]
                                          --conf CEPH_CONF --keyring KEYRING --client ID [--connect-timeout S]

What the role's chain of tasks did (each Ansible task ≈ 0.3 s, each Ceph command ≈ 0.1 s: docs/PERFORMANCE.md), in
the same order and with the same refusals: the cluster answers and the pool exists (`rbd ls`; where it answers ENOENT,
`rados lspools` says whether the pool is missing, and which pools there are); the image is created, or the one there
already must be as large as the backend; then, once, the whole image written (fio's rbd engine, incompressible data:
reads of never-written extents return zeros without reaching the OSDs and would measure nothing) and the prefill
recorded in the image's metadata (iolab.prefilled = its size), which later calls read and skip it. Every Ceph command
is an argv (never a shell); the keyring is a path, named as the role named it. Prints {"changed": bool}; a refusal is
one line on stderr naming the fix, exit 1. The hosts' work directories are iolab.host.storage.localdir's (--make).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from iolab.host.storage.call import Refused, last_line

PREFILLED = "iolab.prefilled"  # the image's metadata key: the size iolab wrote whole


def ready(opts: argparse.Namespace) -> bool:
    """The image there, as large as the backend, and written whole once; whether anything changed."""
    rbd = rbd_argv(opts)
    spec = f"{opts.pool}/{opts.image}"
    listed = run([*rbd, "ls", "--format", "json", opts.pool])
    if listed.returncode != 0:
        raise Refused(unreachable(opts, rbd, listed.stderr))
    changed = False
    if opts.image not in json.loads(listed.stdout or "[]"):
        check(run(create_argv(rbd, spec, opts.size)), f"creating {spec}")
        changed = True
    else:  # an image of this name made for a smaller backend: the prefill would stop at its end
        info = check(run([*rbd, "info", "--format", "json", spec]), f"reading {spec}'s size")
        size = json.loads(info.stdout)["size"]
        if size < opts.size:
            raise Refused(
                f"image {spec} already exists with {size} bytes, less than backend {opts.name}'s size of {opts.size} "
                "bytes: name another image (image: NAME) or a size that fits; or, if it is iolab's and holds nothing "
                f"you need, remove it (rbd rm {spec})"
            )
    if not opts.prefill or meta(rbd, spec, PREFILLED) == str(opts.size):
        return changed
    prefill = ["fio", "--name=prefill", "--ioengine=rbd", f"--clientname={opts.client}", f"--pool={opts.pool}"]
    prefill += [f"--rbdname={opts.image}", "--rw=write", "--bs=4M", "--iodepth=16", "--refill_buffers=1"]
    prefill += [f"--size={opts.size}", "--output=/dev/null"]
    # librados finds the cluster through CEPH_CONF and the key through CEPH_ARGS, as a run's fio does.
    env = {**os.environ, "CEPH_CONF": opts.conf, "CEPH_ARGS": f"--keyring {opts.keyring}"}
    check(run(prefill, env), f"writing {spec} whole (prefill)")
    check(run([*rbd, "image-meta", "set", spec, PREFILLED, str(opts.size)]), f"recording {spec}'s prefill")
    return True


def rbd_argv(opts: argparse.Namespace) -> list[str]:
    """The rbd command for the backend's cluster and client (--conf, --keyring, --client, --connect-timeout)."""
    rbd = ["rbd", "--conf", opts.conf, "--keyring", opts.keyring, "--id", opts.client]
    return rbd + ["--client_mount_timeout", str(opts.connect_timeout)]


def create_argv(rbd: list[str], spec: str, size: int) -> list[str]:
    """`rbd create` of POOL/IMAGE `spec`, `size` bytes rounded up to whole MiB."""
    return [*rbd, "create", "--size", f"{(size + (1 << 20) - 1) >> 20}M", spec]


def meta(rbd: list[str], spec: str, key: str) -> str:
    """The image's metadata value under `key`; '' where it has none (rbd's exit 2); another failure refused."""
    found = run([*rbd, "image-meta", "get", spec, key])
    if found.returncode == 2:
        return ""
    return check(found, f"reading {spec}'s metadata").stdout.strip()


def unreachable(opts: argparse.Namespace, rbd: list[str], stderr: str) -> str:
    """Why `rbd ls POOL` failed: the pool missing (it answered ENOENT and the cluster lists its pools without it), or
    the cluster not answering."""
    if "(2) No such file" in stderr:
        pools = run(["rados", *rbd[1:], "lspools"])
        names = pools.stdout.split()
        if pools.returncode == 0 and opts.pool not in names:
            return (
                f"pool {opts.pool} does not exist in the Ceph cluster of {opts.conf} (its pools: "
                f"{', '.join(names) or 'none'}); name one of them as the backend's pool, or create it (ceph osd pool "
                f"create {opts.pool}; rbd pool init {opts.pool})"
            )
    return (
        f"the Ceph cluster of {opts.conf} does not answer from {opts.host} (rbd ls {opts.pool}: {last_line(stderr)}); "
        "start the lab's cluster with `invoke lab.services-up`, or point the backend's ceph_conf, keyring, client and "
        "pool at yours"
    )


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env)
    except FileNotFoundError:
        raise Refused(f"{argv[0]} is not installed on this host; run `invoke lab.setup` for it") from None


def check(done: subprocess.CompletedProcess[str], what: str) -> subprocess.CompletedProcess[str]:
    if done.returncode != 0:
        raise Refused(f"{what} failed: {last_line(done.stderr)} ({done.args[0]}'s rc {done.returncode})")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iolab.host.storage.rbdimage")
    parser.add_argument("--name", required=True, help="the backend's name, as refusals say it")
    parser.add_argument("--host", required=True, help="the inventory name, as refusals say it")
    parser.add_argument("--pool", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--size", type=int, required=True, help="the backend's size, bytes")
    parser.add_argument("--prefill", action="store_true", help="write the whole image once")
    parser.add_argument("--conf", required=True, help="the cluster's ceph.conf on this host")
    parser.add_argument("--keyring", required=True, help="the client's keyring on this host (a path)")
    parser.add_argument("--client", required=True, help="the client's id")
    parser.add_argument("--connect-timeout", type=int, default=15, help="s a Ceph command waits for the monitors")
    opts = parser.parse_args(argv)
    try:
        changed = ready(opts)
    except Refused as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps({"changed": changed}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
