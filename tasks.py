"""iolab's commands: `./lab --list` shows them, `./lab --help TASK` explains one.

Thin on purpose: each task parses its flags and calls into pyfiles/iolab/.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from invoke import Collection, Task
from invoke import task as invoke_task
from invoke.exceptions import Exit
from rich.console import Console

from iolab import bench as bench_mod
from iolab import campaign as campaign_mod
from iolab import direct, execute, lease, metrics, paths, provenance, report_kvcache, session, sim
from iolab import report as report_mod
from iolab.cli import console, echo, here, user_errors
from iolab.cli import lab as make_lab
from iolab.errors import RunFailed, UserError
from iolab.samples import ResultStore
from iolab.units import printable

HOSTS = "host pattern: gpu[01-04], gpu01,gpu03, gpu[01-04]:!gpu02 (default: all hosts)"
INVENTORY = "inventory file (default: inventory/local.yml, this machine)"
CAMPAIGN = "campaign file (default: campaigns/quick.yml)"
STEAL = "take over a host lease whose campaign is verifiably gone (its process ended on this machine)"


class LabTask(Task):
    """A task whose flags never take the short flag -h: `./lab TASK -h` shows the task's help."""

    def arg_opts(self, name, default, taken_names):
        return super().arg_opts(name, default, taken_names | {"h"})


task = functools.partial(invoke_task, klass=LabTask)


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
    from iolab import services as services_mod

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
    from iolab import services as services_mod

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


# --- bench -------------------------------------------------------------------------------


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
    lab = make_lab(inventory, hosts)
    path = campaign or paths.DEFAULT_CAMPAIGN
    sized_without_ram = []

    def memory() -> list[int | None]:  # asked only by dataset.files: auto and MLPerf's size rule
        if dry_run:  # a dry run touches no host: MLPerf's floor without the RAM, and it says so
            sized_without_ram.append(True)
            return [None] * len(lab.hosts)
        return direct.memory(lab.inventory, lab.hosts)

    spec = campaign_mod.load(path, max_runs=int(max_runs), workload_file=workload_file, memory=memory)
    if dry_run:  # it names what the campaign would run on the hosts (check_commands refuses it below)
        echo(bench_mod.describe(spec, lab, files_at_run_time=bool(sized_without_ram)))
        return
    campaign_mod.check_commands(spec, path, allow_commands)
    with lease.held(lab, f"campaign {spec.name}", steal):
        store = ResultStore(paths.results_root(), spec.name)
        echo(bench_mod.outcome(bench_mod.run_campaign(spec, lab, store, resume=not no_resume), store))


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
    spec = campaign_mod.load(campaign or paths.DEFAULT_CAMPAIGN)
    lab = make_lab(inventory, hosts)
    one = campaign_mod.parse(
        fio.single_run(spec.backends, backend, profile, runtime, ramp, size), "bench.fio flags", "."
    )
    with lease.held(lab, f"bench.fio (campaign {one.name})", steal):
        store = ResultStore(paths.results_root(), one.name)
        one = bench_mod.next_repetition(one, store)
        echo(bench_mod.outcome(bench_mod.run_campaign(one, lab, store, only_repetition=one.repetitions), store))


# --- storage -----------------------------------------------------------------------------


def _storage(state, inventory, hosts, campaign, backend, steal):
    spec = campaign_mod.load(campaign or paths.DEFAULT_CAMPAIGN)
    phases = session.by_hand(spec, backend, state, campaign or paths.DEFAULT_CAMPAIGN)
    lab = make_lab(inventory, hosts)
    with lease.held(lab, f"storage.{'mount' if state == 'kept' else 'unmount'} of {backend}", steal):
        result = lab.play(phases, f"storage {state}", cancellable=state == "kept")
    echo(session.by_hand_done(spec, backend, state, result, len(lab.hosts)))


@task(help={"inventory": INVENTORY, "hosts": HOSTS, "campaign": CAMPAIGN, "backend": "backend name", "steal": STEAL})
@user_errors
def mount(c, backend, inventory=None, hosts=None, campaign=None, steal=False):
    """Mount a campaign's backend by hand (for staging or inspecting data); campaigns leave it mounted."""
    _storage("kept", inventory, hosts, campaign, backend, steal)


