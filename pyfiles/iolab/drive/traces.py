"""`./lab trace.capture` and `trace.convert`: traces made on the hosts or from a file, stored in results/traces/.

A trace is stored as results/traces/<hash>.trace (its SHA-256's first 16 hex digits: iolab.shared.trace),
the host's telemetry while the command ran beside it (<hash>.<host>.telemetry.jsonl); a campaign's
`type: replay` workload names the trace. The command to capture reaches the hosts as an argv
(Ansible's command module, no shell); a value Ansible would evaluate as a template is refused first.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from iolab.drive import runner
from iolab.errors import RunFailed, UserError
from iolab.shared import trace, trace_kvcache, trace_strace

if TYPE_CHECKING:
    from iolab.drive.execute import Lab


def store(found: trace.Trace, directory: Path) -> Path:
    """The checked trace kept as directory/<hash>.trace; its path there."""
    directory.mkdir(parents=True, exist_ok=True)
    kept = directory / f"{found.sha256[:16]}.trace"
    if found.path.resolve() != kept.resolve():
        shutil.copyfile(found.path, kept)
    return kept


def check(root: str | None, command: list[str]) -> None:
    """Refuse (UserError, one line) a capture that could not run as asked, before any host or lease is touched."""
    if not root or not root.startswith("/"):
        raise UserError(f"--root {root!r}: give the absolute directory whose files the job reads")
    if not command:
        raise UserError("give the command to capture after --: ./lab trace.capture --root DIR -- COMMAND ...")
    for value in [root, *command]:
        if "{{" in value or "{%" in value:
            raise UserError(f"{value!r}: Ansible would evaluate {{{{ or {{% on the controller; write it otherwise")


def capture(lab: Lab, root: str, command: list[str], baseline: bool, timeout: float, store_dir: Path) -> dict:
    """{host: its trace, stored} of `command` run under strace on each of the lab's hosts."""
    check(root, command)
    fetched = store_dir / ".fetched"
    fetched.mkdir(parents=True, exist_ok=True)
    variables = {
        "trace_root": root,
        "trace_command": command,
        "trace_baseline": baseline,
        "trace_timeout": timeout,
        "trace_dest": str(fetched),
    }
    result = lab.play([runner.Phase("setup.yml", {}), runner.Phase("trace.yml", variables)], "trace.capture")
    if result.failures() or result.status != "successful":
        raise RunFailed(f"trace.capture failed: {result.summary()}")
    out = {}
    for host in lab.hosts:
        out[host] = store(trace.load(fetched / f"{host}.trace"), store_dir)
        (fetched / f"{host}.trace").unlink()
        telemetry = fetched / f"{host}.telemetry.jsonl"
        if telemetry.exists():  # the host's telemetry while the command ran: beside the trace, by host
            telemetry.replace(out[host].with_suffix(f".{host}.telemetry.jsonl"))
    return out


def convert(source: Path, kind: str, root: str, tier: str, store_dir: Path) -> Path:
    """A trace of a file made elsewhere: strace's log of the job (`strace`, its files under `root`) or MLCommons'
    KV-cache I/O trace (`kvcache`: its `tier` objects), checked and stored."""
    try:
        text = source.read_text(errors="replace")
    except OSError as exc:
        raise UserError(f"{source}: cannot read it ({exc.strerror})") from None
    try:
        if kind == "strace":
            header, records = trace_strace.convert(text, root)
            header["tracer"] = {"name": "strace", "source": str(source)}
        elif kind == "kvcache":
            header, records = trace_kvcache.convert(text, tier)
        else:
            raise UserError(f"--kind {kind!r}: give strace or kvcache")
    except ValueError as exc:
        raise UserError(f"{source}: {exc}") from None
    made = trace.write(store_dir / ".converted", {**header, "converted_from": source.name}, records)
    kept = store(trace.load(made), store_dir)
    made.unlink()
    return kept
