"""Integration tests: the real playbooks through ansible-runner on this machine (root)."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            if os.geteuid() != 0:
                item.add_marker(pytest.mark.skip(reason="needs root: mounts and cache drops"))
