"""Inventories and host sets.

Host sets are written as clusters write them (ClusterShell's node sets, as SLURM users
know them), and checked against the inventory:

>>> expand_names("gpu[01-03,05]")
['gpu01', 'gpu02', 'gpu03', 'gpu05']

A pattern is a comma- or colon-separated list of terms; each term is a host, a group
(``storage`` or ``@storage``), a node set (``gpu[01-04]``, ``rack[1-2]-gpu[01-08]``,
Ansible's ``gpu[01:04]``) or a wildcard (``gpu*``). ``:!term`` excludes, ``:&term``
intersects, as in Ansible. iolab expands them itself because Ansible's ``--limit``
reads ``gpu[01:04]`` as positions in a group, not as host names. Inside a node set,
ClusterShell's own operators work too (``gpu[01-05]!@gpu``): its ``@group`` is the
inventory's group, never ClusterShell's group sources (an unknown one is refused).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from pathlib import Path

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetParseError
from ClusterShell.NodeUtils import GroupResolver, GroupResolverError, GroupSource

from iolab.campaign import plain_inventory
from iolab.errors import UserError

# A host set larger than this is a typo (gpu[0-99999999]), refused before it is expanded.
MAX_HOSTS = 65536
# An inventory is read by Ansible; a larger one is refused before Ansible parses it.
MAX_INVENTORY_BYTES = 16 << 20
MAX_INVENTORY_FILES = 1000
_BRACKET = re.compile(r"\[([^\]]*)\]")
_RANGE = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+))?\s*(?:/\s*([0-9]+))?\s*")


@dataclasses.dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: tuple[str, ...]  # in inventory order
    groups: dict[str, tuple[str, ...]]
    hostvars: dict[str, dict]

    def describe(self) -> str:
        groups = sorted(g for g in self.groups if g not in ("all", "ungrouped") and self.groups[g])
        text = f"hosts {compress(self.hosts) or '(none)'}"
        return text + (f"; groups {', '.join(groups)}" if groups else "")


class _InventoryGroups(GroupSource):
    """The inventory's groups as ClusterShell's one group source: ``@gpu`` in a node set is the inventory's group
    gpu. ClusterShell's own sources (groups.conf) know none of them and would resolve every one to no host."""

    def __init__(self, inventory: Inventory, pattern: str):
        super().__init__("inventory", allgroups=",".join(inventory.hosts))
        self.inventory = inventory
        self.pattern = pattern

    def resolv_map(self, group: str) -> str:
        if group not in self.inventory.groups:
            raise UserError(
                f"host pattern {self.pattern!r}: '@{group}' is not a group of {self.inventory.path} "
                f"({self.inventory.describe()})"
            )
        return ",".join(self.inventory.groups[group])

    def resolv_list(self) -> list[str]:
        raise UserError(f"host pattern {self.pattern!r}: '@@' names groups, not hosts; write @group")


def _check_inventory_size(path: Path) -> None:
    """Refuse an inventory too large to be one (a directory such as /tmp, a device) before Ansible reads it."""
    if path.is_dir():
        files = 0
        total = 0
        for item in path.rglob("*"):
            files += 1
            if files > MAX_INVENTORY_FILES:
                raise UserError(
                    f"inventory {path} is a directory of more than {MAX_INVENTORY_FILES} files; "
                    "pass --inventory with an inventory file (or a directory of a few)"
                )
            if item.is_file():
                total += item.stat().st_size
        size = total
    elif path.is_file():
        size = path.stat().st_size
    else:
        raise UserError(f"inventory {path} is not a file or directory; pass --inventory with an inventory file")
    if size > MAX_INVENTORY_BYTES:
        raise UserError(
            f"inventory {path} holds {size / (1 << 20):.0f} MiB, more than the "
            f"{MAX_INVENTORY_BYTES >> 20} MiB an inventory may have; pass --inventory with an inventory file"
        )


def load_inventory(path: str | Path) -> Inventory:
    """Read any inventory Ansible reads (YAML, INI, with its own ranges): a plain YAML one without Ansible's parser
    (iolab.campaign.plain_inventory, the same hosts, groups and variables), any other with it."""
    path = Path(path)
    if not path.exists():
        hint = " (create it with `invoke lab.sim-up`)" if path.name == "sim.yml" else ""
        raise UserError(f"inventory file {path} does not exist{hint}; pass --inventory with an existing file")
    _check_inventory_size(path)
    plain = plain_inventory.read(path)
    if plain is not None and plain[0]:
        return Inventory(path, *plain)
    return ansible_inventory(path)


