"""A plain YAML inventory read without Ansible's parser: importing it and parsing one file costs ≈ 0.5 s of every
command (docs/PERFORMANCE.md), for what is most labs' inventory — groups, children, hosts and variables in one file.

    read(path) → (hosts, groups, hostvars) as Ansible's InventoryManager and VariableManager give them, or None: then
                 Ansible reads it (iolab.campaign.hosts.load_inventory)

Plain means: a .yml/.yaml file of groups whose keys are only `vars`, `children` and `hosts`, plain YAML (no tag:
no !vault, no !unsafe; within iolab.yamlfile's bounds, no key given twice), host patterns that are names or names
with numeric ranges (`gpu[01:04]`), no `plugin:` (an inventory plugin's configuration), no group_vars/ or
host_vars/ beside it or in the working directory, and Ansible's default `hash_behaviour` (replace). Anything else
is Ansible's to read, as before.

Ansible's rules, kept here: every group without a parent is a child of `all`; a host in no group but `all` is in
`ungrouped`; a host's variables are its groups' (each ancestor's too), the shallowest group first, then by
`ansible_group_priority` (default 1), then by name, each replacing what came before, and its own last. The hosts'
order is Ansible's: each group's own hosts, `all`'s first, then its children's in the order written, level by level
(where a level holds several groups that children of different parents reach, Ansible's own order comes from a set
and may differ between two of its runs; here it is the order written). Ansible's magic variables (inventory_dir,
group_names, ...) are not made: iolab reads none of them.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import yaml

from iolab.errors import UserError
from iolab.yamlfile import BoundedLoader

SECTIONS = ("vars", "children", "hosts")
_NAME = r"[A-Za-z0-9_.-]+"
_PATTERN = re.compile(rf"(?:{_NAME}|\[[0-9]+:[0-9]+\])+")
_RANGE = re.compile(r"\[([0-9]+):([0-9]+)\]")


class _NotPlain(Exception):
    """Something only Ansible's parser reads as Ansible means it."""


class _Strict(BoundedLoader):
    """YAML without tags (a !vault value is Ansible's to decrypt), within iolab's bounds (size with aliases expanded,
    nesting, no key given twice: Ansible warns of one and keeps the last, and is left to do so)."""


def _no_tag(loader: yaml.Loader, suffix: str, node: yaml.Node) -> Any:
    raise _NotPlain(f"tag {node.tag}")


_Strict.add_multi_constructor("!", _no_tag)


@dataclasses.dataclass
class _Group:
    hosts: list[str] = dataclasses.field(default_factory=list)
    children: list[str] = dataclasses.field(default_factory=list)
    parents: list[str] = dataclasses.field(default_factory=list)
    vars: dict[str, Any] = dataclasses.field(default_factory=dict)
    depth: int = 0
    priority: int = 1  # ansible_group_priority, which Ansible keeps out of the group's variables


