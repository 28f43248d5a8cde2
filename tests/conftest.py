"""Shared fixtures: real SQLite files in tmp_path, the real PostgreSQL server when configured."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Ledger

PG_URL = os.environ.get("LEDGER_TEST_PG_URL")
IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh SQLite ledger path."""
    return tmp_path / "ledger.sqlite"


@pytest.fixture
def ledger(db_path: Path) -> Iterator[Ledger]:
    """An open SQLite ledger."""
    with Ledger.open(db_path) as led:
        yield led
