"""python -m iolab.host.dataset {gen,ensure,histogram,pack,verify}: the host-side command line.

`ensure` is the campaign's data-set step on a host, whichever route runs it (roles/dataset_gen's one task, or the
fan-out's steps, iolab.drive.steps): what is there (iolab.host.loader.dataset_state), refused in one line where another
data set is there or the storage has no room, generated where missing, each missing pack made; one JSON report.

Results go to stdout (a JSON object with --json, for Ansible to read); progress goes
to stderr when it is a terminal; a UserError is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iolab.errors import UserError

MIB = 1 << 20


def _progress(what: str) -> Callable[[int, int], None] | None:
    if not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] >= 0.2:
            last[0] = now
            end = "\n" if done == total else ""
            print(f"\r{what}: {done}/{total} ({100 * done / max(total, 1):.0f}%)", end=end, file=sys.stderr, flush=True)

    return show


def _emit(args: argparse.Namespace, result: dict, lines: list[str]) -> None:
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print("\n".join(lines))


def cmd_gen(args: argparse.Namespace) -> int:
    result, lines = _gen(args)
    _emit(args, result, lines)
    return 0


def _gen(args: argparse.Namespace) -> tuple[dict, list[str]]:
    """Generate the data set at args.root (or keep the one there): its JSON result and its lines."""
    import PIL

    from iolab.host.dataset.gen import GENERATOR, gen
    from iolab.host.dataset.manifest import Manifest

    existed = Manifest.exists(args.root)
    started = time.perf_counter()
    manifest = gen(
        args.root,
        files=args.files,
        seed=args.seed,
        classes=args.classes,
        workers=args.workers,
        progress=_progress("gen"),
        kind=args.kind,
        replace=args.replace,
    )
    seconds = time.perf_counter() - started
    total = manifest.total_bytes
    result = {
        "root": str(args.root),
        "files": manifest.files,
        "seed": manifest.seed,
        "classes": manifest.classes,
        "bytes": total,
        "mean_size": total / manifest.files,
        "manifest_hash": manifest.hash,
        "generated": not existed,
        "seconds": round(seconds, 3),
        "files_per_s": round(manifest.files / seconds, 1) if not existed else None,
        "generator": manifest.generator or GENERATOR,
        "pillow": PIL.__version__,
    }
    verb = f"generated in {seconds:.1f} s ({manifest.files / seconds:.0f} files/s)" if not existed else "already there"
    return result, [
        f"{args.root}: {manifest.files} files, {total} bytes (mean {total / manifest.files:.0f} B), {verb}",
        f"manifest hash {manifest.hash}",
    ]


def cmd_ensure(args: argparse.Namespace) -> int:
    from iolab.host.dataset.pack import pack
    from iolab.host.loader.dataset_state import state

    formats = [f for f in args.formats.split(",") if f]
    wanted = (args.root, args.files, args.seed, args.classes, formats, args.kind)
    before = state(*wanted, replace=args.replace)
    if before["state"] == "other":
        raise UserError(f"{before['reason']} on {args.host}; remove it or give the data set another place")
    if before["needed_bytes"] > before["free_bytes"]:
        packs = f" and packs: {', '.join(before['packs_missing'])}" if before["packs_missing"] else ""
        raise UserError(
            f"the data set ({args.files} files{packs}) needs about {round(before['needed_bytes'] / MIB)} MiB but "
            f"{args.root} has {round(before['free_bytes'] / MIB)} MiB free on {args.host}; give the backend more "
            "space or the data set fewer files"
        )
    generated: dict = {}
    if before["state"] == "missing":
        generated, _ = _gen(args)
    for fmt in before["packs_missing"]:
        pack(args.root, fmt, samples_per_shard=_default_per_shard(args.root))
    report = {"before": before, "after": state(*wanted), "generated": generated, "packed": before["packs_missing"]}
    print(json.dumps({**report, "changed": bool(generated.get("generated") or before["packs_missing"])}))
    return 0


def cmd_histogram(args: argparse.Namespace) -> int:
    from iolab.host.dataset.histogram import bssplit, histogram, table

    if not args.root.is_dir():
        raise UserError(f"{args.root} is not a directory")
    try:
        hist = histogram(args.root)
    except OSError as exc:
        raise UserError(
            f"cannot read the data set at {args.root}: {exc.strerror} ({exc.filename}); give the directory of a "
            "data set"
        ) from None
    if not any(b > 0 for b in hist):
        raise UserError(f"{args.root} holds no non-empty files")
    split = bssplit(hist)
    _emit(
        args,
        {"root": str(args.root), "histogram": {str(b): n for b, n in hist.items()}, "bssplit": split},
        [table(hist), f"bssplit {split}"],
    )
    return 0


def _default_per_shard(root: Path) -> int:
    """MLPerf's samples per file for the data set in root: one for cosmoflow's, resnet50's 1,251 otherwise."""
    from iolab.host.dataset.manifest import Manifest
    from iolab.shared.shapes import GENERATORS, SAMPLES_PER_SHARD

    if Manifest.exists(root) and Manifest.load(root).generator == GENERATORS["cosmoflow"]:
        return 1
    return SAMPLES_PER_SHARD


