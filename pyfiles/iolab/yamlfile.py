"""The user's YAML files (campaigns, rules), read with bounds: size, aliases, nesting, duplicate keys.

A campaign file is small and written by hand. What is not (``/dev/zero``, an alias
bomb whose ten levels of ten aliases make ten billion nodes once walked, a thousand
nested ``[`` that would exhaust Python's recursion, a key given twice of which YAML
keeps the last) is refused in one line before any expensive work.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from iolab.errors import UserError

MAX_BYTES = 1 << 20  # a campaign of a thousand workloads is ~100 KiB
MAX_NODES = 100_000  # values in the document once every alias (*name) is expanded
MAX_DEPTH = 64  # nested lists and mappings; a campaign nests five or six


class BoundedLoader(yaml.SafeLoader):
    """A SafeLoader that bounds the document's size with its aliases expanded, and refuses duplicate keys."""

    def __init__(self, stream: str, source: str):
        super().__init__(stream)
        self.source = source
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """The composer recurses once per nesting level: stop it well before Python's recursion limit."""
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                line = self.peek_event().start_mark.line + 1
                raise UserError(
                    f"{self.source}: nested more than {MAX_DEPTH} levels deep at line {line}; "
                    "a campaign, rules or workload file nests a few levels"
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        sizes: dict[int, int] = {}

        def size(item: yaml.Node) -> int:  # shared (aliased) nodes counted once per use, computed once
            if id(item) not in sizes:
                sizes[id(item)] = 0  # a recursive alias counts no further
                if isinstance(item, yaml.MappingNode):
                    children = [n for pair in item.value for n in pair]
                elif isinstance(item, yaml.SequenceNode):
                    children = item.value
                else:
                    children = []
                total = 1
                for child in children:
                    total += size(child)
                    if total > MAX_NODES:
                        break
                sizes[id(item)] = total
            return sizes[id(item)]

        if node is not None and size(node) > MAX_NODES:
            raise UserError(
                f"{self.source}: more than {MAX_NODES:,} values once its aliases (*name) are "
                "expanded; write a smaller file (a list value sweeps without copies)"
            )
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise UserError(
                    f"{self.source}: key {key!r} is given twice in one mapping (lines {seen[key]} and "
                    f"{key_node.start_mark.line + 1}); keep one"
                )
            if isinstance(key, (str, int, float, bool)):
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def read_text(path: Path, what: str, flag: str, max_bytes: int = MAX_BYTES, kind: str = "a YAML file") -> str:
    """A regular file's text, refused without reading it whole when it is not one or is over `max_bytes`; `kind`:
    what the refusal asks for instead."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist; pass {flag} with an existing file") from None
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror}; pass {flag} with a readable file") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(f"{what} {path} is not a regular file; pass {flag} with {kind}")
        data = os.read(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UserError(
            f"{what} {path} is larger than {max_bytes >> 10} KiB, the most a {what} may be; "
            "check that it is the right file"
        )
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise UserError(f"cannot read {what} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def load(path: str | Path, what: str, flag: str) -> Any:
    """Parse a user's YAML file with the bounds above; every error is one line naming the file."""
    path = Path(path)
    loader = BoundedLoader(read_text(path, what, flag), str(path))
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    finally:
        loader.dispose()
