"""The s3 backend's staging copy of the data set, through the data set's own checks (issue 23).

The staging copy is on the host's own disk, not in the bucket: the s3 backend's host call (iolab.host.storage.s3state,
its argv from iolab.shared.calls.s3, which the role and the fan-out run) makes it with `iolab.host.dataset ensure` and
the arguments after its `--ensure`; these tests run that part of the call alone on this machine (after the bucket's
check, which needs an endpoint), with the staging directory in the test's own tmp_path.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from iolab.host.dataset.gen import gen
from iolab.host.dataset.manifest import Manifest
from iolab.host.loader import dataset_state
from iolab.shared import calls

ROOT = Path(__file__).resolve().parents[2]


def stage(tmp_path: Path, files: int, seed: int = 1) -> subprocess.CompletedProcess:
    """The s3 call's staging copy (mounted, with the campaign's data set) on this machine, as host localhost."""
    variables = {
        "storage_s3_state": "mounted",
        "storage_s3_name": "obj",
        "storage_s3_staging": str(tmp_path / "staging"),
    }
    variables |= {f"storage_s3_{key}": "-" for key in ("endpoint", "bucket", "prefix", "region", "credentials")}
    variables["storage_s3_dataset"] = {"files": files, "seed": seed, "classes": 10, "kind": "imagenet-like"}
    argv = calls.s3(sys.executable, "localhost", variables)
    ensure = argv[argv.index("--ensure") + 1 :]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    command = [sys.executable, "-m", "iolab.host.dataset", "ensure", *ensure]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_staging_a_data_set_larger_than_the_disk_is_refused_before_a_file_is_written(tmp_path):
    """files: 100000000 (about 11 TB) was generated into the staging directory until ENOSPC, and left there."""
    done = stage(tmp_path, files=100_000_000)
    assert done.returncode != 0
    root = tmp_path / "staging" / "iolab-localhost" / "dataset"
    needed = round(100_000_000 * dataset_state.MEAN_SIZE * dataset_state.MARGIN / (1 << 20))
    assert re.search(
        rf"the data set \(100000000 files\) needs about {needed} MiB but {root} has [0-9]+ MiB free on localhost; "
        "give the backend more space or the data set fewer files",
        done.stderr,
    ), done.stderr
    assert not (tmp_path / "staging").exists()


def test_staging_replaces_another_data_set_in_iolabs_own_directory(tmp_path):
    root = tmp_path / "staging" / "iolab-localhost" / "dataset"
    gen(root, files=5, seed=2, classes=10, workers=1)
    done = stage(tmp_path, files=12)
    assert done.returncode == 0, done.stderr
    manifest = Manifest.load(root)
    assert (manifest.files, manifest.seed) == (12, 1)