def cmd_pack(args: argparse.Namespace) -> int:
    from iolab.host.dataset.pack import pack
    from iolab.shared.shapes import FORMATS

    formats = FORMATS if args.format == "all" else (args.format,)
    per_shard = args.samples_per_shard or _default_per_shard(args.root)
    if args.out is not None and len(formats) > 1:
        raise UserError("--out names the directory of one pack: give --format too, or leave --out out")
    packs, lines = {}, []
    for fmt in formats:
        started = time.perf_counter()
        info = pack(args.root, fmt, out=args.out, samples_per_shard=per_shard, progress=_progress(f"pack {fmt}"))
        directory = args.out if args.out is not None else args.root / fmt
        packs[fmt] = {
            "directory": str(directory),
            "samples": info.samples,
            "files": len(info.files),
            "bytes": info.bytes,
            "samples_per_shard": info.samples_per_shard,
            "manifest_hash": info.manifest_hash,
        }
        lines.append(
            f"{directory}: {info.samples} samples in {len(info.files)} files, {info.bytes} bytes, "
            f"read back and checked ({time.perf_counter() - started:.1f} s)"
        )
    _emit(args, {"root": str(args.root), "packs": packs}, lines)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from iolab.host.dataset.verify import verify

    show = _progress("verify")
    result = verify(
        args.root,
        packs=not args.no_packs,
        workers=args.workers,
        progress=(lambda what, done, total: show(done, total)) if show else None,
    )
    summary = {
        "root": str(args.root),
        "manifest_hash": result.manifest_hash,
        "files": result.files,
        "bytes": result.bytes,
        "packs": result.packs,
        "ok": result.ok,
        "problems": result.problems[:100],
        "problem_count": len(result.problems),
    }
    if not result.ok:
        if args.json:
            print(json.dumps(summary, sort_keys=True))
        shown = "; ".join(result.problems[:3])
        raise UserError(
            f"{args.root}: {len(result.problems)} problems against the manifest ({shown}); "
            "remove the data set and generate it again"
        )
    packs = ", ".join(f"{name} ({n} samples)" for name, n in result.packs.items()) or "no packs"
    _emit(
        args,
        summary,
        [f"{args.root}: {result.files} files ({result.bytes} bytes) and {packs} match manifest {result.manifest_hash}"],
    )
    return 0


def parser() -> argparse.ArgumentParser:
    from iolab.shared.shapes import FORMATS, SAMPLES_PER_SHARD

    p = argparse.ArgumentParser(
        prog="python -m iolab.host.dataset",
        description="ImageNet-shaped data sets on a host: generate, histogram, pack, verify.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("gen", help="generate an ImageNet-shaped data set (or keep the one there)")
    g.add_argument("root", type=Path, help="directory of the data set")
    g.add_argument("--files", type=int, required=True, help="number of JPEG files")
    g.add_argument("--seed", type=int, required=True, help="same seed, same bytes")
    g.add_argument("--classes", type=int, default=100, help="class folders (default 100)")
    g.add_argument("--workers", type=int, default=None, help="processes (default: usable CPUs)")
    g.add_argument(
        "--kind",
        default="imagenet-like",
        help="imagenet-like (JPEGs, the default), unet3d (NPZ files) or cosmoflow (TFRecord samples)",
    )
    g.add_argument(
        "--replace",
        action="store_true",
        help="root is iolab's own scratch: remove another data set found there instead of refusing",
    )
    g.set_defaults(run=cmd_gen)

    _ensure_parser(sub)
    h = sub.add_parser("histogram", help="file sizes by power-of-two bucket and the fio --bssplit")
    h.add_argument("root", type=Path, help="directory to walk")
    h.set_defaults(run=cmd_histogram)

    k = sub.add_parser("pack", help="pack the data set: one file + index, tar shards, TFRecord")
    k.add_argument("root", type=Path, help="directory of the data set")
    k.add_argument("--format", choices=[*FORMATS, "all"], default="all", help="format (default all)")
    k.add_argument("--out", type=Path, default=None, help="directory of the pack (default ROOT/FORMAT)")
    k.add_argument(
        "--samples-per-shard",
        type=int,
        default=None,
        help=f"samples per tar or TFRecord file (default {SAMPLES_PER_SHARD}, MLPerf resnet50; "
        "a cosmoflow data set: 1, MLPerf's layout)",
    )
    k.set_defaults(run=cmd_pack)

    v = sub.add_parser("verify", help="check every file and pack against the manifest")
    v.add_argument("root", type=Path, help="directory of the data set")
    v.add_argument("--no-packs", action="store_true", help="check the files only")
    v.add_argument("--workers", type=int, default=4, help="reader threads (default 4)")
    v.set_defaults(run=cmd_verify)

    for s in (g, h, k, v):
        s.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return p


def _ensure_parser(sub: Any) -> None:
    e = sub.add_parser("ensure", help="the campaign's data set: checked, generated where missing, its packs made")
    e.add_argument("root", type=Path, help="directory of the data set")
    e.add_argument("--files", type=int, required=True, help="number of files")
    e.add_argument("--seed", type=int, required=True, help="same seed, same bytes")
    e.add_argument("--classes", type=int, default=100, help="class folders (default 100)")
    e.add_argument("--kind", default="imagenet-like", help="as gen's")
    e.add_argument("--formats", default="", help="comma-separated packs wanted beside it")
    e.add_argument("--workers", type=int, default=None, help="generator processes (default: usable CPUs)")
    e.add_argument("--replace", action="store_true", help="as gen's: root is iolab's own scratch")
    e.add_argument("--host", default="this host", help="the host's name, as a refusal says it")
    e.set_defaults(run=cmd_ensure, json=True)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
