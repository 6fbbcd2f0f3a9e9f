"""The lab's own services (lab in a box): a single-node Ceph cluster (with S3 through radosgw) and nfs-ganesha.

`invoke lab.services-up` / `lab.services-down` run playbooks/services.yml (roles
service_ceph and service_nfs) on the controller, or on inventory hosts, and report
what the roles publish in <dir>/client.json: what the storage backends (rbd_snapshot,
cephfs, rbd, s3, nfs) need to reach them.

    lines = up(lab, bind="10.77.0.1")        # simulated hosts reach the controller there
    lines = down(lab, destroy=True)          # stops, and deletes the cluster's data
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from iolab.drive import runner
from iolab.errors import RunFailed, UserError

if TYPE_CHECKING:
    from iolab.drive.execute import Lab

SERVICES = ("ceph", "nfs")
# The roles' defaults (roles/service_*/defaults/main.yml): where client.json is written.
DIRS = {"ceph": ("service_ceph_dir", "/var/lib/iolab/ceph"), "nfs": ("service_nfs_dir", "/var/lib/iolab/nfs")}
BINDS = {"ceph": "service_ceph_bind_address", "nfs": "service_nfs_bind_address"}


def load_vars(path: str | None) -> dict[str, Any]:
    """Role variables from a YAML (or JSON) file: service_ceph_dir, ports, sizes..."""
    if not path:
        return {}
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"--vars-file {path}: cannot read it as YAML: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and k.startswith(("service_ceph_", "service_nfs_")) for k in data
    ):
        raise UserError(
            f"--vars-file {path}: give a mapping of the roles' variables (service_ceph_*, "
            "service_nfs_*; see roles/service_*/defaults/main.yml)"
        )
    if any(mark in json.dumps(data) for mark in ("{{", "{%")):
        raise UserError(f"--vars-file {path}: template markers are not allowed; write values literally")
    return data


def _enabled(services: str) -> list[str]:
    wanted = [s.strip() for s in services.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SERVICES]
    if unknown or not wanted:
        raise UserError(f"--services {services!r}: choose from {', '.join(SERVICES)} (comma-separated)")
    return wanted


def _local(lab: Lab) -> bool:
    """Whether the services run on this machine (so that their files can be read here)."""
    return all(
        lab.inventory.hostvars.get(h, {}).get("ansible_connection") == "local" or h == "localhost" for h in lab.hosts
    )


def _check_bind(address: str) -> None:
    try:
        with socket.socket() as sock:
            sock.bind((address, 0))
    except OSError as exc:
        hint = " (the simulated hosts' bridge: run `invoke lab.sim-up` first)" if address.startswith("10.77.0.") else ""
        raise UserError(f"--bind {address}: not an address of this machine{hint}: {exc.strerror}") from None


def _phase(
    state: str, lab: Lab, services: str, bind: str | None, extra: dict[str, Any], destroy: bool = False
) -> runner.Phase:
    variables: dict[str, Any] = {
        **extra,
        "services_state": state,
        "services_enabled": _enabled(services),
        "services_hosts": ",".join(lab.hosts),
    }
    if bind:
        variables.update({BINDS[s]: bind for s in SERVICES})
    if destroy:
        variables["services_confirm_destroy"] = True
    return runner.Phase("services.yml", variables)


def _play(lab: Lab, phase: runner.Phase, title: str) -> None:
    result = lab.play(phase, title)
    if result.failures() or result.status != "successful":
        raise RunFailed(f"{title} failed: {result.summary()}")


def up(lab: Lab, bind: str | None = None, services: str = "ceph,nfs", vars_file: str | None = None) -> list[str]:
    """Start (bootstrapping once) the services; return lines saying how clients reach them."""
    extra = load_vars(vars_file)
    if bind and _local(lab):
        _check_bind(bind)
    _play(lab, _phase("started", lab, services, bind, extra), "lab.services-up")
    return published(lab, services, extra)


def down(lab: Lab, destroy: bool = False, services: str = "ceph,nfs", vars_file: str | None = None) -> list[str]:
    """Stop the services (their data stays), or with `destroy` delete them with their data."""
    extra = load_vars(vars_file)
    _play(lab, _phase("absent" if destroy else "stopped", lab, services, None, extra, destroy), "lab.services-down")
    done = "stopped and deleted (with their data)" if destroy else "stopped; their data stays for the next services-up"
    return [f"{', '.join(_enabled(services))} on {', '.join(lab.hosts)}: {done}"]


def published(lab: Lab, services: str, extra: dict[str, Any]) -> list[str]:
    """What the roles published in client.json, as sentences (read here when the services run here)."""
    lines = []
    for service in _enabled(services):
        key, default = DIRS[service]
        path = Path(extra.get(key, default)) / "client.json"
        if not _local(lab) or not path.exists():
            lines.append(f"{service}: up on {', '.join(lab.hosts)}; clients read {path} there")
            continue
        info = json.loads(path.read_text())
        if service == "ceph":
            lines.append(
                f"ceph: monitors {info['mon_host']}; clients use --conf {info['conf']} --keyring "
                f"{info['keyring']} --id {info['client_id']}; RBD pool {info['rbd_pool']}, CephFS "
                f"{info['fs_name']} (backends rbd_snapshot, cephfs, rbd: ceph_conf, keyring)"
            )
            if info.get("s3"):
                lines.append(s3_line(info["s3"]))
        else:
            versions = " and ".join(f"v{v}" for v in info["protocols"])
            lines.append(
                f"nfs: {info['address']}:{info['pseudo_path']} over NFS {versions} (port {info['port']}), "
                f"exporting {info['export_path']}; check it with `nfs-ls {info['v4_url']}` "
                f"(backend nfs: server {info['address']}, export {info['pseudo_path']})"
            )
    return lines


def s3_line(s3: dict[str, Any]) -> str:
    """How to reach the lab's radosgw: endpoint, bucket and the credentials file's path (never the keys)."""
    return (
        f"s3: radosgw at {s3['endpoint']}, bucket {s3['bucket']}, region {s3['region']}; keys in "
        f"{s3['credentials']} (mode 0600) (backend s3: endpoint {s3['endpoint']}, bucket {s3['bucket']}, "
        f"credentials {s3['credentials']})"
    )