@task(help={"inventory": INVENTORY, "hosts": HOSTS, "campaign": CAMPAIGN, "backend": "backend name", "steal": STEAL})
@user_errors
def unmount(c, backend, inventory=None, hosts=None, campaign=None, steal=False):
    """Unmount a campaign's backend mounted by hand."""
    _storage("absent", inventory, hosts, campaign, backend, steal)


# --- report ------------------------------------------------------------------------------


@task(
    default=True,
    help={
        "campaign": "campaign name (default: the latest with results)",
        "format": "table | html (writes results/<campaign>/report.html) | csv | json | mlperf (MLPerf Storage's "
        "results columns)",
        "units": "byte figures of table and html: iec (GiB/s, the default) | si (GB/s)",
    },
)
@user_errors
def show(c, campaign=None, format="table", units=None):
    """Compare backends: who wins, median and spread over repetitions, validity flags."""
    if units is not None and format in ("csv", "json"):
        raise UserError(
            f"--units is for the table and the html page; {format} keeps canonical units "
            "(its unit column: B/s, IOPS, ns, ...)"
        )
    units = units or report_mod.DEFAULT_UNITS
    report_mod.unit_scale("B/s", 1.0, units)  # an unknown system is refused before any work
    store = report_mod.find_store(paths.results_root(), campaign)
    if format == "table":
        report_mod.print_report(store, units=units, leads=report_kvcache.LEADS)
    elif format == "html":
        from iolab import report_html

        echo(str(report_html.write(store, units)))
    elif format in ("csv", "json"):
        echo(report_mod.export(store, format))
    elif format == "mlperf":
        from iolab import report_mlperf, report_mlperf_kv

        samples = store.samples()
        echo(report_mlperf.text(samples, report_mlperf_kv.text(store, samples)))
    else:
        raise UserError(f"unknown report format {format!r}; use table, html, csv, json or mlperf")
    _say_skipped(store)


def _say_skipped(*stores):
    """The lines of a store a report skipped (not samples), one line each on stderr, beside the report."""
    for store in dict.fromkeys(s for s in stores if s is not None):  # one campaign's backends: one store
        if note := store.skipped_note():
            print(f"iolab: {printable(note)}", file=sys.stderr)


@task(
    positional=["a", "b"],
    iterable=["rule"],
    help={
        "a": "baseline: a campaign, or with --campaign a backend of it",
        "b": "compared with A: a campaign, or with --campaign a backend of it",
        "campaign": "compare two backends A and B of this campaign instead of two campaigns",
        "rule": "acceptance rule, repeatable: 'read_bw >= -5%', 'read_clat_p99 <= +10%'",
        "rules": "YAML file with rules: [...]",
        "format": "table | junit (JUnit XML, a test case per rule and point) | json; on stdout",
    },
)
@user_errors
def compare(c, a, b, campaign=None, rule=None, rules=None, format="table"):
    """B against A: ratio per metric with a 95% confidence interval; exit 1 when a rule is broken."""
    from rich.console import Console

    from iolab import compare as compare_mod

    writers = {"junit": compare_mod.to_junit, "json": compare_mod.to_json}
    if format != "table" and format not in writers:
        raise UserError(f"unknown compare format {format!r}; use table, junit or json")
    result = compare_mod.run(paths.results_root(), a, b, campaign, rule or [], rules)
    _say_skipped(result.a.store, result.b.store)
    violations = result.violations()
    if format == "table":
        Console().print(compare_mod.table(result, metrics.ordered("table")))
        for line in violations:
            echo(line)
    else:
        echo(writers[format](result))
    if violations:
        raise compare_mod.Regression(
            f"{len(violations)} rule violation(s): {result.b.label} regressed against {result.a.label}"
        )


@task
@user_errors
def history(c):
    """Past campaigns under results/: date, runs, hosts and configuration hash (same hash, same runs)."""
    from rich.console import Console

    from iolab import history as history_mod

    Console().print(history_mod.table(paths.results_root()))


# --- results ---------------------------------------------------------------------------------


