"""A table's explanations as numbered footnotes under it, not written into its cells.

A cell carries a short name and a mark, `potential_caching [2]`; under the table, `[2]` and
the full text, once however many cells cite it. Any table of the report can use them: the
terminal prints `rich()` under its table (iolab.report.layout.Fitted does), the HTML page writes
each cite as a link to its note (macros.html.j2's `cite`) and the notes as a list under the
table (`notes`), their ids prefixed by the table's name so that two tables' [1] do not meet.

    notes = Footnotes("verdict")
    marks = notes.flags([("host-bound", "measures this host, not the storage")])  # [Cite('host-bound', 1, …)]
    ...
    console.print(Fitted(columns, notes=notes))     # the table, then its notes
"""

from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple

from rich.table import Table
from rich.text import Text

from iolab.measures import host_flags, validity
from iolab.units import printable


class Cite(NamedTuple):
    """A cell's mark: the name it shows and the number (and HTML anchor) of its note."""

    name: str
    number: int
    anchor: str

    def __str__(self) -> str:
        return f"{self.name} [{self.number}]" if self.name else f"[{self.number}]"


@dataclasses.dataclass
class Footnotes:
    """The notes of one table, numbered from 1 in the order first cited."""

    table: str  # the table's name: its notes' anchors on the HTML page are `<table>-note-<n>`
    texts: list[str] = dataclasses.field(default_factory=list)

    def cite(self, name: str, text: str) -> Cite:
        """The mark of `text`'s note (made on its first cite), shown after `name`."""
        if text not in self.texts:
            self.texts.append(text)
        number = self.texts.index(text) + 1
        return Cite(name, number, self.anchor(number))

    def flags(self, flags: list[tuple[str, str]]) -> list[Cite]:
        """A cell's flags, each (name, why), as marks: each note says which flag it explains (`note_text`)."""
        return [self.cite(name, note_text(name, why)) for name, why in flags]

    def anchor(self, number: int) -> str:
        return f"{self.table}-note-{number}"

    def items(self) -> list[dict[str, object]]:
        """Each note for the page: its number, anchor and text."""
        return [{"number": n, "anchor": self.anchor(n), "text": t} for n, t in enumerate(self.texts, 1)]

    def rich(self) -> Table | None:
        """The notes for a terminal: `[n]` then its text, wrapped under itself; None without a note."""
        if not self.texts:
            return None
        grid = Table.grid(padding=(0, 1))
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(overflow="fold")
        for number, text in enumerate(self.texts, 1):
            grid.add_row(f"[{number}]", Text(printable(text)))
        return grid


# --- flags as notes: what a cell names and what its note says (the terminal and the page alike) ----------

# A search's flags (its answer's metadata.flags: iolab.run.accelerators.summary writes them as sentences) → the
# name a cell shows; the sentence is the note. A flag written `name: why` is named by its name.
ANSWER_FLAG_NAMES = (("measures this host", "host-bound"), ("probes of ", "short probes"))
NAME_MAX = 24  # a `name: why` flag whose name is longer is named by its first two words


def named(flag: str) -> tuple[str, str]:
    """A search answer's flag (a sentence) as (the name a cell shows, why)."""
    for start, name in ANSWER_FLAG_NAMES:
        if flag.startswith(start):
            return name, flag
    head, sep, rest = flag.partition(": ")
    if sep and len(head) <= NAME_MAX:
        return head, rest
    return " ".join(flag.split()[:2]), flag


def note_text(name: str, why: str) -> str:
    """A flag's note says which flag it explains: `name: why` (unless `why` already starts with the name)."""
    return why if why.startswith(name) else f"{name}: {why}"


def flag_named(flag: host_flags.Flag) -> tuple[str, str]:
    """A run's flag as (name, why): validity's own are named by an identifier (`potential_caching`) and have
    their reason; a search answer's sentences (its metadata.flags, which validity reads as names, their
    reason only "recorded with the run") are named here."""
    return (flag.name, flag.reason) if re.fullmatch(r"[a-z][a-z0-9_]*", flag.name) else named(flag.name)


def run_flags(verdicts: validity.Verdicts, run_id: str) -> list[tuple[str, str]]:
    """A run's own flags that make it incomparable, as (name, why), each once; disagreeing repeats are a
    metric's (marked † in the tables), not the run's."""
    found = {flag_named(f): None for f in verdicts.of(run_id) if f.blocking and f.name != validity.REPEATS_DISAGREE}
    return list(found)
