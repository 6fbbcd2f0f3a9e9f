"""The field report's finding over a network file system: packed vs PIL on small files, over SSHFS.

    sudo .venv/bin/python bench/loader_sshfs.py [--files 2000] [--repeat 3]

The data set's directory is served by an sshd of this bench's own (127.0.0.1, a
free port, its own keys, in a temporary directory; stopped by its PID at the end)
and mounted read-only with sshfs (FUSE, SFTP over TCP: a real network file system,
the lab's stand-in for remote file storage). The PyTorch loader then reads it —
PIL on the small files against the packed file (one pread per sample), decode on
and off, 2 workers, batches of 64, caches dropped before each run — and the same
loader on the local disk gives the figures beside them. Target: packed
≥ 3× the samples/s of PIL over SSHFS.

Why not two simulated hosts: `iolab.sim` allows one lab per machine and its
`down` removes every simulated host, so a bench must not start one while another
session's lab runs; loopback SSH carries the same SFTP traffic through the same
FUSE client (the simulated hosts' veth bridge adds little: docs/LAB_NOTES.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, drop_caches, loader_argv

from iolab.host.dataset.gen import gen
from iolab.host.dataset.pack import pack
from iolab.kinds.pytorch import parser as pytorch

MIB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sshd(work: Path) -> tuple[subprocess.Popen, int, Path]:
    """An sshd for this bench only: (process, port, the client key)."""
    keys = work / "ssh"
    keys.mkdir()
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True)
    port = free_port()
    config = keys / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"ListenAddress 127.0.0.1:{port}",
                f"PidFile {keys / 'sshd.pid'}",
                f"HostKey {keys / 'host'}",
                f"AuthorizedKeysFile {keys / 'client.pub'}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "UseDNS no",
                "Subsystem sftp /usr/lib/openssh/sftp-server",
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(config), "-E", str(keys / "sshd.log")])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port, keys / "client"
        time.sleep(0.05)
    proc.terminate()
    raise RuntimeError(f"sshd did not start: {(keys / 'sshd.log').read_text()[-500:]}")


def run(root: Path, out: Path, reader: str, decode: bool) -> tuple[float, float]:
    drop_caches()
    subprocess.run(
        [
            *loader_argv(root, out),
            "--reader",
            reader,
            "--decode" if decode else "--no-decode",
            "--workers",
            "2",
            "--batch-size",
            "64",
        ],
        check=True,
        cwd=ROOT,
    )
    values = {m.metric: m.value for m in pytorch.parse(out).measurements if not m.params}
    return values["samples_per_s"], values["read_bw"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iolab-sshfs-", dir="/var/tmp"))
    mount = work / "mnt"
    mount.mkdir()
    sshd = None
    mounted = False
    try:
        gen(work / "ds", files=args.files, seed=1)
        pack(work / "ds", "packed")
        sshd, port, key = start_sshd(work)
        subprocess.run(
            [
                "sshfs",
                "-p",
                str(port),
                "-o",
                f"ro,IdentityFile={key},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null",
                f"root@127.0.0.1:{work / 'ds'}",
                str(mount),
            ],
            check=True,
        )
        mounted = True
        print(
            f"{args.files} files; sshfs over loopback SSH vs the local disk; 2 workers, batch 64, "
            f"median of {args.repeat} runs"
        )
        print(f"{'storage':<8} {'reader':<7} {'decode':<6} {'samples/s':>10} {'MiB/s':>8}")
        figures: dict[tuple[str, str, bool], float] = {}
        for where, root in (("local", work / "ds"), ("sshfs", mount)):
            for decode in (True, False):
                for reader in ("pil", "packed"):
                    found = [
                        run(root, work / "runs" / f"{where}-{reader}-{decode}-{rep}", reader, decode)
                        for rep in range(args.repeat)
                    ]
                    rate = statistics.median(f[0] for f in found)
                    figures[where, reader, decode] = rate
                    print(
                        f"{where:<8} {reader:<7} {'on' if decode else 'off':<6} {rate:>10.0f} "
                        f"{statistics.median(f[1] for f in found) / MIB:>8.1f}"
                    )
        for where in ("local", "sshfs"):
            for decode in (True, False):
                ratio = figures[where, "packed", decode] / figures[where, "pil", decode]
                print(f"packed / PIL, {where}, decode {'on' if decode else 'off'}: {ratio:.2f}×")
    finally:
        if mounted:
            subprocess.run(["fusermount", "-u", str(mount)], check=False)
        if sshd is not None:
            os.kill(sshd.pid, signal.SIGTERM)
            sshd.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