@task(
    help={
        "campaign": "campaign name (default: the latest with results)",
        "write": "store the samples made again (the old ones are kept beside them) where they differ",
    }
)
@user_errors
def reparse(c, campaign=None, write=False):
    """Make a campaign's samples again from its runs' files and hold them against its store (exit 1 if they differ)."""
    from iolab import reparse as reparse_mod

    same, line = reparse_mod.check(report_mod.find_store(paths.results_root(), campaign), write)
    echo(line)
    if not same and not write:
        raise RunFailed("the samples made again differ from the store; --write stores them")


# --- data and accelerators (issue 5) ---------------------------------------------------------


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
    from iolab import datasets

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


@task(
    help={
        "backend": "backend name in the campaign",
        "type": "a100 | h100 | custom (default h100)",
        "compute": "compute time per batch, e.g. 0.224s (custom, or to override the type's figure)",
        "campaign": CAMPAIGN + "; its dataset is used",
        "inventory": INVENTORY,
        "hosts": HOSTS,
        "reader": "pil | cv2-imread | cv2-imdecode | packed (default packed)",
        "workers": "loader workers per accelerator (default 4)",
        "batch_size": "samples per batch (default 32, as campaigns/quick.yml)",
        "steps": "batches per epoch and accelerator, at most (default: the data set's; a probe runs the epochs "
        "that give 500 measured steps)",
        "decode": "decode images (default yes)",
        "max": "the ceiling: most accelerators per host to try (default 16); reaching it answers ≥ N",
        "threshold": "AU to hold, % (default 90)",
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
    workers=4,
    batch_size=32,
    steps=0,
    decode=True,
    max=16,
    threshold=90.0,
):
    """Find the most emulated accelerators per host that a backend keeps at AU ≥ 90%."""
    from iolab import accelerators as acc

    spec = campaign_mod.load(campaign or paths.DEFAULT_CAMPAIGN)
    lab = make_lab(inventory, hosts)
    accelerator = {"type": type, **({"compute_per_batch": compute} if compute else {})}
    workload = {
        "reader": reader,
        "workers": int(workers),
        "batch_size": int(batch_size),
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


# --- test --------------------------------------------------------------------------------

# The first CI stage: fast, and failing before the slow integration tests start.
LINTERS = (
    ["ruff", "check", "."],
    ["ruff", "format", "--check", "."],
    ["mypy"],
    ["yamllint", "--strict", "."],
    ["ansible-lint", "roles", "playbooks"],
)


def _stage(argv: list[str]) -> None:
    """Run one step (argv, in the repository, tools from this virtualenv); stop the command if it fails."""
    import subprocess

    tool = Path(sys.executable).parent / argv[0]
    echo(f"lab: {' '.join(argv)}")
    done = subprocess.run([str(tool) if tool.exists() else argv[0], *argv[1:]], cwd=paths.ROOT)
    if done.returncode != 0:
        raise Exit(f"lab: {argv[0]} failed (exit {done.returncode})", code=done.returncode)


@task
def lint(c):
    """Run the linters and the type checker: ruff (lint, format), mypy, yamllint, ansible-lint."""
    for argv in LINTERS:
        _stage(argv)


@task(help={"args": "pytest arguments instead of the stages, e.g. '-k fio -x'"})
def test(c, args=""):
    """Lint, then the unit tests (stopping at the first failure), then integration and simulated-lab tests."""
    import shlex

    pytest = [sys.executable, "-m", "pytest"]
    if args:
        _stage([*pytest, *shlex.split(args)])
        return
    lint(c)
    _stage([*pytest, "-x", "--durations=15", "tests/unit"])  # the slowest tests, named in the log
    _stage([*pytest, "--durations=25", "tests/integration", "tests/lab"])


lab = Collection("lab", setup, sim_up, sim_down, services_up, services_down, ping, exec_, facts)
bench = Collection("bench", fio)
bench.add_task(all_, name="all")
bench.add_task(accelerators)
data = Collection("data", gen, histogram, pack_)
storage = Collection("storage", mount, unmount)
report = Collection("report", show, compare, history)
results = Collection("results", reparse)
ns = Collection(lab, bench, storage, report, results, data, test, lint)
