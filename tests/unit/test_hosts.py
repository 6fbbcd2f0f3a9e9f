from pathlib import Path

import pytest

from iolab.errors import UserError
from iolab.hosts import compress, expand_names, load_inventory, select_hosts

INVENTORY = """
all:
  children:
    gpu:
      hosts:
        gpu[01:04]:
    storage:
      hosts:
        ceph01:
"""


@pytest.fixture
def inventory(tmp_path: Path):
    path = tmp_path / "lab.yml"
    path.write_text(INVENTORY)
    return load_inventory(path)


@pytest.mark.parametrize("pattern, expected", [
    ("gpu[01-04]", ["gpu01", "gpu02", "gpu03", "gpu04"]),
    ("gpu01,gpu03", ["gpu01", "gpu03"]),
    ("gpu[01-04]:!gpu02", ["gpu01", "gpu03", "gpu04"]),
    ("gpu[01:04]:!gpu02", ["gpu01", "gpu03", "gpu04"]),   # Ansible's own range syntax, as names
    ("gpu:&gpu0[1-2]", ["gpu01", "gpu02"]),
    ("gpu*", ["gpu01", "gpu02", "gpu03", "gpu04"]),
    ("storage", ["ceph01"]),
    ("gpu03,gpu01", ["gpu01", "gpu03"]),                  # inventory order, not pattern order
    (None, ["gpu01", "gpu02", "gpu03", "gpu04", "ceph01"]),
    ("all", ["gpu01", "gpu02", "gpu03", "gpu04", "ceph01"]),
])
def test_patterns_select_inventory_hosts(inventory, pattern, expected):
    assert select_hosts(pattern, inventory) == expected


@pytest.mark.parametrize("pattern, says", [
    ("gpu05", "'gpu05' is not a host or group"),
    ("gpu[01-08]", "'gpu05' is not a host or group"),        # never silently fewer hosts than asked
    ("nope*", "matches no host"),
    ("gpu[01-04]:!gpu[01-04]", "selects no host"),
])
def test_a_pattern_that_matches_nothing_lists_the_inventory(inventory, pattern, says):
    with pytest.raises(UserError) as err:
        select_hosts(pattern, inventory)
    assert says in str(err.value)
    assert "hosts gpu[01-04], ceph01; groups gpu, storage" in str(err.value)


def test_ranges_keep_zero_padding_and_nest():
    assert expand_names("gpu[8-11]") == ["gpu8", "gpu9", "gpu10", "gpu11"]
    assert expand_names("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]
    assert expand_names("rack[a-c]") == ["racka", "rackb", "rackc"]
    with pytest.raises(UserError, match="empty"):
        expand_names("gpu[04-01]")


def test_compress_for_messages():
    assert compress(["gpu01", "gpu02", "gpu03", "ceph1", "gpu05"]) == "gpu[01-03], ceph1, gpu05"


def test_missing_inventory_says_which_file(tmp_path):
    with pytest.raises(UserError, match="inventory file .*nope.yml does not exist"):
        load_inventory(tmp_path / "nope.yml")


def test_default_inventory_is_localhost():
    inv = load_inventory(Path(__file__).parents[2] / "inventory" / "local.yml")
    assert inv.hosts == ("localhost",)
    assert inv.hostvars["localhost"]["ansible_connection"] == "local"
