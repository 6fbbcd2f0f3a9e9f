"""iolab's commands: `./lab --list` shows them, `./lab --help TASK` explains one.

Thin on purpose: each task parses its flags and calls into pyfiles/iolab/.
"""

from __future__ import annotations

import sys

from invoke import Collection, task
from rich.console import Console

from iolab import bench as bench_mod
from iolab import campaign as campaign_mod
from iolab import direct, paths, provenance, report as report_mod, runner, sim
from iolab.cli import console, echo, lab as make_lab, user_errors
from iolab.errors import RunFailed, UserError
from iolab.samples import ResultStore

HOSTS = "host pattern: gpu[01-04], gpu01,gpu03, gpu[01-04]:!gpu02 (default: all hosts)"
INVENTORY = "inventory file (default: inventory/local.yml, this machine)"
CAMPAIGN = "campaign file (default: campaigns/quick.yml)"


# --- lab ---------------------------------------------------------------------------------

@task(help={"inventory": INVENTORY, "hosts": HOSTS})
@user_errors
def setup(c, inventory=None, hosts=None):
    """Provision hosts: packages (fio, sysstat, strace), the iolab package, provenance."""
    lab = make_lab(inventory, hosts)
    facts_dir = _gather_facts(lab)
    echo(f"provisioned {len(lab.hosts)} host(s); provenance in {facts_dir}")


def _gather_facts(lab):
    """Provision the hosts (idempotent) and bring their provenance to results/facts/."""
    facts_dir = paths.results_root() / "facts"
    facts_dir.mkdir(parents=True, exist_ok=True)
    result = lab.play(runner.Phase("setup.yml", {"iolab_host_facts_dest": str(facts_dir)}), "lab.setup")
    if result.failures() or result.status != "successful":
        raise RunFailed(f"lab.setup failed: {result.summary()}")
    return facts_dir


@task(help={"count": "number of simulated hosts gpu01..gpuNN (default 4)"})
@user_errors
def sim_up(c, count=4):
    """Start simulated GPU hosts (namespaces + sshd) and write inventory/sim.yml."""
    hosts = sim.up(int(count), paths.LAB_DIR, paths.SIM_INVENTORY)
    echo(f"{len(hosts)} simulated hosts up: {', '.join(h.name for h in hosts)}; "
         f"use --inventory {paths.SIM_INVENTORY.relative_to(paths.ROOT)}")


@task
@user_errors
def sim_down(c):
    """Stop the simulated hosts and remove everything sim-up made."""
    sim.down(paths.LAB_DIR, paths.SIM_INVENTORY)
    echo("simulated hosts down; nothing left behind")


@task(help={"inventory": INVENTORY, "hosts": HOSTS})
@user_errors
def ping(c, inventory=None, hosts=None):
    """Reach every host over SSH (Fabric) and show its name, kernel and round-trip time."""
    lab = make_lab(inventory, hosts)
    _replies(direct.ping(lab.inventory, lab.hosts))


@task(name="exec", help={"command": "the command, run by each host's shell", "inventory": INVENTORY,
                         "hosts": HOSTS, "timeout": "seconds per host (default 60)"})
@user_errors
def exec_(c, command, inventory=None, hosts=None, timeout=60):
    """Run a command on every host at once over SSH and show a row per host."""
    lab = make_lab(inventory, hosts)
    _replies(direct.run_all(lab.inventory, lab.hosts, command, float(timeout)))


def _replies(replies):
    from rich.table import Table

    out = Table(show_edge=False)
    for column in ("host", "exit", "time", "output"):
        out.add_column(column)
    for r in replies:
        status = "[red]unreachable[/]" if r.exit is None else str(r.exit) if r.exit == 0 else f"[red]{r.exit}[/]"
        out.add_row(r.host, status, f"{r.seconds * 1000:.0f} ms", r.output[-400:])
    Console().print(out)
    bad = [r.host for r in replies if r.exit != 0]
    if bad:
        raise RunFailed(f"{len(bad)} of {len(replies)} host(s) failed or were unreachable: {', '.join(bad)}")


@task(help={"inventory": INVENTORY, "hosts": HOSTS})
@user_errors
def facts(c, inventory=None, hosts=None):
    """Show the hosts' provenance side by side and flag where they differ."""
    lab = make_lab(inventory, hosts)
    facts_dir = _gather_facts(lab)
    found = provenance.load(facts_dir, lab.hosts)
    Console().print(provenance.table(found))
    differ = provenance.differences(found)
    if differ:
        console.print(f"[yellow]warning:[/] hosts differ in {', '.join(differ)}: per-host results of one "
                      "campaign on them are not comparable")


# --- bench -------------------------------------------------------------------------------

def _finish(failures: list[str], store: ResultStore) -> None:
    if failures:
        shown = "; ".join(failures[:3]) + (f" (and {len(failures) - 3} more)" if len(failures) > 3 else "")
        raise RunFailed(f"{len(failures)} failure(s): {shown}. Results so far are in {store.dir}; "
                        "run the same command again to retry what failed")
    echo(f"results in {store.dir}; `./lab report --campaign {store.dir.name}` compares them")


