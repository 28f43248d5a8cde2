"""Which store serves a ledger: a SQLite path or a ``postgresql+psycopg://`` URL to its backend's class.

Apart from :mod:`ledger.store.base` so that the backends, which build on ``base``, are imported by nobody they
import (no cycle), and only the one a ledger needs is loaded.
"""

from __future__ import annotations

import os

from ledger.errors import InputError, StoreError
from ledger.store.base import Durability, LogStore, hide_password, normalize_url


def open_store(
    path_or_url: str | os.PathLike[str],
    *,
    durability: Durability = "normal",
    busy_timeout_ms: int = 60_000,
    readonly: bool = False,
) -> LogStore:
    """A store for a SQLite path or a ``postgresql+psycopg://`` URL (not migrated: see ``migrate``).

    ``readonly``: never create, migrate or write; the database must already be a ledger (else StoreError).
    A URL that cannot name a ledger (in-memory SQLite, a PostgreSQL URL without a database, a bad port) is
    refused with :class:`InputError`.
    """
    url = normalize_url(path_or_url)
    scheme = url.split("://", 1)[0].lower()
    if scheme == "sqlite" or scheme.startswith("sqlite+"):
        from ledger.store.sqlite import SQLiteStore

        return SQLiteStore(url, durability=durability, busy_timeout_ms=busy_timeout_ms, readonly=readonly)
    if scheme.startswith("postgres"):
        try:
            from ledger.store.postgres import PostgresStore
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] != "psycopg":
                raise
            raise StoreError(
                f"cannot open {hide_password(url)}: its driver psycopg is not installed; the ledger uses psycopg 3: "
                "postgresql+psycopg://... (pip install 'arc-scorecard-ledger[postgres]')"
            ) from e

        return PostgresStore(url, durability=durability, busy_timeout_ms=busy_timeout_ms, readonly=readonly)
    raise InputError(
        f"unsupported database {scheme!r} in {hide_password(url)}: use a SQLite file path or "
        "postgresql+psycopg://user@host/db"
    )
