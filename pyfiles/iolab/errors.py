"""The one exception type that reaches the user as a sentence, not a traceback."""

import errno


class UserError(Exception):
    """A problem the user can fix: the message names it and says how.

    Invoke tasks turn it into one line on stderr and a non-zero exit.
    """

    exit_code = 2


class RunFailed(UserError):
    """A benchmark or playbook failed on a host; results gathered so far are kept."""

    exit_code = 1


class StoreError(RunFailed):
    """The results could not be written: what was being stored is not, and a resume runs it again."""


# The errors of a results disk rather than of a host (full, over quota, read-only, failing): writing stops at once.
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO)


class Interrupted(UserError):
    """Ctrl-C: teardown has run, results gathered so far are kept."""

    exit_code = 130


class Terminated(KeyboardInterrupt):
    """SIGTERM (a job scheduler, `kill`), handled as Ctrl-C is: teardown, then exit 143."""


def raise_terminated(*_: object) -> None:
    """A SIGTERM handler: stop where the program is, as Ctrl-C does."""
    raise Terminated
