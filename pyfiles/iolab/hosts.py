"""Inventories and host patterns.

iolab expands host patterns itself, because Ansible's ``--limit`` reads
``gpu[01:04]`` as positions in a group, not as host names:

>>> expand_names("gpu[01-03]")
['gpu01', 'gpu02', 'gpu03']

A pattern is a comma- or colon-separated list of terms; each term is a host,
a group, a range (``gpu[01-04]`` or ``gpu[01:04]``) or a wildcard (``gpu*``).
``:!term`` excludes, ``:&term`` intersects, as in Ansible.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from pathlib import Path

from iolab.errors import UserError

_RANGE = re.compile(r"\[([0-9]+|[a-z])[-:]([0-9]+|[a-z])\]")


@dataclasses.dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: tuple[str, ...]                      # in inventory order
    groups: dict[str, tuple[str, ...]]
    hostvars: dict[str, dict]

    def describe(self) -> str:
        groups = sorted(g for g in self.groups if g not in ("all", "ungrouped") and self.groups[g])
        text = f"hosts {compress(self.hosts) or '(none)'}"
        return text + (f"; groups {', '.join(groups)}" if groups else "")


def load_inventory(path: str | Path) -> Inventory:
    """Read any inventory Ansible reads (YAML, INI, with its own ranges)."""
    path = Path(path)
    if not path.exists():
        hint = " (create it with `invoke lab.sim-up`)" if path.name == "sim.yml" else ""
        raise UserError(f"inventory file {path} does not exist{hint}; pass --inventory with an existing file")
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(path)])
    hosts = tuple(h.name for h in manager.get_hosts())
    if not hosts:
        raise UserError(f"inventory {path} has no hosts (or Ansible could not parse it); "
                        f"check it with `ansible-inventory -i {path} --list`")
    variables = VariableManager(loader=loader, inventory=manager)
    groups = {name: tuple(h.name for h in group.get_hosts()) for name, group in manager.groups.items()}
    hostvars = {h.name: variables.get_vars(host=h, include_hostvars=False) for h in manager.get_hosts()}
    return Inventory(path=path, hosts=hosts, groups=groups, hostvars=hostvars)


def expand_names(term: str) -> list[str]:
    """Expand every ``[a-b]`` range of a term (zero padding kept from the first bound)."""
    match = _RANGE.search(term)
    if not match:
        return [term]
    start, end = match.group(1), match.group(2)
    head, tail = term[: match.start()], term[match.end():]
    if start.isdigit() != end.isdigit():
        raise UserError(f"host range [{start}-{end}] mixes digits and letters; write gpu[01-04]")
    if start.isdigit():
        width = len(start) if start.startswith("0") else 1
        values = [str(i).zfill(width) for i in range(int(start), int(end) + 1)]
    else:
        values = [chr(c) for c in range(ord(start), ord(end) + 1)]
    if not values:
        raise UserError(f"host range [{start}-{end}] is empty; the first bound must not exceed the last")
    return [name for v in values for name in expand_names(head + v + tail)]


def _split_terms(pattern: str) -> list[tuple[str, str]]:
    """'a,b:!c:&d' → [('+','a'), ('+','b'), ('!','c'), ('&','d')]; ':' inside [] is a range."""
    terms, depth, current = [], 0, ""
    for char in pattern + ",":
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char in ",:" and depth == 0:
            if current.strip():
                terms.append(current.strip())
            current = ""
        else:
            current += char
    return [(t[0], t[1:]) if t[0] in "!&" else ("+", t) for t in terms]


def _match_term(term: str, inventory: Inventory, pattern: str) -> list[str]:
    selected: list[str] = []
    for name in expand_names(term):
        if name in inventory.groups:
            selected += inventory.groups[name]
        elif name in inventory.hosts:
            selected.append(name)
        elif any(c in name for c in "*?"):
            found = [h for h in inventory.hosts if fnmatch.fnmatchcase(h, name)]
            found += [h for g, hs in inventory.groups.items() if fnmatch.fnmatchcase(g, name) for h in hs]
            if not found:
                raise UserError(f"host pattern {pattern!r}: {name!r} matches no host of "
                                f"{inventory.path} ({inventory.describe()})")
            selected += found
        else:
            raise UserError(f"host pattern {pattern!r}: {name!r} is not a host or group of "
                            f"{inventory.path} ({inventory.describe()})")
    return selected


def select_hosts(pattern: str | None, inventory: Inventory) -> list[str]:
    """The inventory's hosts that `pattern` names, in inventory order (all when None)."""
    if not pattern or pattern.strip() in ("all", "*"):
        return list(inventory.hosts)
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
    """['gpu01','gpu02','gpu03','ceph1'] → 'gpu[01-03], ceph1' (for messages and tables)."""
    parts: list[str] = []
    run: list[tuple[str, str]] = []

    def flush() -> None:
        if len(run) > 2:
            parts.append(f"{run[0][0]}[{run[0][1]}-{run[-1][1]}]")
        else:
            parts.extend(p + n for p, n in run)
        run.clear()

    for host in hosts:
        match = re.fullmatch(r"(.*?)([0-9]+)", host)
        if match and run and match.group(1) == run[-1][0] and len(match.group(2)) == len(run[-1][1]) \
                and int(match.group(2)) == int(run[-1][1]) + 1:
            run.append((match.group(1), match.group(2)))
            continue
        flush()
        if match:
            run.append((match.group(1), match.group(2)))
        else:
            parts.append(host)
    flush()
    return ", ".join(parts)