@task(help={"inventory": INVENTORY, "hosts": HOSTS, "campaign": CAMPAIGN,
            "dry_run": "show the runs and their job files; touch no host",
            "no_resume": "start over (earlier results are moved aside, not deleted)"})
@user_errors
def all_(c, inventory=None, hosts=None, campaign=None, dry_run=False, no_resume=False):
    """Run a campaign: every backend × workload × repetition, skipping runs already stored."""
    spec = campaign_mod.load(campaign or paths.DEFAULT_CAMPAIGN)
    lab = make_lab(inventory, hosts)
    if dry_run:
        echo(bench_mod.describe(spec, lab))
        return
    store = ResultStore(paths.results_root(), spec.name)
    _finish(bench_mod.run_campaign(spec, lab, store, resume=not no_resume), store)


@task(help={"inventory": INVENTORY, "hosts": HOSTS, "campaign": "campaign file whose backends to use "
            "(default: campaigns/quick.yml)", "backend": "backend name (default: the campaign's first)",
            "profile": "fio profile name or a fio job file (default: seq-read-1m)",
            "runtime": "timed part, e.g. 10s", "ramp": "ramp before it, e.g. 2s",
            "size": "data file per host, e.g. 512MiB (default: what fits, up to 1 GiB)"})
@user_errors
def fio(c, inventory=None, hosts=None, campaign=None, backend=None, profile="seq-read-1m",
        runtime="10s", ramp="2s", size=None):
    """Run one fio job on one backend now; results go to the campaign 'fio-<backend>'."""
    spec = campaign_mod.load(campaign or paths.DEFAULT_CAMPAIGN)
    lab = make_lab(inventory, hosts)
    one = bench_mod.single_fio(spec, backend, profile, runtime, ramp, size)
    store = ResultStore(paths.results_root(), one.name)
    one = bench_mod.next_repetition(one, store)
    _finish(bench_mod.run_campaign(one, lab, store), store)


# --- storage -----------------------------------------------------------------------------

def _storage(state, inventory, hosts, campaign, backend):
    spec = campaign_mod.load(campaign or paths.DEFAULT_CAMPAIGN)
    names = [b.name for b in spec.backends]
    if backend not in names:
        raise UserError(f"backend {backend!r} is not in {campaign or paths.DEFAULT_CAMPAIGN} "
                        f"(it has: {', '.join(names)}); pass --backend NAME")
    lab = make_lab(inventory, hosts)
    phases = [runner.Phase("setup.yml"), bench_mod.storage_phase(spec, backend, state, stop_tools=state == "absent")]
    result = lab.play(phases, f"storage {state}", cancellable=state == "kept")
    if result.failures() or result.status != "successful":
        raise RunFailed(f"{backend} {state}: {result.summary()}")
    target = next(b.target for b in spec.backends if b.name == backend)
    done = "mounted" if state == "kept" else "unmounted"
    echo(f"{backend} {done} on {len(lab.hosts)} host(s) at {target}")


@task(help={"inventory": INVENTORY, "hosts": HOSTS, "campaign": CAMPAIGN, "backend": "backend name"})
@user_errors
def mount(c, backend, inventory=None, hosts=None, campaign=None):
    """Mount a campaign's backend by hand (for staging or inspecting data); campaigns leave it mounted."""
    _storage("kept", inventory, hosts, campaign, backend)


@task(help={"inventory": INVENTORY, "hosts": HOSTS, "campaign": CAMPAIGN, "backend": "backend name"})
@user_errors
def unmount(c, backend, inventory=None, hosts=None, campaign=None):
    """Unmount a campaign's backend mounted by hand."""
    _storage("absent", inventory, hosts, campaign, backend)


# --- report ------------------------------------------------------------------------------

@task(default=True, help={"campaign": "campaign name (default: the latest with results)",
                          "format": "table | csv | json"})
@user_errors
def show(c, campaign=None, format="table"):
    """Compare backends: median and spread over repetitions, per workload and metric."""
    store = report_mod.find_store(paths.results_root(), campaign)
    if format == "table":
        from rich.console import Console

        Console().print(report_mod.table(store))
    elif format in ("csv", "json"):
        echo(report_mod.export(store, format))
    else:
        raise UserError(f"unknown report format {format!r}; use table, csv or json")


# --- test --------------------------------------------------------------------------------

@task(help={"args": "extra pytest arguments, e.g. '-k fio -x'"})
def test(c, args=""):
    """Run the whole test suite (unit, integration on localhost, simulated multi-host lab)."""
    c.run(f"{sys.executable} -m pytest {args}", pty=False)


lab = Collection("lab", setup, sim_up, sim_down, ping, exec_, facts)
bench = Collection("bench", fio)
bench.add_task(all_, name="all")
storage = Collection("storage", mount, unmount)
report = Collection("report", show)
ns = Collection(lab, bench, storage, report, test)
