"""What lab.services-up says when it cannot go on (issue 44, 7): the command that fixes it, by name.

The Ceph role's preflight refuses a bind address other than the one the cluster was bootstrapped with (the
monitor's address is in its store); its message is what `./lab lab.services-up` prints, so it names the iolab
command that deletes the cluster, not only the playbook's variable.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "service_ceph" / "tasks" / "preflight.yml"


def test_another_bind_address_names_the_command_that_deletes_the_cluster():
    tasks = yaml.safe_load(ROLE.read_text())
    (check,) = [t for t in tasks if t.get("name", "").startswith("Check that the monitor address is the one")]
    said = " ".join(check["ansible.builtin.assert"]["fail_msg"].split())
    assert "`./lab lab.services-down --destroy`" in said and "--vars-file" in said
    assert "services_state=absent -e services_confirm_destroy=true" in said  # the playbook's own, for Ansible users
    assert "lab.services-up --bind" in said  # or keep the cluster: start it at its address
