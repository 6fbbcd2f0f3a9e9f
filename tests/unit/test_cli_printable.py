"""No error message puts a terminal escape on the screen: iolab.run.cli.user_errors writes the control characters of
every UserError's line out (units.printable), whatever name or value it quotes (issue 23)."""

from __future__ import annotations

import pytest
from invoke.exceptions import Exit

from iolab.errors import UserError
from iolab.report.compare import Regression
from iolab.run.cli import user_errors

ESCAPES = "lo\x1b]0;owned\x07cal\x1b[2J\u009b31m"


@pytest.mark.parametrize("error", [UserError, Regression])
def test_a_user_errors_control_characters_are_written_out(error):
    @user_errors
    def command():
        raise error(f"campaign x has no backend '{ESCAPES}'\tsee\nthe next line")

    with pytest.raises(Exit) as raised:
        command()
    assert raised.value.message == (
        "iolab: campaign x has no backend 'lo\\u001b]0;owned\\u0007cal\\u001b[2J\\u009b31m'\tsee\nthe next line"
    )
    assert raised.value.code == error.exit_code
