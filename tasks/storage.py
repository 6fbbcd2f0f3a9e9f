"""./lab storage.*: a campaign's backend mounted and unmounted by hand."""

from __future__ import annotations

from invoke import Collection

from iolab import paths
from iolab.campaign import model as campaign_mod
from iolab.drive import lease
from iolab.run import session
from iolab.run.cli import echo, user_errors
from iolab.run.cli import lab as make_lab

from .common import CAMPAIGN, HOSTS, INVENTORY, STEAL, task

# --- storage -----------------------------------------------------------------------------


def _storage(state, inventory, hosts, campaign, backend, steal):
    spec = campaign_mod.load(campaign or paths.DEFAULT_CAMPAIGN)
    phases = session.by_hand(spec, backend, state, campaign or paths.DEFAULT_CAMPAIGN)
    lab = make_lab(inventory, hosts)
    with lease.held(lab, f"storage.{'mount' if state == 'kept' else 'unmount'} of {backend}", steal):
        result = lab.play(phases, f"storage {state}", cancellable=state == "kept")
    echo(session.by_hand_done(spec, backend, state, result, len(lab.hosts)))


@task(help={"inventory": INVENTORY, "hosts": HOSTS, "campaign": CAMPAIGN, "backend": "backend name", "steal": STEAL})
@user_errors
def mount(c, backend, inventory=None, hosts=None, campaign=None, steal=False):
    """Mount a campaign's backend by hand (for staging or inspecting data); campaigns leave it mounted."""
    _storage("kept", inventory, hosts, campaign, backend, steal)


@task(help={"inventory": INVENTORY, "hosts": HOSTS, "campaign": CAMPAIGN, "backend": "backend name", "steal": STEAL})
@user_errors
def unmount(c, backend, inventory=None, hosts=None, campaign=None, steal=False):
    """Unmount a campaign's backend mounted by hand."""
    _storage("absent", inventory, hosts, campaign, backend, steal)


storage = Collection("storage", mount, unmount)
