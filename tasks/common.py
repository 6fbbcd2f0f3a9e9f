"""What every task module shares: the task decorator (no -h flag of its own) and the flags' help texts."""

from __future__ import annotations

from iolab.run.cli import task

HOSTS = "host pattern: gpu[01-04], gpu01,gpu03, gpu[01-04]:!gpu02 (default: all hosts)"
INVENTORY = "inventory file (default: inventory/local.yml, this machine)"
CAMPAIGN = "campaign file (default: campaigns/quick.yml)"
STEAL = "take over a host lease whose campaign is verifiably gone (its process ended on this machine)"


__all__ = ["task"]
