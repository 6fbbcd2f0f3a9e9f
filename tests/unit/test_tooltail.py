"""A failed tool's one line is its last meaningful error line (iolab.shared.tooltail), not mpirun's banner.

The fixtures in tests/fixtures/tool_stderr are stderr as captured on this machine (Debian 12's Open MPI 4.1.4,
dlio_benchmark 2.0.0 in a virtualenv made from the role's package lists before TensorFlow was among them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.parsers import load_json
from iolab.shared.tooltail import TAIL_BYTES, file_message, last_message
from support import ROOT

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tool_stderr"
NO_TF = "ModuleNotFoundError: No module named 'tensorflow'"


@pytest.mark.parametrize(
    ("fixture", "line"),
    [
        # One rank: the traceback, then mpirun's two framed messages ("Primary job terminated normally...").
        ("dlio-without-tensorflow-1-rank.txt", NO_TF),
        # Three ranks: the same traceback three times over, the banner once.
        ("dlio-without-tensorflow-3-ranks.txt", NO_TF),
        # DLIO failing in its run: Hydra's hint about HYDRA_FULL_ERROR comes after the exception.
        (
            "dlio-missing-data-folder-2-ranks.txt",
            "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/d37d/nothing-here/train'",
        ),
        # MPI_ABORT: the ranks' own line, not mpirun's ORTE_ERROR_LOG or "set orte_base_help_aggregate" notes.
        ("mpi-abort-3-ranks.txt", "rank failing: RuntimeError: bad thing"),
    ],
)
def test_the_line_is_the_tools_error_not_mpiruns_banner(fixture, line):
    text = (FIXTURES / fixture).read_text()
    assert text.rstrip().splitlines()[-1] != line  # the last line (what the one line said before) is mpirun's
    assert last_message(text) == line


def test_a_framed_message_is_the_line_when_nothing_else_is_said():
    text = "-" * 74 + "\nMPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 3.\n" + "-" * 74
    assert last_message(text) == "with errorcode 3."
    assert last_message("\n\n  \n====\n") == ""


def test_without_an_error_word_the_last_line_that_says_something_wins():
    assert last_message("starting\nfio: file hash not empty on exit\n\n") == "fio: file hash not empty on exit"
    # A tool's own rule earlier on frames nothing: the line after it stays outside mpirun's blocks.
    text = "=" * 20 + "\nreal trouble here\n" + "-" * 74 + "\nPrimary job  terminated normally\n" + "-" * 74
    assert last_message(text) == "real trouble here"
    # An error line wins over later chatter.
    assert last_message("x\nerror: disk gone\nretrying\ngiving up") == "error: disk gone"


def test_only_the_end_of_a_long_stderr_is_read(tmp_path):
    path = tmp_path / "stderr.txt"
    path.write_text("OSError: early, out of reach\n" + "[INFO] step\n" * (TAIL_BYTES // 8) + "the end\n")
    assert file_message(path) == "the end"
    assert file_message(tmp_path / "missing.txt") == ""


def test_a_parser_names_the_error_line_of_a_tool_that_wrote_no_result(tmp_path):
    (tmp_path / "stderr.txt").write_text((FIXTURES / "dlio-without-tensorflow-1-rank.txt").read_text())
    with pytest.raises(Exception, match=f"stderr.txt ends: {NO_TF!r}"):
        load_json(tmp_path / "0_output.json", "DLIO")


def test_hostrun_says_the_error_line_of_a_tool_that_failed(tmp_path):
    """`TOOL exited N: LINE` is what the run's record and the campaign show of a failed run."""
    tool = "import sys; sys.stderr.write(open(sys.argv[1]).read()); sys.exit(1)"
    argv = [sys.executable, "-m", "iolab.host.hostrun", "run", "--dir", str(tmp_path / "run"), "--timeout", "60"]
    argv += ["--", sys.executable, "-c", tool, str(FIXTURES / "dlio-without-tensorflow-3-ranks.txt")]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "pyfiles")}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == f"{sys.executable} exited 1: {NO_TF}"
    assert json.loads((tmp_path / "run" / "run.json").read_text())["rc"] == 1
