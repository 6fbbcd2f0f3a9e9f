"""What every task module shares: the task decorator (no -h flag of its own) and the flags' help texts."""

from __future__ import annotations

import functools

from invoke import Task
from invoke import task as invoke_task

HOSTS = "host pattern: gpu[01-04], gpu01,gpu03, gpu[01-04]:!gpu02 (default: all hosts)"
INVENTORY = "inventory file (default: inventory/local.yml, this machine)"
CAMPAIGN = "campaign file (default: campaigns/quick.yml)"
STEAL = "take over a host lease whose campaign is verifiably gone (its process ended on this machine)"


class LabTask(Task):
    """A task whose flags never take the short flag -h: `./lab TASK -h` shows the task's help."""

    def arg_opts(self, name, default, taken_names):
        return super().arg_opts(name, default, taken_names | {"h"})


task = functools.partial(invoke_task, klass=LabTask)
