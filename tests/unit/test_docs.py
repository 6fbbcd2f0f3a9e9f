"""The documentation is in the repository: every Markdown link and every `*.md` name the repository's files
mention resolves to a file of the repository, every `iolab.x.y` name they mention in prose resolves to a
module or a module's attribute, and docs/REFERENCE_FIGURES.md states the figures the code uses."""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from iolab.host import kvcache_sim
from iolab.host.dataset import gen
from iolab.kinds.kvcache import workload as kvcache
from iolab.measures import validity
from iolab.shared import fio_options, kvcache_model, shapes
from iolab.workloads import accelerator, kvcache_rules, mlperf

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".md", ".py", ".yml", ".yaml", ".j2", ".cfg", ".toml", ".sh"}
URL = re.compile(r"[a-z]+://\S+")
MD_NAME = re.compile(r"(?<![\w./-])[\w-][\w./-]*\.md\b")
MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def repo_files() -> list[Path]:
    """Tracked files and new ones git does not ignore (this checkout, as the next commit would have it)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return sorted({ROOT / name for name in listed if (ROOT / name).is_file()})


def text_files() -> list[Path]:
    """The files people read: docs, code and its comments, roles, playbooks, campaigns, the wrapper."""
    return [p for p in repo_files() if p.suffix in TEXT_SUFFIXES or p.name == "lab"]


def resolves(name: str, source: Path, basenames: set[str]) -> bool:
    """A path resolves beside its file or from the repository root; a bare name to any file of that name."""
    if "/" not in name:
        return name in basenames
    return any((base / name).resolve().is_file() for base in (source.parent, ROOT))


def test_md_names_finds_paths_and_bare_names_not_urls():
    text = "see docs/DESIGN.md, (LAB_NOTES.md) and https://example.org/x/README.md; `*.md` globs"
    assert MD_NAME.findall(URL.sub("", text)) == ["docs/DESIGN.md", "LAB_NOTES.md"]


def test_every_md_name_mentioned_is_a_file_of_the_repository():
    files = text_files()
    basenames = {p.name for p in repo_files()}
    missing, seen = [], 0
    for path in files:
        for name in MD_NAME.findall(URL.sub("", path.read_text(errors="replace"))):
            seen += 1
            if not resolves(name, path, basenames):
                missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert seen > 10
    assert not missing, "documents cited but not in the repository:\n" + "\n".join(missing)


DOTTED = re.compile(r"(?<![\w./-])iolab(?:\.[A-Za-z_]\w*)+(?![\w/-])")
# Names that look like iolab's modules and are not: RBD image metadata keys the storage roles set.
NOT_CODE = {"iolab.prefilled", "iolab.snapshot"}


def prose(path: Path) -> str:
    """What people read of a file: a Python file's comments and docstrings, any other file whole."""
    text = path.read_text(errors="replace")
    if path.suffix != ".py":
        return text
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return "\n".join(
        t.string
        for t in tokens
        if t.type == tokenize.COMMENT or (t.type == tokenize.STRING and t.string.lstrip("rbuRBU")[:3] in ('"""', "'''"))
    )


def names_something(dotted: str) -> bool:
    """`iolab.a.b.c`: the longest importable module prefix, then attributes of it for the rest."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for attribute in parts[end:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_dotted_names_are_found_in_prose_and_checked():
    text = "see iolab.drive.execute.OWNER, `iolab.run.bench.OWNER` (moved), iolab.pack/1 and pyfiles/iolab.egg-info"
    assert DOTTED.findall(text) == ["iolab.drive.execute.OWNER", "iolab.run.bench.OWNER"]
    assert names_something("iolab.drive.execute.OWNER") and names_something("iolab.shared.shapes")
    assert not names_something("iolab.run.bench.OWNER") and not names_something("iolab.hostrun")


def test_every_iolab_name_mentioned_resolves():
    """A name in prose that moved in a split (`iolab.run.bench.OWNER`) sends a reader to nothing."""
    missing, seen = [], 0
    for path in text_files():
        if path == Path(__file__):
            continue  # its own examples
        for name in sorted(set(DOTTED.findall(prose(path)))):
            seen += 1
            if ".".join(name.split(".")[:2]) not in NOT_CODE and not names_something(name):
                missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert seen > 50
    assert not missing, "iolab names that are no module or attribute:\n" + "\n".join(missing)


def test_every_markdown_link_resolves():
    missing, seen = [], 0
    for path in (p for p in repo_files() if p.suffix == ".md"):
        for target in MD_LINK.findall(path.read_text()):
            if URL.match(target) or target.startswith(("#", "mailto:")):
                continue
            seen += 1
            if not (path.parent / target.split("#", 1)[0]).resolve().exists():
                missing.append(f"{path.relative_to(ROOT)}: ({target})")
    assert seen > 5
    assert not missing, "broken links:\n" + "\n".join(missing)


def test_no_file_cites_documents_outside_the_repository():
    cited = [
        f"{p.relative_to(ROOT)}"
        for p in text_files()
        if p != Path(__file__).resolve() and re.search(r"shared/(docs/|DESIGN|STYLE)", p.read_text(errors="replace"))
    ]
    assert not cited


def figure_row(constant: str) -> str:
    rows = [
        line
        for line in (ROOT / "docs" / "REFERENCE_FIGURES.md").read_text().splitlines()
        if line.startswith("|") and constant in line
    ]
    assert rows, f"docs/REFERENCE_FIGURES.md has no row naming {constant}"
    return rows[0]


@pytest.mark.parametrize(
    "constant, stated",
    [
        ("shared.fio_options.IMAGENET_BSSPLIT", fio_options.IMAGENET_BSSPLIT),
        ("host.dataset.gen.TARGET_MEAN", f"{gen.TARGET_MEAN:,} B"),
        ("shared.shapes.MEAN_SIZE", f"{shapes.MEAN_SIZE:,} B"),
        ("shared.shapes.SAMPLES_PER_SHARD", f"{shapes.SAMPLES_PER_SHARD:,}"),
        ("workloads.accelerator.REFERENCE_BATCH", f"{accelerator.REFERENCE_BATCH}"),
        ("workloads.mlperf.AU_THRESHOLD", f"{mlperf.AU_THRESHOLD:g} %"),
        ("workloads.mlperf.RAM_MULTIPLE", f"{mlperf.RAM_MULTIPLE}×"),
        ("validity.AGREEMENT", f"{validity.AGREEMENT * 100:g} %"),
        *[
            (f'workloads.accelerator.ACCELERATOR_FIGURES["{kind}"]', f"{seconds:g} s")
            for kind, seconds in accelerator.ACCELERATOR_FIGURES.items()
        ],
        ("shared.kvcache_model.MODELS", f"{kvcache_model.bytes_per_token(*kvcache_model.MODELS['llama3.1-8b']):,} B"),
        ("shared.kvcache_model.MODELS", f"{kvcache_model.bytes_per_token(*kvcache_model.MODELS['llama3.1-70b']):,} B"),
        ("shared.kvcache_model.TEMPLATES", "4,096–25,000"),
        ("kinds.kvcache.workload.LATENCY_BOUND", f"{kvcache.LATENCY_BOUND * 1000:g} ms"),
        ("host.kvcache_sim.DECODE_BATCH", f"once per {kvcache_sim.DECODE_BATCH} generated tokens"),
        ("workloads.kvcache_rules.SEED", f"seed {kvcache_rules.SEED}, {kvcache_rules.TRIALS} trials"),
    ],
)
def test_reference_figures_state_what_the_code_uses(constant, stated):
    assert stated in figure_row(constant)
