import re
from pathlib import Path

import pytest

from iolab.campaign.hosts import compress, expand_names, load_inventory, select_hosts
from iolab.errors import UserError

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


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("gpu[01-04]", ["gpu01", "gpu02", "gpu03", "gpu04"]),
        ("gpu01,gpu03", ["gpu01", "gpu03"]),
        ("gpu[01-04]:!gpu02", ["gpu01", "gpu03", "gpu04"]),
        ("gpu[01:04]:!gpu02", ["gpu01", "gpu03", "gpu04"]),  # Ansible's own range syntax, as names
        ("gpu:&gpu0[1-2]", ["gpu01", "gpu02"]),
        ("gpu*", ["gpu01", "gpu02", "gpu03", "gpu04"]),
        ("storage", ["ceph01"]),
        ("gpu03,gpu01", ["gpu01", "gpu03"]),  # inventory order, not pattern order
        (None, ["gpu01", "gpu02", "gpu03", "gpu04", "ceph01"]),
        ("all", ["gpu01", "gpu02", "gpu03", "gpu04", "ceph01"]),
    ],
)
def test_patterns_select_inventory_hosts(inventory, pattern, expected):
    assert select_hosts(pattern, inventory) == expected


@pytest.mark.parametrize(
    "pattern, says",
    [
        ("gpu05", "gpu05 is not a host or group"),
        ("gpu[01-08]", "gpu[05-08] are not hosts or groups"),  # never silently fewer hosts than asked
        ("@nope", "'@nope' is not a group"),
        ("nope*", "matches no host"),
        ("gpu[01-04]:!gpu[01-04]", "selects no host"),
    ],
)
def test_a_pattern_that_matches_nothing_lists_the_inventory(inventory, pattern, says):
    with pytest.raises(UserError) as err:
        select_hosts(pattern, inventory)
    assert says in str(err.value)
    assert "hosts ceph01,gpu[01-04]; groups gpu, storage" in str(err.value)


def test_node_sets_as_clusters_write_them():
    assert expand_names("gpu[8-11]") == ["gpu8", "gpu9", "gpu10", "gpu11"]
    assert expand_names("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]
    assert expand_names("gpu[01-03,05]") == ["gpu01", "gpu02", "gpu03", "gpu05"]
    assert expand_names("rack[1-2]-gpu[01-08]")[7:9] == ["rack1-gpu08", "rack2-gpu01"]
    assert len(expand_names("gpu[01-64]")) == 64


@pytest.mark.parametrize(
    "term, says",
    [
        ("gpu[04-01]", "empty"),
        ("gpu[a-c]", "is not a range"),
        ("gpu[01-0x]", "is not a range"),
        ("gpu[01-04", "unbalanced brackets"),
    ],
)
def test_a_malformed_host_set_is_one_line(inventory, term, says):
    with pytest.raises(UserError, match=re.escape(says)):
        select_hosts(term, inventory)


def test_a_huge_host_set_is_refused_before_it_is_expanded(inventory):
    """gpu[0-99999999] took 14 GB and 77 s; it is counted from its ranges, never expanded."""
    import resource
    import time

    before, started = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.monotonic()
    with pytest.raises(UserError, match="names 100,000,000 hosts, more than the 65,536"):
        select_hosts("gpu[0-99999999]", inventory)
    assert time.monotonic() - started < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: under 100 MB


@pytest.mark.parametrize("pattern", ["", "  "])
def test_an_empty_pattern_is_an_error_not_every_host(inventory, pattern):
    with pytest.raises(UserError, match="--hosts is empty"):
        select_hosts(pattern, inventory)


def test_groups_with_at(inventory):
    assert select_hosts("@storage,gpu01", inventory) == ["gpu01", "ceph01"]
    assert select_hosts("@gpu:!gpu[01-02]", inventory) == ["gpu03", "gpu04"]


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("gpu[01-04]!@gpu,ceph01", ["ceph01"]),
        ("gpu[01-04]^@storage", ["gpu01", "gpu02", "gpu03", "gpu04", "ceph01"]),
        ("gpu[01-04]&@gpu!gpu02", ["gpu01", "gpu03", "gpu04"]),
    ],
)
def test_groups_inside_a_node_set_are_the_inventorys(inventory, pattern, expected):
    """gpu[01-05]!@gpu selected all five: @gpu resolved through ClusterShell's own (empty) group sources."""
    assert select_hosts(pattern, inventory) == expected


@pytest.mark.parametrize("pattern", ["gpu[01-04]!@gpus", "gpu[01-04]^@nope"])
def test_an_unknown_group_inside_a_node_set_is_refused(inventory, pattern):
    group = pattern.split("@")[1]
    with pytest.raises(UserError, match=re.escape(f"'@{group}' is not a group of")) as err:
        select_hosts(pattern, inventory)
    assert "groups gpu, storage" in str(err.value)


def test_compress_for_messages():
    assert compress(["gpu01", "gpu02", "gpu03", "ceph1", "gpu05"]) == "ceph1,gpu[01-03,05]"


def test_an_inventory_that_is_no_inventory_is_refused_before_ansible_reads_it(tmp_path):
    """--inventory /tmp parsed every file under /tmp (6 GB, > 300 s)."""
    for i in range(1001):
        (tmp_path / f"f{i}").write_text("")
    with pytest.raises(UserError, match="directory of more than 1000 files"):
        load_inventory(tmp_path)
    with pytest.raises(UserError, match="is not a file or directory"):
        load_inventory("/dev/zero")


def test_missing_inventory_says_which_file(tmp_path):
    with pytest.raises(UserError, match="inventory file .*nope.yml does not exist"):
        load_inventory(tmp_path / "nope.yml")


def test_default_inventory_is_localhost():
    inv = load_inventory(Path(__file__).parents[2] / "inventory" / "local.yml")
    assert inv.hosts == ("localhost",)
    assert inv.hostvars["localhost"]["ansible_connection"] == "local"
