"""The iolab package as an archive for the hosts, named by its content hash.

Hosts run exactly the controller's code: `lab.setup` (and every campaign)
unpacks this archive into /opt/iolab/releases/<hash>/ when the host lacks it.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from iolab import paths

PACKAGE = Path(__file__).resolve().parents[1]  # iolab/, above drive/


# What the hosts run: the host side, what both sides share, and the package's leaves (tests/unit/test_structure.py
# holds that the host side imports nothing else); of each kind's folder, its host programs (host.py, host_*.py) and
# the faces that hold them. The controller's modules stay here: a change to a report does not make a new release
# that every host unpacks.
SHIPPED = ("host", "shared", "__init__.py", "errors.py", "units.py")


def _shipped(part: tuple[str, ...]) -> bool:
    """Whether the package's file at these path parts goes to the hosts: of iolab/kinds/, the faces and each kind
    folder's host.py and host_*.py."""
    if part[0] != "kinds":
        return part[0] in SHIPPED
    host = len(part) == 3 and (part[2] == "host.py" or part[2].startswith("host_"))
    return host or (len(part) <= 3 and part[-1] == "__init__.py")


def _files() -> list[Path]:
    return sorted(
        p
        for p in PACKAGE.rglob("*")
        if p.is_file()
        and _shipped(p.relative_to(PACKAGE).parts)
        and "__pycache__" not in p.parts
        and p.suffix not in (".pyc", ".pyo")
    )


def build(dest_dir: Path | None = None) -> tuple[str, Path]:
    """(hash, archive path); the archive is rebuilt only when the package changed."""
    digest = hashlib.sha256()
    files = _files()
    for path in files:
        digest.update(str(path.relative_to(PACKAGE.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
    release = digest.hexdigest()[:16]
    dest_dir = dest_dir or paths.LAB_DIR / "releases"
    archive = dest_dir / f"iolab-{release}.tar.gz"
    if not archive.exists():
        dest_dir.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for path in files:
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(PACKAGE.parent)))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
        tmp = archive.with_suffix(".tmp")
        tmp.write_bytes(buffer.getvalue())
        tmp.replace(archive)
    return release, archive
