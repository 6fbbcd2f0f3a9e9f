"""The package's structure, held: layers that say what may import what, and no import cycle.

Two sides run on the hosts: `iolab.host.*` imports only itself, `iolab.shared` and the leaves; `iolab.shared.*`
imports only itself and the leaves. `iolab`, `iolab.errors` and `iolab.units` are the package's leaves, with no
imports of iolab: every side may use them. The controller is a stack of layers (LAYERS, lowest first); a module
may import its own layer and those below, never one above, never the host side; every module belongs to one
layer (a new one is placed in the table, or the test says where it is missing). docs/DESIGN.md draws the table.
A kind's folder (`iolab.kinds.<kind>`) holds files of several layers, each placed by its name (KIND_FILES): its
host program on the host side, its workload and its parser each on their layer; the folders' faces and the package's
are leaves (the host imports them on its way to a host program), and the kinds' registry stands above every kind.
Read from the code's own import statements (ast), as a reviewer would follow them, those inside functions and
under `if TYPE_CHECKING:` included: an annotation that needs a module is an edge all the same.
And their size: no module over 500 lines, no function over 60 (test_size_limits), the tasks included.
"""

from __future__ import annotations

import ast
from pathlib import Path

PYFILES = Path(__file__).resolve().parents[2] / "pyfiles"
LEAVES = {"iolab", "iolab.errors", "iolab.units"}
# The controller's layers, lowest first, each with its packages and modules (a package holds its sub-modules).
LAYERS = [
    ("base", ["iolab.paths", "iolab.yamlfile", "iolab.progress", "iolab.schema", "iolab.faults", "iolab.parsers"]),
    ("backends", ["iolab.backends"]),  # they see a workload through a Protocol (backends.base.Workload)
    ("workloads", ["iolab.workloads"]),
    ("kinds", ["iolab.kinds"]),  # the kinds' folders (each file on its layer: KIND_FILES) and their registry
    ("measures", ["iolab.measures"]),
    ("campaign", ["iolab.campaign"]),
    ("store", ["iolab.store"]),
    ("drive", ["iolab.drive", "iolab.sim"]),
    ("results", ["iolab.results"]),
    ("report", ["iolab.report"]),
    ("run", ["iolab.run"]),
]
ORDER = ["leaf", "shared", *(name for name, _ in LAYERS)]
KIND_FILES = {"host": "host", "parser": "base", "workload": "workloads"}  # the files of iolab.kinds.<kind>


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
    """host, shared, leaf, or the controller's layer the module belongs to (its longest prefix in LAYERS);
    'unplaced' for a module of no layer."""
    for package in ("host", "shared"):
        if module == f"iolab.{package}" or module.startswith(f"iolab.{package}."):
            return package
    if module in LEAVES:
        return "leaf"
    parts = module.split(".")
    if parts[:2] == ["iolab", "kinds"] and PYFILES.joinpath(*parts).is_dir():  # the package's face, a folder's
        return "leaf"
    if parts[:2] == ["iolab", "kinds"] and len(parts) == 4:  # host_<part>.py: a kind's further host program
        return KIND_FILES.get(parts[3].partition("_")[0] if parts[3].startswith("host_") else parts[3], "unplaced")
    placed = [
        (len(prefix), layer)
        for layer, prefixes in LAYERS
        for prefix in prefixes
        if module == prefix or module.startswith(f"{prefix}.")
    ]
    return max(placed)[1] if placed else "unplaced"


def may_import(importer: str, imported: str) -> bool:
    if "unplaced" in (importer, imported):
        return False
    if importer == "host":
        return imported in ("host", "shared", "leaf")
    if imported == "host":
        return False
    return ORDER.index(imported) <= ORDER.index(importer) if importer != "leaf" else False


