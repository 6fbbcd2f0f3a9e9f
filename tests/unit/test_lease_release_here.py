"""The lease says whether a host has the controller's release unpacked, and lab.setup then skips its own look for it
(issue 42: one Ansible task less in every command on a host set up)."""

from __future__ import annotations

import pytest

from iolab.drive import lease, runner
from iolab.run import cli as cli_mod
from support import ROOT

HOST = "localhost"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "LEASE_DIR", str(tmp_path / "leases"))  # its host directory: tmp_path
    return cli_mod.lab(str(ROOT / "inventory" / "local.yml"), HOST)


def test_the_lease_finds_the_release_only_where_it_is_unpacked(lab, tmp_path):
    release = lab.extravars()["iolab_release"]
    with lease.held(lab, "campaign first"):
        assert lab.released == set()
        assert lab.extravars()["iolab_host_release_here"] == []
    (tmp_path / "releases" / release / "iolab").mkdir(parents=True)  # a directory without the package: not there
    with lease.held(lab, "campaign second"):
        assert lab.released == set()
    (tmp_path / "releases" / release / "iolab" / "__init__.py").write_text("")
    with lease.held(lab, "campaign third"):
        assert lab.released == {HOST}
        assert lab.extravars()["iolab_host_release_here"] == [HOST]


def test_setup_skips_its_look_for_the_release_on_a_host_the_lease_found_it_on(lab):
    """Both plays run the role on this machine, set up with this release (the hosts of a command are set up)."""

    def setup(released: set[str]) -> runner.Result:
        lab.released = released
        result = lab.play(runner.Phase("setup.yml"), "lab.setup")
        assert result.status == "successful" and not result.failures(), result.summary()
        return result

    first = setup(set())  # provisions where needed, then looks
    looked = setup(set())
    skipped = setup({HOST})
    assert first.status == "successful"
    assert skipped.hosts[HOST].ok == looked.hosts[HOST].ok - 1  # the stat: its only task that ran, and ended ok
