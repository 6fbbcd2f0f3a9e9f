"""Shared fixtures: the repository root, and a results directory per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    """A private results/ for the test (iolab reads $IOLAB_RESULTS)."""
    path = tmp_path / "results"
    monkeypatch.setenv("IOLAB_RESULTS", str(path))
    return path


@pytest.fixture
def cli(results):
    """`./lab TASK ...` as a user runs it, with this test's private results (support.Cli)."""
    from support import Cli

    return Cli(results)


def needs_root():
    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mounts, cache drops)")
