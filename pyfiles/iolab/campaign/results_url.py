"""A results server's URL (postgresql://USER@HOST[:PORT]/DATABASE), kept so that no secret leaves it.

The password may come in the URL ($IOLAB_RESULTS_DB, `results.publish --to`), or from ~/.pgpass or
PGPASSWORD, which libpq reads; never in a campaign file's `results_db:` (it is shared, and its key is
kept with the results' ledger): `campaign_url` refuses one as the campaign loads. Every message names
the server as user@host:port/database (`Target.shown`), and a parse error never repeats the text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import TYPE_CHECKING

from iolab.errors import UserError

if TYPE_CHECKING:  # SQLAlchemy's import (≈ 0.2 s) is made where a URL is parsed: a command with none pays nothing
    from sqlalchemy.engine import URL

ENV = "IOLAB_RESULTS_DB"
SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
HOST = re.compile(r"[A-Za-z0-9._-]+|[0-9A-Fa-f:.]+")  # a name, an IPv4 or IPv6 address: nothing of a password


@dataclasses.dataclass(frozen=True)
class Target:
    url: URL

    @property
    def shown(self) -> str:
        """user@host:port/database: the server, never the secret."""
        u = self.url
        return f"{u.username + '@' if u.username else ''}{u.host or 'localhost'}:{u.port or 5432}/{u.database or ''}"

    @property
    def key(self) -> str:
        """The server, database and user, hashed: where the local index keeps what it has published there."""
        return hashlib.sha256(self.shown.encode()).hexdigest()[:32]

    def scrub(self, text: str) -> str:
        secret = self.url.password
        return text.replace(str(secret), "***") if secret else text


def parse(text: str, where: str) -> Target:
    """A postgresql:// URL; the error never repeats it (it may hold a password).

    A password with an unencoded @ leaves its tail in the host ('pw@tail@host' reads as host 'tail@host'), one
    with / or : can leave it in the port (a ValueError of the URL parser that quotes it): a host that is not a
    name or an address, and a port that is not a number, are refused without repeating either."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(str(text).strip())
        usable = url.drivername in SCHEMES and bool(url.database) and bool(HOST.fullmatch(url.host or "localhost"))
    except (ArgumentError, ValueError, TypeError):
        usable = False
    if not usable:
        raise UserError(
            f"{where}: not a PostgreSQL URL; write postgresql://USER@HOST[:PORT]/DATABASE "
            "(the password in ~/.pgpass, PGPASSWORD or $IOLAB_RESULTS_DB, where an @ in it is written %40, "
            "a : %3A and a / %2F)"
        )
    return Target(url.set(drivername="postgresql+psycopg"))


def campaign_url(value: str) -> str:
    """A campaign's `results_db:`, checked as the campaign loads (ValueError, for pydantic to say where): a
    PostgreSQL URL, and no password in it."""
    try:
        target = parse(value, "results_db")
    except UserError as exc:
        raise ValueError(str(exc).removeprefix("results_db: ")) from None
    if target.url.password is not None:
        raise ValueError(
            "a campaign file must not hold a password (it is shared, and its key is kept with the results); "
            f"give it in ${ENV}, ~/.pgpass or PGPASSWORD"
        )
    return value
