"""iolab.campaign.plain_inventory against Ansible's own parser (iolab.campaign.hosts.ansible_inventory) on the same
files: the project's inventories, a simulated lab's, and one that uses every rule the reader keeps; and the files it
leaves to Ansible."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from iolab.campaign import hosts, plain_inventory
from iolab.sim import sshd
from iolab.sim.lab import SimHost

ROOT = Path(__file__).resolve().parents[2]
# Ansible's magic variables, which the reader does not make (iolab reads none of them)
MAGIC = {
    "inventory_file",
    "inventory_dir",
    "inventory_hostname",
    "inventory_hostname_short",
    "group_names",
    "groups",
    "ansible_facts",
    "playbook_dir",
    "ansible_playbook_python",
    "ansible_config_file",
    "ansible_version",
    "omit",
}

EVERY_RULE = """
all:
  vars:
    site: lab1
    role: any
    nested: {a: 1, b: 2}
  hosts:
    solo:                       # under all only: ungrouped
      role: solo
  children:
    gpu:
      vars:
        role: gpu
        ansible_group_priority: 5
      children:
        rack1:
          hosts:
            gpu[01:03]:
          vars: {role: rack1, rackvar: 1}
        rack2:
          hosts:
            gpu[9:11]:
              ansible_host: 10.0.0.9
    storage:
      hosts:
        ceph[1:2]:
        gpu02:                  # in rack1 (depth 2) and storage (depth 1): rack1's win
          extra: yes
      vars:
        role: storage
        nested: {c: 3}
    empty:
    ungrouped:                  # gpu03 is in rack1 too: Ansible takes it out of ungrouped, and its variables
      hosts:
        gpu03:
      vars: {only_ungrouped: 1}
"""


def user_vars(inventory: hosts.Inventory) -> dict:
    return {h: {k: v for k, v in vs.items() if k not in MAGIC} for h, vs in inventory.hostvars.items()}


def both(path: Path) -> tuple[hosts.Inventory, hosts.Inventory]:
    found = plain_inventory.read(path)
    assert found is not None, f"{path} is plain"
    return hosts.Inventory(path, *found), hosts.ansible_inventory(path)


@pytest.mark.parametrize("name", ["local.yml", "example.yml"])
def test_the_projects_inventories_read_as_ansible_reads_them(name):
    mine, ansible = both(ROOT / "inventory" / name)
    assert mine.hosts == ansible.hosts
    assert mine.groups == ansible.groups
    assert user_vars(mine) == user_vars(ansible)


def test_a_simulated_labs_inventory_reads_as_ansible_reads_it(tmp_path):
    lab = [SimHost(f"gpu0{i}", f"10.77.0.{i}", f"ns{i}", f"v{i}") for i in (1, 2, 3)]
    sshd.write_inventory(tmp_path / "sim.yml", lab, tmp_path)
    mine, ansible = both(tmp_path / "sim.yml")
    assert (mine.hosts, mine.groups, user_vars(mine)) == (ansible.hosts, ansible.groups, user_vars(ansible))


def test_every_rule_the_reader_keeps_gives_ansibles_answer(tmp_path):
    path = tmp_path / "lab.yml"
    path.write_text(EVERY_RULE)
    mine, ansible = both(path)
    assert mine.hosts == ansible.hosts
    assert {g: set(h) for g, h in mine.groups.items()} == {g: set(h) for g, h in ansible.groups.items()}
    assert user_vars(mine) == user_vars(ansible)
    assert mine.groups["ungrouped"] == ("solo",) and len(mine.hosts) == 9
    assert mine.hostvars["gpu10"]["role"] == "gpu"  # its group gpu over all (shallower), rack2 has none
    assert mine.hostvars["gpu02"]["role"] == "rack1"  # the deeper of its groups
    assert mine.hostvars["ceph1"]["nested"] == {"c": 3}  # replaced, not merged


@pytest.mark.parametrize(
    "text",
    [
        "all:\n  hosts:\n    h1:\n      secret: !vault |\n        $ANSIBLE_VAULT;1.1;AES256\n        6162\n",
        "plugin: constructed\n",
        "all:\n  hosts:\n    node[a:c]:\n",
        "all:\n  hosts:\n    h1:2222:\n",
        "all:\n  hosts:\n    h1:\n  port: 22\n",
        "[gpu]\nh1\n",
        "all:\n  children:\n    fast: gpu01\n",
        "all:\n  hosts:\n    h1:\n      a: 1\n    h1:\n      a: 2\n",
    ],
    ids=["vault", "plugin", "alpha-range", "port", "other-key", "ini", "group-as-a-string", "a-key-twice"],
)
def test_what_only_ansible_reads_is_left_to_it(tmp_path, text):
    path = tmp_path / "lab.yml"
    path.write_text(textwrap.dedent(text))
    assert plain_inventory.read(path) is None


def test_vars_directories_beside_it_leave_it_to_ansible(tmp_path):
    path = tmp_path / "lab.yml"
    path.write_text("all:\n  hosts:\n    h1:\n")
    assert plain_inventory.read(path) is not None
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("x: 1\n")
    assert plain_inventory.read(path) is None
    assert hosts.load_inventory(path).hostvars["h1"]["x"] == 1  # Ansible's, which reads the directory
