"""Role storage_s3's staging copy of the data set, through role dataset_gen's checks (issue 23).

The staging copy is on the host's own disk, not in the bucket: these plays run the role's data set
tasks alone (--tags storage_s3_dataset) on localhost, read-only so that nothing is uploaded and no
endpoint is needed, with the staging directory in the test's own tmp_path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from iolab.host.dataset.gen import gen
from iolab.host.dataset.manifest import Manifest
from iolab.host.loader import dataset_state

ROOT = Path(__file__).resolve().parents[2]


def stage(tmp_path: Path, files: int, seed: int = 1) -> subprocess.CompletedProcess:
    """Play role storage_s3 (mounted, with the campaign's data set) on localhost; staging under tmp_path."""
    (tmp_path / "releases").mkdir(exist_ok=True)
    if not (tmp_path / "releases" / "test").exists():
        (tmp_path / "releases" / "test").symlink_to(ROOT / "pyfiles")
    playbook = tmp_path / "stage.yml"
    playbook.write_text("- hosts: all\n  gather_facts: false\n  roles: [storage_s3]\n")
    variables = {
        "ansible_python_interpreter": sys.executable,
        "iolab_python": sys.executable,
        "iolab_host_dir": str(tmp_path),
        "iolab_release": "test",
        "storage_s3_readonly": True,
        "storage_s3_staging": str(tmp_path / "staging"),
        "storage_s3_dataset": {"files": files, "seed": seed, "classes": 10, "kind": "imagenet-like"},
    }
    argv = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        "localhost,",
        "-c",
        "local",
        str(playbook),
        "--tags",
        "storage_s3_dataset",
    ]
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROOT / "roles"), "ANSIBLE_NOCOLOR": "1"}
    argv += ["-e", json.dumps(variables)]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_staging_a_data_set_larger_than_the_disk_is_refused_before_a_file_is_written(tmp_path):
    """files: 100000000 (about 11 TB) was generated into the staging directory until ENOSPC, and left there."""
    done = stage(tmp_path, files=100_000_000)
    assert done.returncode != 0
    root = tmp_path / "staging" / "iolab-localhost" / "dataset"
    needed = round(100_000_000 * dataset_state.MEAN_SIZE * dataset_state.MARGIN / (1 << 20))
    assert re.search(
        rf"the data set \(100000000 files\) needs about {needed} MiB but {root} has [0-9]+ MiB free on localhost; "
        "give the backend more space or the data set fewer files",
        " ".join(done.stdout.split()),  # the task's stderr, as Ansible's output wraps it
    ), done.stdout
    assert not (tmp_path / "staging").exists()


def test_staging_replaces_another_data_set_in_iolabs_own_directory(tmp_path):
    root = tmp_path / "staging" / "iolab-localhost" / "dataset"
    gen(root, files=5, seed=2, classes=10, workers=1)
    done = stage(tmp_path, files=12)
    assert done.returncode == 0, done.stdout
    manifest = Manifest.load(root)
    assert (manifest.files, manifest.seed) == (12, 1)
