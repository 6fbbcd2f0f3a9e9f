"""./lab trace.*: a job's I/O captured on the hosts, or converted from a file, for `type: replay` workloads."""

from __future__ import annotations

import sys

from invoke import Collection

from iolab import paths
from iolab.drive import lease
from iolab.run.cli import echo, user_errors
from iolab.run.cli import lab as make_lab

from .common import HOSTS, INVENTORY, STEAL, task


def _command() -> list[str]:
    """The argv after `--` on the command line, as given (Invoke would join it with spaces)."""
    return sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else []


@task(
    help={
        "root": "the directory whose files the trace keeps (absolute, on each host): the job's data",
        "baseline": "run the command untraced first, to measure the capture's own cost (in the trace's header)",
        "timeout": "seconds each run of the command may take (default 3600)",
        "inventory": INVENTORY,
        "hosts": HOSTS,
        "steal": STEAL,
    }
)
@user_errors
def capture(c, root=None, baseline=False, timeout=3600, inventory=None, hosts=None, steal=False):
    """Run a command (after --) under strace on the hosts; keep the trace of its I/O under ROOT in results/traces/."""
    from iolab.drive import traces

    command = _command()
    traces.check(root, command)
    lab = make_lab(inventory, hosts)
    with lease.held(lab, "trace.capture", steal):
        stored = traces.capture(lab, root, command, bool(baseline), float(timeout), paths.results_root() / "traces")
    for host, path in stored.items():
        echo(f"{host}: {path}")


@task(
    help={
        "source": "the file: strace's log of the job (strace -f -ttt -T -y -s 0) or a KV-cache --io-trace-log CSV",
        "kind": "strace | kvcache (MLCommons' KV-cache benchmark's I/O trace)",
        "root": "strace: the directory whose files the trace keeps",
        "tier": "kvcache: the tier whose objects are the storage's (default nvme)",
    }
)
@user_errors
def convert(c, source, kind="strace", root="", tier="nvme"):
    """Make a trace of a file made elsewhere; keep it in results/traces/."""
    from pathlib import Path

    from iolab.drive import traces

    echo(str(traces.convert(Path(source), kind, root, tier, paths.results_root() / "traces")))


trace = Collection("trace", capture, convert)
