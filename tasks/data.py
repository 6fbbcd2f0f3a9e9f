"""./lab data.*: data sets."""

from __future__ import annotations

from invoke import Collection

from iolab import paths
from iolab.drive import lease
from iolab.run.cli import echo, here, user_errors
from iolab.run.cli import lab as make_lab

from .common import HOSTS, INVENTORY, STEAL, task

# --- data and accelerators ----------------------------------------------------------------


@task(
    help={
        "path": "directory of the data set on each host (absolute)",
        "files": "number of JPEG files",
        "seed": "generation seed: same seed, same bytes (default 1)",
        "classes": "class folders (default 100)",
        "formats": "packed copies to make too: packed,wds,tfrecord (default none)",
        "per_host": "put each host's copy in PATH/<host> (hosts sharing a file system)",
        "inventory": INVENTORY,
        "hosts": HOSTS,
        "steal": STEAL,
    }
)
@user_errors
def gen(c, path, files, seed=1, classes=100, formats="", per_host=False, inventory=None, hosts=None, steal=False):
    """Generate an ImageNet-shaped data set on the hosts (kept where it is already there)."""
    from iolab.drive import datasets

    lab = make_lab(inventory, hosts)
    wanted = [f for f in formats.split(",") if f]
    with lease.held(lab, f"data.gen of {path}", steal):
        reports = datasets.gen_on_hosts(
            lab, path, int(files), int(seed), int(classes), wanted, per_host, paths.results_root() / "datasets"
        )
    for host, found in reports.items():
        state = "generated" if found["before"]["state"] == "missing" else "already there"
        packs = f", packed: {', '.join(found['packed'])}" if found["packed"] else ""
        echo(
            f"{host}: {found['after']['root']}: {files} files, {state}{packs}; "
            f"manifest {found['after']['manifest_hash']}"
        )


@task(help={"path": "directory to walk (on this machine)"})
@user_errors
def histogram(c, path):
    """Show a data set's file sizes by power-of-two bucket and the fio bssplit that reads like them."""
    here("iolab.host.dataset", "histogram", path)


@task(
    name="pack",
    help={
        "path": "the data set's directory (on this machine)",
        "format": "packed | wds | tfrecord | all (default all)",
        "out": "directory of the pack (default PATH/FORMAT)",
        "samples_per_shard": "samples per tar or TFRecord file (default 1251, MLPerf resnet50)",
    },
)
@user_errors
def pack_(c, path, format="all", out=None, samples_per_shard=None):
    """Pack a data set on this machine (one file + index, webdataset tar, TFRecord), each checked."""
    here(
        "iolab.host.dataset",
        *["pack", path, "--format", format],
        *(["--out", out] if out else []),
        *(["--samples-per-shard", str(samples_per_shard)] if samples_per_shard else []),
    )


data = Collection("data", gen, histogram, pack_)
