"""The command line as a user meets it: `./lab --version`, `-h` after a task, the flags the docs show,
and which results `./lab report` picks when no campaign is named."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from iolab.errors import UserError
from iolab.measures.samples import ResultStore, Sample
from iolab.report import tables as report
from support import plain_sample

ROOT = Path(__file__).resolve().parents[2]


def lab(*args: str) -> subprocess.CompletedProcess:
    """`./lab ARGS` itself (the wrapper script, not invoke directly)."""
    return subprocess.run(
        [str(ROOT / "lab"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )


def namespace():
    """The tasks package's collection, loaded as invoke loads it."""
    spec = importlib.util.spec_from_file_location(
        "iolab_lab_tasks", ROOT / "tasks" / "__init__.py", submodule_search_locations=[str(ROOT / "tasks")]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["iolab_lab_tasks"] = module
    spec.loader.exec_module(module)
    return module.ns


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_is_iolabs_own(flag):
    done = lab(flag)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"iolab {version('iolab')}\n"


@pytest.mark.parametrize(
    "command",
    [
        ["bench.fio", "-h"],
        ["bench.fio", "--hosts", "gpu01", "-h"],
        ["storage.mount", "-h"],
        ["bench.accelerators", "--help"],
    ],
)
def test_dash_h_after_a_task_shows_that_tasks_help(command):
    """A task with a required argument would otherwise take -h as that argument's value and run."""
    done = lab(*command)
    assert done.returncode == 0, done.stderr
    assert f"[--core-opts] {command[0]} [--options]" in done.stdout
    assert "--hosts=STRING" in done.stdout


def test_a_help_flag_after_dashdash_is_the_users_commands_not_the_tasks():
    """`trace.capture ... -- CMD --help`: the flags after `--` are the traced command's; the task runs (here it
    refuses its relative --root in one line) instead of showing its own help."""
    done = lab("trace.capture", "--root", "relative/dir", "--", "true", "--help")
    assert done.returncode == 2 and "[--core-opts] trace.capture" not in done.stdout
    assert "--root 'relative/dir': give the absolute directory" in done.stderr


def test_no_task_flag_takes_the_short_flag_h():
    ns = namespace()
    owners = {name: [a.name for a in ns[name].get_arguments() if "h" in a.names] for name in ns.task_names}
    assert not {name: args for name, args in owners.items() if args}
    fio_flags = {a.name: a.names for a in ns["bench.fio"].get_arguments()}
    assert "hosts" in fio_flags  # still a flag, under its long name


def lab_commands(text: str) -> list[tuple[str, list[str]]]:
    """(task, --flags) of every `./lab TASK ...` in `text`, up to the end of its line or backtick span, or to a
    ` -- ` after which the flags are a command's of the user's (trace.capture)."""
    found = []
    for match in re.finditer(r"\./lab ([a-z][\w.-]*)([^\n`]*)", text):
        own = match.group(2).split(" -- ")[0]
        found.append((match.group(1), re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)", own)))
    return found


def test_lab_commands_finds_flags():
    text = "x `./lab report --campaign q --format html --output f.html` y\n./lab --list\n"
    assert lab_commands(text) == [("report", ["campaign", "format", "output"])]
    assert lab_commands("./lab trace.capture --root /d -- python t.py --data /d") == [("trace.capture", ["root"])]


def test_commands_in_the_docs_and_campaigns_use_flags_that_exist():
    """Every `./lab TASK --flag` shown in README, docs/ and campaign files names a flag of that task."""
    ns = namespace()
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "campaigns").glob("*.yml"))]
    wrong, checked = [], 0
    for path in files:
        for task, flags in lab_commands(path.read_text()):
            assert task in ns.task_names or task in ns.collections, f"{path.name}: ./lab {task}: no such task"
            known = {name for arg in ns[task].get_arguments() for name in arg.names} | {"help"}
            wrong += [f"{path.relative_to(ROOT)}: ./lab {task} --{flag}" for flag in flags if flag not in known]
            checked += len(flags)
    assert checked > 20
    assert not wrong


def sample(campaign: str) -> Sample:
    return plain_sample(campaign=campaign)


def test_report_without_a_campaign_picks_the_newest_store_with_its_own_samples(tmp_path):
    """Not a store `--no-resume` moved aside (`<campaign>.<UTC time>/`), nor one without samples."""
    results = tmp_path / "results"
    stores = {name: ResultStore(results, name) for name in ("older", "quick", "quick.20261121T060000Z", "empty")}
    stores["older"].add_samples([sample("older")])
    stores["quick"].add_samples([sample("quick")])
    stores["quick.20261121T060000Z"].add_samples([sample("quick")])  # moved aside: keeps its campaign's name
    stores["empty"].samples_path.parent.mkdir(parents=True)
    stores["empty"].samples_path.write_text("")
    stores["empty"].add_run_records([{"run_id": "r1", "host": "h", "status": "failed", "error": "no fio"}])
    for age, name in enumerate(["empty", "quick.20261121T060000Z", "quick", "older"]):  # newest first
        os.utime(stores[name].samples_path, (1e9 - age * 60, 1e9 - age * 60))
    assert report.find_store(results, None).dir.name == "quick"


def test_report_without_a_campaign_and_only_moved_aside_results_says_so(tmp_path):
    results = tmp_path / "results"
    ResultStore(results, "quick.20261121T060000Z").add_samples([sample("quick")])
    with pytest.raises(UserError, match="no results in .* yet"):
        report.find_store(results, None)
