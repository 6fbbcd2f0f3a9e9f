"""iolab.host.storage.tmpfs: a tmpfs backend's mount and unmount in one host-side call (issue 42), as root on this
machine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from iolab.host import facts
from iolab.host.storage import tmpfs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mount(2) needs root")


@pytest.fixture
def point():
    path = Path(f"/mnt/iolab/unit-tmpfs-{os.getpid()}")
    yield path
    while (facts.probe(str(path))["mounted"] or {}).get("source", "").startswith("iolab:"):
        subprocess.run(["umount", str(path)], check=True)
    if path.is_dir():
        path.rmdir()


def call(capsys, state: str, point: Path, *extra: str) -> tuple[int, dict | str]:
    code = tmpfs.main([state, "--name", point.name, "--mountpoint", str(point), "--host", "here", *extra])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else err.strip()


def source(point: Path) -> str | None:
    return (facts.probe(str(point))["mounted"] or {}).get("source")


def test_a_campaigns_tmpfs_is_mounted_once_used_as_it_is_and_unmounted(capsys, point):
    assert call(capsys, "mounted", point, "--size", str(8 << 20)) == (0, {"kept": False, "changed": True})
    assert source(point) == f"iolab:{point.name}"
    assert call(capsys, "mounted", point, "--size", str(8 << 20)) == (0, {"kept": False, "changed": False})
    assert call(capsys, "unmounted", point) == (0, {"kept": False, "changed": True, "stopped": []})
    assert source(point) is None and point.is_dir()  # the empty mount point stays
    assert call(capsys, "unmounted", point) == (0, {"kept": False, "changed": False, "stopped": []})


def test_a_kept_tmpfs_outlives_a_campaigns_unmount_and_absent_removes_it(capsys, point):
    assert call(capsys, "kept", point, "--size", str(8 << 20)) == (0, {"kept": True, "changed": True})
    assert call(capsys, "mounted", point, "--size", str(8 << 20)) == (0, {"kept": True, "changed": False})
    assert call(capsys, "unmounted", point) == (0, {"kept": True, "changed": False, "stopped": []})
    assert source(point) == f"iolab:{point.name}:kept"
    assert call(capsys, "absent", point) == (0, {"kept": True, "changed": True, "stopped": []})
    assert source(point) is None


def test_refusals_are_one_line_naming_the_host_and_the_fix_and_mount_nothing(capsys, point):
    too_big = str(facts.probe("/")["memory_bytes"])
    code, said = call(capsys, "mounted", point, "--size", too_big)
    assert code == 1 and "MiB of memory of here (a tmpfs lives in RAM); lower the backend's size" in said
    assert source(point) is None
    code, said = call(capsys, "mounted", point, "--size", "4096", "--check-target", "/etc", "--root", "/mnt/iolab")
    assert code == 1 and "/etc" in str(said) and "\n" not in str(said)
    os.makedirs(point, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "someone-else", str(point)], check=True)
    try:
        code, said = call(capsys, "mounted", point, "--size", "4096")
        assert code == 1 and said == (
            f"{point} already has another file system (someone-else) mounted on here; unmount it or give the "
            "backend another mountpoint"
        )
        assert call(capsys, "absent", point) == (0, {"kept": False, "changed": False, "stopped": []})  # not ours
        assert source(point) == "someone-else"
    finally:
        subprocess.run(["umount", str(point)], check=True)


def test_the_teardown_stops_the_commands_tools_and_removes_its_run_files_first(capsys, point, tmp_path):
    """What storage.yml's `hostrun stop` did before the unmount, in the same call (--stop-dir)."""
    runs = tmp_path / "runs" / "owner" / "here"
    (runs / "run-1").mkdir(parents=True)
    (runs / "run-1" / "partial.json").write_text("{}")
    assert call(capsys, "mounted", point, "--size", str(8 << 20))[0] == 0
    code, done = call(capsys, "unmounted", point, "--stop-dir", str(runs))
    assert code == 0 and done["changed"] and source(point) is None
    assert done["stopped"] == [f"removed what 1 interrupted run(s) left in {runs}"]
    assert not runs.exists()
