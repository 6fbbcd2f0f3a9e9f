"""Where the lab's own files are: the repository that holds playbooks and roles."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
ROLES = ROOT / "roles"
ANSIBLE_CFG = ROOT / "ansible.cfg"
DEFAULT_INVENTORY = ROOT / "inventory" / "local.yml"
DEFAULT_CAMPAIGN = ROOT / "campaigns" / "quick.yml"
LAB_DIR = ROOT / ".lab"  # git-ignored: simulated hosts, releases, keys
SIM_INVENTORY = ROOT / "inventory" / "sim.yml"  # this checkout's own simulated lab (iolab.sim.for_checkout)


def checkout_lab_name() -> str:
    """This checkout's simulated lab: 6 hex digits of its path's SHA-256, the same on every call."""
    return hashlib.sha256(str(ROOT).encode()).hexdigest()[:6]


def results_root() -> Path:
    """`results/` of the repository, or $IOLAB_RESULTS (tests point it at a temporary directory)."""
    return Path(os.environ.get("IOLAB_RESULTS", ROOT / "results"))
