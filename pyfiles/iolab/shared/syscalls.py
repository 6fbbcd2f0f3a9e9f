"""`strace -c` summaries: a loader's tracer writes them on a host, the controller's parser reads them (stdlib only)."""

from __future__ import annotations


class SummaryError(ValueError):
    """The file is not an `strace -c` summary."""


def parse_summary(text: str) -> dict[str, dict[str, int]]:
    """{syscall: {"calls": n, "errors": n}} from `strace -c` output, the "total" line left out.

    >>> parse_summary("% time seconds usecs/call calls errors syscall\\n"
    ...               "------ ------\\n 60.00 0.000060 20 3 1 openat\\n 40.00 0.000040 10 4 read\\n"
    ...               "------ ------\\n100.00 0.000100 14 7 1 total\\n")
    {'openat': {'calls': 3, 'errors': 1}, 'read': {'calls': 4, 'errors': 0}}
    """
    out: dict[str, dict[str, int]] = {}
    header = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("-") or stripped.startswith("strace:"):
            continue
        if stripped.startswith("% time"):
            header = True
            continue
        if not header:
            continue  # anything strace wrote before the table
        tokens = stripped.split()
        if len(tokens) not in (5, 6):
            raise SummaryError(
                f"line {number}: expected % time, seconds, usecs/call, calls, [errors], syscall; got {stripped!r}"
            )
        try:
            calls = int(tokens[3])
            errors = int(tokens[4]) if len(tokens) == 6 else 0
        except ValueError:
            raise SummaryError(f"line {number}: calls and errors must be integers, got {stripped!r}") from None
        name = tokens[-1]
        if name != "total":
            out[name] = {"calls": calls, "errors": errors}
    if not header:
        raise SummaryError("no '% time … syscall' header: not an strace -c summary")
    return out
