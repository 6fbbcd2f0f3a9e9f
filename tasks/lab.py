"""./lab lab.*: the hosts — provisioning, simulated hosts, the lab's own services, direct SSH."""

from __future__ import annotations

from invoke import Collection
from rich.console import Console

from iolab import paths, sim
from iolab.drive import direct, execute
from iolab.errors import RunFailed, UserError
from iolab.measures import provenance
from iolab.run.cli import console, echo, user_errors
from iolab.run.cli import lab as make_lab

from .common import HOSTS, INVENTORY, task

# --- lab ---------------------------------------------------------------------------------


@task(
    help={
        "inventory": INVENTORY,
        "hosts": HOSTS,
        "dl": "also install the pinned deep-learning stack (torch, Pillow, numpy, OpenCV) for loaders",
    }
)
@user_errors
def setup(c, inventory=None, hosts=None, dl=False):
    """Provision hosts: packages (fio, sysstat, strace), the iolab package, provenance."""
    lab = make_lab(inventory, hosts)
    facts_dir = execute.gather_facts(lab, dl)
    echo(f"provisioned {len(lab.hosts)} host(s); provenance in {facts_dir}")


LAB = "simulated lab name, 1-8 of a-z0-9 (default: $IOLAB_LAB, else a short hash of this checkout's path)"


@task(help={"count": "number of simulated hosts gpu01..gpuNN (default 4)", "lab": LAB})
@user_errors
def sim_up(c, count=4, lab=None):
    """Start this checkout's simulated GPU hosts (namespaces + sshd) and write their inventory."""
    chosen = sim.for_checkout(lab)
    hosts = sim.up(int(count), chosen)
    echo(
        f"lab {chosen.name}: {len(hosts)} simulated hosts up: {', '.join(h.name for h in hosts)}; "
        f"use --inventory {chosen.inventory.relative_to(paths.ROOT)}; lab services for them: "
        f"lab.services-up --bind {sim.controller_address(sim.subnet_of(chosen))}"
    )


@task(help={"lab": LAB})
@user_errors
def sim_down(c, lab=None):
    """Stop this checkout's simulated hosts and remove everything its sim-up made (no other lab's)."""
    chosen = sim.for_checkout(lab)
    if not sim.down(chosen):
        others = ", ".join(f"{name} (from {e['dir']})" for name, e in sim.labs().items()) or "none"
        echo(f"lab {chosen.name} is not up: nothing to take down (labs up on this machine: {others})")
        return
    echo(f"lab {chosen.name}: simulated hosts down; nothing left behind")


SERVICE_HELP = {
    "inventory": "inventory file with the hosts to run the services on (default: this machine)",
    "hosts": "those hosts: a host or group pattern (needed with --inventory)",
    "services": "which: ceph,nfs (default both)",
    "vars_file": "YAML file of the roles' variables (service_ceph_dir, service_ceph_mon_port, ...)",
}


def _services_lab(inventory, hosts):
    if inventory and not hosts:
        raise UserError("name the hosts that run the services with --hosts (a host or a group such as ceph_mon)")
    return make_lab(inventory, hosts)


@task(
    help={
        **SERVICE_HELP,
        "bind": "address the services listen on (default 127.0.0.1; for simulated hosts "
        "the address lab.sim-up printed, or 'sim' for this checkout's lab: the Ceph "
        "monitor keeps its first address)",
    }
)
@user_errors
def services_up(c, inventory=None, hosts=None, bind=None, services="ceph,nfs", vars_file=None):
    """Start the lab's Ceph cluster and NFS server (lab in a box) and say how clients reach them."""
    from iolab.drive import services as services_mod

    if bind == "sim":
        subnet = sim.subnet_of(sim.for_checkout())
        if subnet is None:
            raise UserError(f"--bind sim: lab {sim.for_checkout().name} is not up; run lab.sim-up first")
        bind = sim.controller_address(subnet)
    for line in services_mod.up(_services_lab(inventory, hosts), bind, services, vars_file):
        echo(line)


@task(help={**SERVICE_HELP, "destroy": "also delete the services' data (the Ceph cluster, its images)"})
@user_errors
def services_down(c, inventory=None, hosts=None, destroy=False, services="ceph,nfs", vars_file=None):
    """Stop the lab's services (their data stays); --destroy deletes them with their data."""
    from iolab.drive import services as services_mod

    for line in services_mod.down(_services_lab(inventory, hosts), destroy, services, vars_file):
        echo(line)


@task(help={"inventory": INVENTORY, "hosts": HOSTS})
@user_errors
def ping(c, inventory=None, hosts=None):
    """Reach every host over SSH (Fabric) and show its name, kernel and round-trip time."""
    lab = make_lab(inventory, hosts)
    _replies(direct.ping(lab.inventory, lab.hosts))


@task(
    name="exec",
    help={
        "command": "the command, run by each host's shell",
        "inventory": INVENTORY,
        "hosts": HOSTS,
        "timeout": "seconds per host (default 60)",
    },
)
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
    facts_dir = execute.gather_facts(lab)
    found = provenance.load(facts_dir, lab.hosts)
    Console().print(provenance.table(found))
    differ = provenance.differences(found)
    if differ:
        console.print(
            f"[yellow]warning:[/] hosts differ in {', '.join(differ)}: per-host results of one "
            "campaign on them are not comparable"
        )


lab = Collection("lab", setup, sim_up, sim_down, services_up, services_down, ping, exec_, facts)
