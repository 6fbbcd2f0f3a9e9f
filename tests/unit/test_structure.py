"""The package's structure, held: three packages that say where code runs, and no import cycle.

- `iolab.host.*` runs on the benchmark hosts: it imports only itself and `iolab.shared`;
- `iolab.shared.*` is what both sides use, and runs on hosts too: it imports only itself;
- the controller (every other module: iolab.*, backends, workloads, parsers) never imports `iolab.host`.

`iolab`, `iolab.errors` and `iolab.units` are the package's leaves, with no imports of iolab: every
side may use them (the exceptions and the units every message names stay where the whole package
finds them). Read from the code's own import statements (ast), as a reviewer would follow them,
those under `if TYPE_CHECKING:` included: an annotation that needs a module is an edge all the same.
And their size: no module over 600 lines, no function over 80 (test_size_limits), tasks.py included.
"""

from __future__ import annotations

import ast
from pathlib import Path

PYFILES = Path(__file__).resolve().parents[2] / "pyfiles"
LEAVES = {"iolab", "iolab.errors", "iolab.units"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PYFILES.rglob("*.py"):
        parts = path.relative_to(PYFILES).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return {m for m in out if m in modules and m != name}


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def side(module: str) -> str:
    """host, shared, leaf or controller."""
    for package in ("host", "shared"):
        if module == f"iolab.{package}" or module.startswith(f"iolab.{package}."):
            return package
    return "leaf" if module in LEAVES else "controller"


ALLOWED = {
    "host": {"host", "shared", "leaf"},
    "shared": {"shared", "leaf"},
    "leaf": set(),
    "controller": {"controller", "shared", "leaf"},
}


def crossings(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{name} ({side(name)}) imports {dep} ({side(dep)})"
        for name, deps in edges.items()
        for dep in deps
        if side(dep) not in ALLOWED[side(name)]
    )


def cycles(edges: dict[str, set[str]]) -> list[str]:
    state: dict[str, str] = {}
    found: list[str] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for dep in sorted(edges[node]):
            if state.get(dep) == "open":
                found.append(
                    " -> ".join(trail[trail.index(dep) :] + [node, dep]) if dep in trail else f"{node} -> {dep}"
                )
            elif dep not in state:
                visit(dep, trail + [node])
        state[node] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [])
    return found


def test_each_side_imports_only_what_it_may():
    """host → host, shared; shared → shared; controller → controller, shared; the leaves → nothing of iolab."""
    assert crossings(graph()) == []


def test_no_import_cycle_type_checking_included():
    assert cycles(graph()) == []


def test_the_checks_see_a_violation(tmp_path):
    """The checks are real: a controller module reaching the host side, a host module reaching the controller,
    a shared module reaching the controller, and a cycle through an import under TYPE_CHECKING are each seen."""
    edges = graph()
    assert "iolab.shared.fio_options" in edges["iolab.bench"] and "iolab.shared.processes" in edges["iolab.host.watch"]
    wrong = {
        **edges,
        "iolab.bench": edges["iolab.bench"] | {"iolab.host.fio_jobs"},
        "iolab.shared.shapes": {"iolab.campaign"},
        "iolab.host.live": edges["iolab.host.live"] | {"iolab.runner"},
    }
    assert crossings(wrong) == [
        "iolab.bench (controller) imports iolab.host.fio_jobs (host)",
        "iolab.host.live (host) imports iolab.runner (controller)",
        "iolab.shared.shapes (shared) imports iolab.campaign (controller)",
    ]
    annotated = tmp_path / "base.py"  # backends.base as it was: the campaign's Dataset for an annotation
    annotated.write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from iolab.campaign import Dataset\n"
    )
    hidden = _imports("iolab.backends.base", annotated, _modules())
    assert hidden == {"iolab.campaign"}
    assert cycles({**edges, "iolab.backends.base": edges["iolab.backends.base"] | hidden}) != []


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 600, 80


def oversized(paths: list[Path]) -> list[str]:
    """Each module over MAX_MODULE_LINES lines and each function (a method, a nested one) over MAX_FUNCTION_LINES,
    counted from its `def` to its last line, as 'path: N lines' and 'path:line name: N lines'."""
    root = PYFILES.parent
    found = []
    for path in paths:
        text = path.read_text()
        name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            found.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_size_limits(tmp_path):
    """No module of the package, nor tasks.py, over 600 lines; no function in them over 80."""
    paths = [*sorted(PYFILES.rglob("*.py")), PYFILES.parent / "tasks.py"]
    assert oversized(paths) == []
    long_one = tmp_path / "long.py"  # the check is real: it sees a function one line too long, and a module
    long_one.write_text("def f():\n" + "    x = 1\n" * 80 + "\n" * 520)
    assert oversized([long_one]) == [f"{long_one}: 601 lines", f"{long_one}:1 f: 81 lines"]
