"""./lab bench.*: campaigns, one fio run, the accelerator search, calibration."""

from __future__ import annotations

from invoke import Collection

from iolab import paths
from iolab.campaign import model as campaign_mod
from iolab.kinds.pytorch.workload import PytorchWorkload
from iolab.run import calibration, command
from iolab.run.cli import echo, user_errors
from iolab.run.cli import lab as make_lab
from iolab.workloads.mlperf import AU_THRESHOLD

from .common import CAMPAIGN, HOSTS, INVENTORY, STEAL, task

# --- bench -------------------------------------------------------------------------------

_LOADER = PytorchWorkload.model_fields  # bench.accelerators' defaults are the workload's own


@task(
    help={
        "inventory": INVENTORY,
        "hosts": HOSTS,
        "campaign": CAMPAIGN,
        "dry_run": "show the runs and their job files; touch no host",
        "no_resume": "start over (earlier results are moved aside, not deleted)",
        "max_runs": f"refuse a campaign of more runs than this (default {campaign_mod.MAX_RUNS:,})",
        "steal": STEAL,
        "workload_file": "a DLIO/MLPerf Storage workload YAML: its workload and data set replace the campaign's",
        "allow_commands": "run the campaign's warm_command on the hosts (refused without: trust the file first)",
    }
)
@user_errors
def all_(
    c,
    inventory=None,
    hosts=None,
    campaign=None,
    dry_run=False,
    no_resume=False,
    max_runs=campaign_mod.MAX_RUNS,
    steal=False,
    workload_file=None,
    allow_commands=False,
):
    """Run a campaign: every backend × workload × repetition, skipping runs already stored."""
    command.campaign(
        inventory,
        hosts,
        campaign or paths.DEFAULT_CAMPAIGN,
        max_runs=int(max_runs),
        workload_file=workload_file,
        dry_run=dry_run,
        resume=not no_resume,
        steal=steal,
        allow_commands=allow_commands,
    )


@task(
    help={
        "inventory": INVENTORY,
        "hosts": HOSTS,
        "campaign": "campaign file whose backends to use (default: campaigns/quick.yml)",
        "backend": "backend name (default: the campaign's first)",
        "profile": "fio profile name or a fio job file (default: seq-read-1m)",
        "runtime": "timed part, e.g. 10s",
        "ramp": "ramp before it, e.g. 2s",
        "size": "data file per host, e.g. 512MiB (default: what fits, up to 1 GiB); with a job file, the most"
        " it may lay out per host: its own sizes are not capped, a job file laying out more is refused",
        "steal": STEAL,
    }
)
@user_errors
def fio(
    c,
    inventory=None,
    hosts=None,
    campaign=None,
    backend=None,
    profile="seq-read-1m",
    runtime="10s",
    ramp="2s",
    size=None,
    steal=False,
):
    """Run one fio job on one backend now; results go to the campaign 'fio-<backend>'."""
    path = campaign or paths.DEFAULT_CAMPAIGN
    command.one_fio(
        inventory, hosts, path, backend=backend, profile=profile, runtime=runtime, ramp=ramp, size=size, steal=steal
    )


@task(
    help={
        "backend": "backend name in the campaign",
        "type": "a100 | h100 | custom (default h100)",
        "compute": "compute time per batch, e.g. 0.224s (custom, or to override the type's figure)",
        "campaign": CAMPAIGN + "; its dataset is used",
        "inventory": INVENTORY,
        "hosts": HOSTS,
        "reader": "pil | cv2-imread | cv2-imdecode | packed (default packed)",
        "workers": f"loader workers per accelerator (default {_LOADER['workers'].default})",
        "batch_size": f"samples per batch (default {_LOADER['batch_size'].default})",
        "steps": "batches per epoch and accelerator, at most (default: the data set's; a probe runs the epochs "
        "that give 500 measured steps)",
        "decode": "decode images (default yes)",
        "max": "the ceiling: most accelerators per host to try (default 16); reaching it answers ≥ N",
        "threshold": f"AU to hold, % (default {AU_THRESHOLD:g}, MLPerf Storage's)",
    }
)
@user_errors
def accelerators(
    c,
    backend,
    type="h100",
    compute=None,
    campaign=None,
    inventory=None,
    hosts=None,
    reader="packed",
    workers=None,
    batch_size=None,
    steps=0,
    decode=True,
    max=16,
    threshold=AU_THRESHOLD,
):
    """Find the most emulated accelerators per host that a backend keeps at AU ≥ a threshold (MLPerf's 90 %)."""
    from iolab.run import accelerators_task as acc

    spec = campaign_mod.load(campaign or paths.DEFAULT_CAMPAIGN)
    lab = make_lab(inventory, hosts)
    accelerator = {"type": type, **({"compute_per_batch": compute} if compute else {})}
    workload = {
        "reader": reader,
        # Not given: the workload's own defaults (iolab.kinds.pytorch.workload), as a campaign entry gets them.
        **({"workers": int(workers)} if workers is not None else {}),
        **({"batch_size": int(batch_size)} if batch_size is not None else {}),
        **({"steps": int(steps)} if int(steps) else {}),
        "decode": decode,
        "shuffle": True,
    }
    echo(
        f"searching the most {type} accelerators per host on {backend} at AU ≥ {float(threshold):g} % "
        f"({len(lab.hosts)} host(s); doubling, then bisection):"
    )
    found = acc.run_search(
        spec, lab, paths.results_root(), backend, accelerator, workload, int(max), float(threshold), show=echo
    )
    echo(acc.answer(found, type, backend, len(lab.hosts)))


@task(help={"inventory": INVENTORY, "hosts": HOSTS, "steal": STEAL, **calibration.FLAGS})
@user_errors
def calibrate(c, inventory=None, hosts=None, models="", batch_sizes="", campaign=None, scale="auto", steal=False):
    """Time each model's real training step on each host's GPU (or CPU) and write its accelerator profile."""
    echo("\n".join(calibration.run(make_lab(inventory, hosts), models, batch_sizes, campaign, scale, steal)))


bench = Collection("bench", fio, accelerators, calibrate)
bench.add_task(all_, name="all")
