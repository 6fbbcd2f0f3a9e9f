"""The results database's answers as tables: a query's rows (`results.query`), and each store's files set
against its rows in the index (`results.index`, iolab.results.check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from iolab.report.layout import NUMBER, TEXT, Column, Fitted
from iolab.report.tables import plain
from iolab.results import db as results_db
from iolab.results.check import Agreement


def rows(columns: list[str], found: list[tuple[Any, ...]]) -> Table:
    """A query's answer: its columns as they are named, NULL for a missing value, never markup."""
    out = Table(caption=f"{len(found)} row(s)")
    for column in columns:
        out.add_column(plain(column))
    for row in found:
        out.add_row(*(plain("NULL" if v is None else v) for v in row))
    return out


def agreement(found: list[Agreement], results: Path) -> Fitted:
    """Each store's counts and checksums, files against index; 'DIFFER' where they do not agree."""
    out = Fitted(
        [Column("store"), Column("samples (files / index)", NUMBER), Column("run records (files / index)", NUMBER)]
        + [Column("checksum", NUMBER), Column("", TEXT)],
        title=f"the results index {results_db.path_of(results)} against the files",
    )
    for a in found:
        checksums = a.file_checksum if a.file_checksum == a.db_checksum else f"{a.file_checksum} / {a.db_checksum}"
        counts = (f"{a.file_samples} / {a.db_samples}", f"{a.file_runs} / {a.db_runs}")
        out.add_row(a.store, *counts, checksums, "agree" if a.agree else "DIFFER")
    return out