def ansible_inventory(path: Path) -> Inventory:
    """The inventory as Ansible's own parser reads it (with Ansible's magic variables in hostvars)."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(path)])
    hosts = tuple(h.name for h in manager.get_hosts())
    if not hosts:
        raise UserError(
            f"inventory {path} has no hosts (or Ansible could not parse it); "
            f"check it with `ansible-inventory -i {path} --list`"
        )
    variables = VariableManager(loader=loader, inventory=manager)
    groups = {name: tuple(h.name for h in group.get_hosts()) for name, group in manager.groups.items()}
    hostvars = {h.name: variables.get_vars(host=h, include_hostvars=False) for h in manager.get_hosts()}
    return Inventory(path=path, hosts=hosts, groups=groups, hostvars=hostvars)


def _count(term: str) -> int:
    """How many names a node set term expands to, computed from its ranges without expanding them."""
    total = 1
    for group in _BRACKET.findall(term):
        count = 0
        for part in group.split(","):
            match = _RANGE.fullmatch(part)
            if not match:
                raise UserError(f"host set {term!r}: [{group}] is not a range; write gpu[01-04] or gpu[01-03,05]")
            first, last, step = int(match[1]), int(match[2] or match[1]), int(match[3] or 1)
            if last < first or step < 1:
                raise UserError(
                    f"host set {term!r}: range [{part.strip()}] is empty; the first bound must not exceed the last"
                )
            count += (last - first) // step + 1
        total *= count
    return total


def expand_names(term: str, groups: GroupResolver | int = RESOLVER_NOGROUP) -> list[str]:
    """The host names of a node set term: ``gpu[01-03,05]``, ``rack[1-2]-gpu[01-08]``, ``gpu[01:04]``;
    `groups` resolves its ``@group`` (none by default: ``@x`` is then a name)."""
    term = _BRACKET.sub(lambda m: "[" + m.group(1).replace(":", "-") + "]", term)  # Ansible's a:b ranges
    if "[" not in term:
        return [term]
    count = _count(term)
    if count > MAX_HOSTS:
        raise UserError(
            f"host set {term!r} names {count:,} hosts, more than the {MAX_HOSTS:,} iolab drives; check the range"
        )
    try:
        return list(NodeSet(term, resolver=groups))
    except (NodeSetParseError, GroupResolverError) as exc:
        raise UserError(f"host set {term!r} is malformed ({exc}); write gpu[01-04] or gpu[01-03,05]") from None


def _split_terms(pattern: str) -> list[tuple[str, str]]:
    """'a,b:!c:&d' → [('+','a'), ('+','b'), ('!','c'), ('&','d')]; ',' and ':' inside [] belong to a range."""
    terms, depth, current = [], 0, ""
    for char in pattern + ",":
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if depth < 0 or depth > 1:
            raise UserError(f"host pattern {pattern!r} has unbalanced brackets; write gpu[01-04]")
        if char in ",:" and depth == 0:
            if current.strip():
                terms.append(current.strip())
            current = ""
        else:
            current += char
    if depth:
        raise UserError(f"host pattern {pattern!r} has unbalanced brackets; write gpu[01-04]")
    return [(t[0], t[1:]) if t[0] in "!&" else ("+", t) for t in terms]


def _match_term(term: str, inventory: Inventory, pattern: str) -> list[str]:
    selected: list[str] = []
    groups = GroupResolver(_InventoryGroups(inventory, pattern))
    group = term[1:] if term.startswith("@") else None
    if group is not None:
        if group not in inventory.groups:
            raise UserError(
                f"host pattern {pattern!r}: {term!r} is not a group of {inventory.path} ({inventory.describe()})"
            )
        return list(inventory.groups[group])
    for name in expand_names(term, groups):
        if name in inventory.groups:
            selected += inventory.groups[name]
        elif name in inventory.hosts:
            selected.append(name)
        elif any(c in name for c in "*?"):
            found = [h for h in inventory.hosts if fnmatch.fnmatchcase(h, name)]
            found += [h for g, hs in inventory.groups.items() if fnmatch.fnmatchcase(g, name) for h in hs]
            if not found:
                raise UserError(
                    f"host pattern {pattern!r}: {name!r} matches no host of {inventory.path} ({inventory.describe()})"
                )
            selected += found
        else:
            missing = [n for n in expand_names(term, groups) if n not in inventory.hosts and n not in inventory.groups]
            raise UserError(
                f"host pattern {pattern!r}: {compress(missing)} "
                f"{'is not a host or group' if len(missing) == 1 else 'are not hosts or groups'} of "
                f"{inventory.path} ({inventory.describe()})"
            )
    return selected


def select_hosts(pattern: str | None, inventory: Inventory) -> list[str]:
    """The inventory's hosts that `pattern` names, in inventory order (all when None)."""
    if pattern is None or pattern.strip() in ("all", "*"):
        return list(inventory.hosts)
    if not pattern.strip():
        raise UserError(
            f"--hosts is empty; name hosts (gpu[01-04], a group) or leave --hosts out for all hosts of {inventory.path}"
        )
    chosen: set[str] = set()
    terms = _split_terms(pattern)
    for op, term in sorted(terms, key=lambda t: {"+": 0, "&": 1, "!": 2}[t[0]]):
        names = set(_match_term(term, inventory, pattern))
        if op == "+":
            chosen |= names
        elif op == "&":
            chosen &= names
        else:
            chosen -= names
    if not chosen:
        raise UserError(f"host pattern {pattern!r} selects no host of {inventory.path} ({inventory.describe()})")
    return [h for h in inventory.hosts if h in chosen]


def compress(hosts: tuple[str, ...] | list[str]) -> str:
    """['gpu01','gpu02','gpu03','ceph1'] → 'ceph1,gpu[01-03]': a node set, for messages and tables."""
    return str(NodeSet.fromlist(hosts)) if hosts else ""