def crossings(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{name} ({side(name)}) imports {dep} ({side(dep)})"
        for name, deps in edges.items()
        for dep in deps
        if not may_import(side(name), side(dep))
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


def test_each_side_and_layer_imports_only_what_it_may():
    """host → host, shared; shared → shared; each controller layer → itself and the layers below; the leaves →
    nothing of iolab; every module in a layer."""
    assert crossings(graph()) == []


def test_no_import_cycle_type_checking_included():
    assert cycles(graph()) == []


def test_the_checks_see_a_violation(tmp_path):
    """The checks are real: a controller module reaching the host side, a host module reaching the controller,
    a shared module reaching the controller, a layer reaching one above it (the ledger importing the lease, as it
    did), a module in no layer, a kind's host program reaching its workload and its parser reaching the workloads'
    floor, a file of no known name in a kind's folder, and a cycle through an import under TYPE_CHECKING are each
    seen."""
    edges = graph()
    assert (
        "iolab.shared.fio_options" in edges["iolab.kinds.fio.workload"]
        and "iolab.shared.processes" in edges["iolab.host.watch"]
    )
    wrong = {
        **edges,
        "iolab.run.bench": edges["iolab.run.bench"] | {"iolab.kinds.fio.host"},
        "iolab.shared.shapes": {"iolab.campaign.model"},
        "iolab.host.live": edges["iolab.host.live"] | {"iolab.drive.runner"},
        "iolab.store.ledger": edges["iolab.store.ledger"] | {"iolab.drive.lease"},
        "iolab.newthing": {"iolab.errors"},
        "iolab.kinds.metadata.host": edges["iolab.kinds.metadata.host"] | {"iolab.kinds.metadata.workload"},
        "iolab.kinds.metadata.parser": edges["iolab.kinds.metadata.parser"] | {"iolab.workloads.base"},
        "iolab.kinds.metadata.notes": {"iolab.errors"},  # a file of no known name in a kind's folder
    }
    assert crossings(wrong) == [
        "iolab.host.live (host) imports iolab.drive.runner (drive)",
        "iolab.kinds.metadata.host (host) imports iolab.kinds.metadata.workload (workloads)",
        "iolab.kinds.metadata.notes (unplaced) imports iolab.errors (leaf)",
        "iolab.kinds.metadata.parser (base) imports iolab.workloads.base (workloads)",
        "iolab.newthing (unplaced) imports iolab.errors (leaf)",
        "iolab.run.bench (run) imports iolab.kinds.fio.host (host)",
        "iolab.shared.shapes (shared) imports iolab.campaign.model (campaign)",
        "iolab.store.ledger (store) imports iolab.drive.lease (drive)",
    ]
    annotated = tmp_path / "base.py"  # backends.base as it was: the campaign's Dataset for an annotation
    annotated.write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from iolab.campaign.model import Dataset\n"
    )
    hidden = _imports("iolab.backends.base", annotated, _modules())
    assert hidden == {"iolab.campaign.model"}
    assert cycles({**edges, "iolab.backends.base": edges["iolab.backends.base"] | hidden}) != []


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 60


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
    """No module of the package, nor of the tasks, over 500 lines; no function in them over 60."""
    paths = [*sorted(PYFILES.rglob("*.py")), *sorted((PYFILES.parent / "tasks").glob("*.py"))]
    assert oversized(paths) == []
    long_one = tmp_path / "long.py"  # the check is real: it sees a function one line too long, and a module
    long_one.write_text("def f():\n" + "    x = 1\n" * 60 + "\n" * 440)
    assert oversized([long_one]) == [f"{long_one}: 501 lines", f"{long_one}:1 f: 61 lines"]


# --- beyond the package: the tasks, the benches, the roles' plugins; what the hosts get --------------------------

REPO = PYFILES.parent
OUTSIDE = {  # files outside the package that import it, and the side each stands on
    **{
        path: "controller"
        for path in [*sorted((REPO / "tasks").glob("*.py")), *sorted((REPO / "roles").glob("*/*_plugins/*.py"))]
    },
    **{path: "bench" for path in sorted((REPO / "bench").glob("*.py"))},  # benches of both sides, run here
}


def outside_imports(path: Path) -> set[str]:
    """What of iolab a file outside the package imports (absolute imports only), whether or not it exists: the
    modules, and `MODULE:NAME` for a name taken from a module."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "iolab"}
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "iolab":
            names = {f"{node.module}.{a.name}" for a in node.names}
            out |= {name if name in _modules() else f"{node.module}:{name.rpartition('.')[2]}" for name in names}
    return out


def defined(module: Path) -> set[str]:
    """The names a module defines or imports at its top level."""
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def test_tasks_the_benches_and_the_roles_plugins_import_what_exists_and_only_what_they_may():
    """The tasks imported host code (data.histogram, data.pack); bench/mlperf_au.py imported a module an earlier
    split had deleted (the host side's shapes, now iolab.shared.shapes): the split holds wherever the package is
    imported."""
    modules = _modules()
    missing, crossing = [], []
    for path, where in OUTSIDE.items():
        for module in sorted(outside_imports(path)):
            module, _, name = module.partition(":")
            if module not in modules:
                missing.append(f"{path.relative_to(REPO)} imports {module}, which is no module")
            elif name and name not in defined(modules[module]):
                missing.append(f"{path.relative_to(REPO)} imports {name} from {module}, which has none")
            elif where == "controller" and side(module) == "host":
                crossing.append(f"{path.relative_to(REPO)} (controller) imports {module} (host)")
    assert missing == [] and crossing == []


def test_the_hosts_get_the_host_side_the_shared_modules_and_the_leaves_only(tmp_path):
    """A report change does not re-release every host: the release is what the hosts run, nothing else."""
    import tarfile

    from iolab.drive import release

    _, archive = release.build(tmp_path)
    with tarfile.open(archive) as tar:
        names = {n.removesuffix(".py").replace("/", ".").removesuffix(".__init__") for n in tar.getnames()}
    assert names and {side(n) for n in names} <= {"host", "shared", "leaf"}, sorted(
        n for n in names if side(n) == "controller"
    )
    assert {"iolab.host.hostrun", "iolab.shared.leasehold", "iolab.errors", "iolab.units"} <= names
    assert {"iolab.kinds", "iolab.kinds.metadata", "iolab.kinds.metadata.host"} <= names  # a kind's host program
    assert "iolab.kinds.kvcache.host_reference" in names and "iolab.kinds.kvcache.workload" not in names
