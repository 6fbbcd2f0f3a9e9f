"""A report's table laid out at the width it is printed at (80 columns, or what COLUMNS says).

Rich alone shrinks the widest columns first and cuts a word that no longer fits with `…`: at 80
columns the report cut names to 12 characters (`resnet50-h1…`) while a flag's sentence sat in a
cell. Here each column says what it holds, and the widths are chosen before Rich draws:

    NAME    a workload, backend or metric: never cut; it wraps at its words only when the table
            cannot fit otherwise, and a word wider than the room folds onto the next line (so two
            names never read the same)
    NUMBER  a figure: never wrapped (its header may wrap at its words)
    TEXT    a sentence: wraps first

A table fits when its columns at their natural widths do; else the TEXT and NUMBER headers wrap,
then the NAME columns wrap at their words, the widest first; only a table that still cannot fit
folds a word (never below FOLD_FLOOR): a TEXT column's first, a name's last. The title, the notes
under the table and a group's line (the point, store or series its rows belong to: `add_row(...,
group=)`) are printed at the full width, not a column's: a long name there takes no room from the
columns. Columns are separated by two spaces and a rule under the header.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from iolab.report.footnotes import Footnotes
from iolab.units import printable

NAME, NUMBER, TEXT = "name", "number", "text"
FOLD_FLOOR = 6  # a name or text column is never narrower than this
WIDE = 10_000
INDENT = "  "  # a grouped row's first cell, under its group's line
FLAG = "⚑ "  # a cell's flag starts its line: `⚑ potential_caching [2]`


@dataclasses.dataclass(frozen=True)
class Column:
    head: str
    kind: str = NAME
    justify: str = ""  # default: NUMBER right, the others left


def width(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.splitlines()), default=0)


def longest_word(text: str) -> int:
    """The narrowest a cell gets without breaking a word (a leading indent stays with the first word; a flag's
    line, `⚑ name [n]`, is one word: its mark, name and note number stay together)."""
    from rich.cells import cell_len

    lead = len(text) - len(text.lstrip(" "))
    words = [w for line in text.splitlines() for w in ([line] if line.startswith(FLAG) else line.split())]
    return max((cell_len(word) + (lead if i == 0 else 0) for i, word in enumerate(words)), default=0)


def cited(notes: Footnotes, flags: list[tuple[str, str]]) -> str:
    """A cell's flags in the terminal: `⚑ name [n]`, one a line, each why a note of `notes`."""
    return "\n".join(f"{FLAG}{cite}" for cite in notes.flags(flags))


class Fitted:
    """A table whose column widths are chosen at print time; its title above, its notes under it."""

    def __init__(
        self,
        columns: Iterable[Column],
        title: str | None = None,
        notes: Footnotes | None = None,
        after: Iterable[str] = (),
    ):
        self.columns = [dataclasses.replace(c, head=printable(c.head)) for c in columns]  # a name: no control
        self.title = title
        self.notes = notes  # numbered as the rows are added; printed under the table
        self.after = list(after)  # lines under the notes (what the marks † ⚑ mean)
        self.rows: list[list[str]] = []
        self.groups: dict[int, str] = {}  # row index → the group line printed above it
        self.indented: set[int] = set()  # the rows under a group line (their first cell indented, every line)
        self._group: str | None = None

    def add_row(self, *cells: object, group: str | None = None) -> None:
        """A row; with `group` (the point it belongs to), the group is a line of its own above its first row,
        at the table's full width, and the row's first cell is indented under it."""
        row = [printable(str(c)) for c in cells]
        if group is not None:
            if group != self._group:
                self.groups[len(self.rows)] = printable(group)
                self._group = group
            row[0] = "\n".join(INDENT + line for line in row[0].split("\n"))  # each of its lines, for the widths
            self.indented.add(len(self.rows))
        self.rows.append(row)

    def widths(self, room: int, overhead: int) -> list[int | None]:
        """Each column's width at `room` columns (None: its natural width, Rich's)."""
        natural, soft, hard = self.naturals(), [], []
        for index, col in enumerate(self.columns):
            cells = [row[index] for row in self.rows]
            body = max((width(c) for c in cells), default=0)
            words = max((longest_word(c) for c in cells), default=0)
            soft.append(max(body if col.kind == NUMBER else words, longest_word(col.head), 1))
            hard.append(soft[-1] if col.kind == NUMBER else min(soft[-1], FOLD_FLOOR))
        chosen = list(natural)
        excess = sum(chosen) + overhead - room
        for kinds, floor in (((TEXT, NUMBER), soft), ((NAME,), soft), ((TEXT,), hard), ((NAME,), hard)):
            while excess > 0:
                can = [i for i, c in enumerate(self.columns) if c.kind in kinds and chosen[i] > floor[i]]
                if not can:
                    break
                widest = max(can, key=lambda i: chosen[i])
                chosen[widest] -= 1
                excess -= 1
        return [None if w == n else w for w, n in zip(chosen, natural, strict=True)]

    def table(
        self, widths: Sequence[int | None] | None = None, span: range | None = None, header: bool = True
    ) -> Table:
        """The columns at `widths` (None: natural) with the rows of `span` (default: all), under the header or not;
        an indented first cell stays indented where it wraps."""
        out = Table(
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
            padding=(0, 1),
            show_header=header,
        )
        for index, col in enumerate(self.columns):
            out.add_column(
                Text(col.head),
                justify=col.justify or ("right" if col.kind == NUMBER else "left"),  # type: ignore[arg-type]
                overflow="fold",
                width=widths[index] if widths else None,
            )
        for index in span if span is not None else range(len(self.rows)):
            cells: list[RenderableType] = [Text(cell) for cell in self.rows[index]]
            if index in self.indented:
                lines = self.rows[index][0].split("\n")
                cells[0] = Padding(Text("\n".join(line[len(INDENT) :] for line in lines)), (0, 0, 0, len(INDENT)))
            out.add_row(*cells)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        drawn = Measurement.get(console, options.update_width(WIDE), self.table()).maximum
        overhead = drawn - sum(self.naturals())  # the gaps between the columns
        parts: list[RenderableType] = [Text(printable(self.title))] if self.title else []
        parts += self.parts(self.widths(options.max_width, overhead))
        notes = self.notes.rich() if self.notes else None
        parts += [notes] if notes is not None else []
        parts += [Text(printable(line)) for line in self.after]
        yield Group(*parts)

    def parts(self, widths: list[int | None]) -> list[RenderableType]:
        """The table at `widths`: one table, or with groups, the header, then each group's line above its rows
        (every part at the same widths: their columns line up)."""
        if not self.groups:
            return [self.table(widths)]
        fixed = [n if w is None else w for w, n in zip(widths, self.naturals(), strict=True)]
        out: list[RenderableType] = [self.table(fixed, range(0))]
        starts = sorted(self.groups)
        if starts[0] > 0:
            out.append(self.table(fixed, range(starts[0]), header=False))
        for start, end in zip(starts, [*starts[1:], len(self.rows)], strict=True):
            out += [Text(self.groups[start]), self.table(fixed, range(start, end), header=False)]
        return out

    def naturals(self) -> list[int]:
        """Each column's width with nothing wrapped: its widest cell or header."""
        return [max([width(c.head), *(width(row[i]) for row in self.rows)]) for i, c in enumerate(self.columns)]
