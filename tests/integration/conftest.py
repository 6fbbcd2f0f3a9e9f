"""Integration tests: the real playbooks through ansible-runner on this machine (root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            if os.geteuid() != 0:
                item.add_marker(pytest.mark.skip(reason="needs root: mounts and cache drops"))


@pytest.fixture
def write_campaign(tmp_path):
    def write(data: dict, name: str = "campaign.yml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write
