"""The package's structure, held: no import cycle, and the host side never imports the controller side.

Read from the code's own import statements (ast), as a reviewer would follow them; imports
under `if TYPE_CHECKING:` are annotations only and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

PYFILES = Path(__file__).resolve().parents[2] / "pyfiles"
# What host-side code may import of iolab besides iolab.host itself: shared leaves with no imports of their own.
SHARED = {"iolab", "iolab.errors", "iolab.units"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PYFILES.rglob("*.py"):
        parts = path.relative_to(PYFILES).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text())
    hidden = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
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


def test_the_host_side_imports_nothing_of_the_controller_side():
    wrong = {
        f"{name} imports {dep}"
        for name, deps in graph().items()
        if name.startswith("iolab.host")
        for dep in deps
        if not (dep.startswith("iolab.host") or dep in SHARED)
    }
    assert not wrong, sorted(wrong)


def test_the_shared_leaves_import_nothing_of_iolab():
    edges = graph()
    assert {leaf: edges[leaf] for leaf in SHARED if edges[leaf]} == {}


def test_no_import_cycle():
    edges, state, cycles = graph(), {}, []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for dep in sorted(edges[node]):
            if state.get(dep) == "open":
                cycles.append(
                    " -> ".join(trail[trail.index(dep) :] + [node, dep]) if dep in trail else f"{node} -> {dep}"
                )
            elif dep not in state:
                visit(dep, trail + [node])
        state[node] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [])
    assert not cycles, cycles


def test_the_checks_see_a_violation():
    """The graph is real: the controller's campaign loop is seen importing the host side's fio jobs."""
    edges = graph()
    assert "iolab.host.fio_jobs" in edges["iolab.bench"] and "iolab.host.hostrun" in edges["iolab.host.fio_jobs"]