class _Inventory:
    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {"all": _Group(), "ungrouped": _Group()}
        self.hosts: dict[str, dict[str, Any]] = {}  # in the order first met: each host's own variables
        self.member: dict[str, list[str]] = {}  # host → the groups it was put in
        self.child("all", "ungrouped")

    def group(self, name: str, data: Any) -> None:
        self.groups.setdefault(name, _Group())
        if data is None:
            return
        if not isinstance(data, dict):
            raise _NotPlain(f"group {name}")
        for key, value in data.items():
            if key not in SECTIONS:
                raise _NotPlain(f"key {key}")
            if isinstance(value, str):
                value = {value: None}
            if not isinstance(value, dict | None):
                raise _NotPlain(f"{key} of {name}")
            for item, inner in (value or {}).items():
                if key == "vars" and item == "ansible_group_priority":
                    self.groups[name].priority = _priority(inner)
                elif key == "vars":
                    self.groups[name].vars[item] = inner
                elif key == "children":
                    self.group(str(item), inner)
                    self.child(name, str(item))
                else:
                    for host in _expand(str(item)):
                        self.host(host, name, inner)

    def child(self, parent: str, name: str) -> None:
        if name == parent or parent in self.descendants(name):
            raise _NotPlain("a loop of groups")  # (Ansible's own error says it)
        if name not in self.groups[parent].children:
            self.groups[parent].children.append(name)
            self.groups[name].parents.append(parent)
            self._deepen(name, self.groups[parent].depth + 1)

    def _deepen(self, name: str, depth: int) -> None:
        group = self.groups[name]
        if depth > group.depth:
            group.depth = depth
            for child in group.children:
                self._deepen(child, depth + 1)

    def host(self, host: str, group: str, variables: Any) -> None:
        if variables is not None and not isinstance(variables, dict):
            raise _NotPlain(f"host {host}")
        self.hosts.setdefault(host, {}).update(variables or {})
        if host not in self.groups[group].hosts:
            self.groups[group].hosts.append(host)
            self.member.setdefault(host, []).append(group)

    def descendants(self, name: str) -> list[str]:
        """`name` and the groups under it, level by level in the order written."""
        return self._walk(name, "children")

    def _walk(self, name: str, relation: str) -> list[str]:
        """`name` and the groups its `relation` (children, parents) reaches, level by level in the order written."""
        ordered, level = [name], [name]
        while level:
            level = list(dict.fromkeys(r for g in level for r in getattr(self.groups[g], relation) if r not in ordered))
            ordered += level
        return ordered

    def reconcile(self) -> None:
        for name, group in self.groups.items():
            if name != "all" and not group.parents:
                self.child("all", name)
        for host in self.hosts:
            mine = set(self.member.get(host, []))
            if mine <= {"all"}:
                self.host(host, "ungrouped", None)
            elif "ungrouped" in mine and mine - {"all", "ungrouped"}:  # (and so not ungrouped's variables)
                self.groups["ungrouped"].hosts.remove(host)
                self.member[host].remove("ungrouped")

    def members(self, name: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(h for g in self.descendants(name) for h in self.groups[g].hosts))

    def variables(self, host: str) -> dict[str, Any]:
        names = {a for g in self.member.get(host, []) for a in self._walk(g, "parents")} | {"all"}
        groups = sorted(names, key=lambda g: (self.groups[g].depth, self.groups[g].priority, g))
        merged: dict[str, Any] = {}
        for name in groups:
            merged.update(self.groups[name].vars)
        return {**merged, **self.hosts[host]}


def _priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().lstrip("-").isdigit():
        raise _NotPlain("ansible_group_priority")  # (Ansible's int() error)
    return int(value)


def _expand(pattern: str) -> list[str]:
    """A host pattern's names: `gpu[01:04]` → gpu01 … gpu04 (a bound written with a leading zero sets the width)."""
    if not _PATTERN.fullmatch(pattern):
        raise _NotPlain(f"host pattern {pattern}")
    names = [""]
    for piece in re.split(r"(\[[0-9]+:[0-9]+\])", pattern):
        bounds = _RANGE.fullmatch(piece)
        if not bounds:
            names = [n + piece for n in names]
            continue
        first, last = bounds.groups()
        width = len(first) if first.startswith("0") and len(first) > 1 else 0
        if (width and len(last) != width) or int(last) < int(first):
            raise _NotPlain(f"host range {piece}")
        names = [n + str(i).zfill(width) for n in names for i in range(int(first), int(last) + 1)]
    return names


def read(path: Path) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]], dict[str, dict[str, Any]]] | None:
    """(hosts, groups, hostvars) of a plain YAML inventory, as Ansible reads them; None where it is not plain."""
    if path.suffix not in (".yml", ".yaml") or not path.is_file() or os.environ.get("ANSIBLE_HASH_BEHAVIOUR"):
        return None
    if any((d / v).exists() for d in (path.parent, Path.cwd()) for v in ("group_vars", "host_vars")):
        return None
    inventory = _Inventory()
    try:
        loader = _Strict(path.read_text(), str(path))
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
        if not isinstance(data, dict) or "plugin" in data:
            return None
        for name, group in data.items():
            inventory.group(str(name), group)
        inventory.reconcile()
    except (_NotPlain, UserError, yaml.YAMLError, UnicodeDecodeError):
        return None
    hosts = inventory.members("all")
    groups = {name: inventory.members(name) for name in inventory.groups}
    return hosts, groups, {h: inventory.variables(h) for h in hosts}
