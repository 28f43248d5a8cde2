"""Shared fixtures: real SQLite files in tmp_path, the real PostgreSQL server when configured, a second Python.

PostgreSQL tests get a fresh, uniquely named database each (several test processes may share one server), created
through an autocommit connection to ``$LEDGER_TEST_PG_URL`` and dropped afterwards; its commits do not wait for the
server's WAL flush (``synchronous_commit`` off: only a crash of the server could lose them, and no test crashes
it). Without that variable they skip, naming it; with ``CI=true`` they must run, so an unset variable or an
unreachable server fails them.

``make test`` and ``make test-all`` run the tests in worker processes (pytest-xdist): each PostgreSQL test has its
own database, each test its own tmp_path and ports, and the session fixtures below are built once in each worker.
The one test that restarts the server (``pg_server_alone``) waits until the other workers' PostgreSQL tests are
done, and holds the next ones back until the server is up again.

``foreign_python`` (a venv of Python 3.13 with only the toolkit: tests/second_python.py) is built once per session
for every test that needs it; without a Python 3.13 on the machine those tests skip, saying so. ``toolkit_env``
(tests/toolkit_versions.py) gives a folder per published arc-agi release, also built once per session.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from ledger import Ledger
from tests import toolkit_versions
from tests.second_python import make_foreign_venv, other_python

PG_URL = os.environ.get("LEDGER_TEST_PG_URL") or None
IN_CI = os.environ.get("CI", "").lower() == "true"
PG_DB_PREFIX = "ledger_t_"
BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(autouse=True)
def evidence_parity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every evidence file a test checks in-process (``ledger check`` through Click, ``check_evidence``) is also
    checked by the standalone verifier (scripts/verify_evidence.py), which must give the same verdict."""
    from ledger.app import evidence_check
    from tests.standalone import parity

    monkeypatch.setattr(evidence_check, "check_evidence", parity(evidence_check.check_evidence))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs the PostgreSQL server ($LEDGER_TEST_PG_URL)")


#: Fixtures that make a test heavy whatever else it does: a browser, a second venv, an installed toolkit release.
HEAVY_FIXTURES = frozenset({"browser", "foreign_python", "toolkit_env"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HEAVY_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.heavy)


def pg_unavailable(reason: str) -> None:
    """Skip a PostgreSQL test, or fail it loudly under CI=true, where it must run."""
    if IN_CI:
        pytest.fail(f"CI=true, so the PostgreSQL tests must run, but {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def _admin_engine(admin_url: str) -> Engine:
    return create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)


@contextmanager
def fresh_pg_database(admin_url: str) -> Iterator[str]:
    """Create a uniquely named database on the server of ``admin_url``; yield its URL; drop it afterwards."""
    name = f"{PG_DB_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:10]}"
    admin = _admin_engine(admin_url)
    try:
        for attempt in range(5):
            try:
                with admin.connect() as conn:
                    conn.execute(text(f'CREATE DATABASE "{name}"'))
                    # A commit waits for the WAL flush only to survive a crash of the server itself, which no test
                    # causes; every other guarantee (atomicity, locks, visibility, order) is unchanged. The tests
                    # commit thousands of times, each an fsync on a disk the whole suite shares.
                    conn.execute(text(f'ALTER DATABASE "{name}" SET synchronous_commit TO off'))
                break
            except DBAPIError as e:
                # Another session connected to template1 at that instant: CREATE DATABASE refuses; try again.
                if "being accessed by other users" not in str(e) or attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))
        url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        try:
            yield url
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


#: The file lock this worker's PostgreSQL test holds on the server, shared with the other worker's tests.
_ON_SERVER: list[IO[str]] = []


@pytest.fixture
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a fresh PostgreSQL database of its own for this test (dropped afterwards)."""
    if not PG_URL:
        pg_unavailable("LEDGER_TEST_PG_URL is not set (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)")
    assert PG_URL is not None
    with open(shared_dir(tmp_path_factory) / ".pg-server.lock", "w") as lock:
        # The shared hold comes first: while the other worker's test restarts the server, even this look waits.
        fcntl.flock(lock, fcntl.LOCK_SH)
        admin = _admin_engine(PG_URL)
        try:
            with admin.connect() as conn:
                conn.execute(text("SELECT 1"))
        except DBAPIError as e:
            pg_unavailable(f"the server of LEDGER_TEST_PG_URL={PG_URL} is not reachable: {str(e.orig or e).strip()}")
        finally:
            admin.dispose()
        _ON_SERVER.append(lock)
        try:
            with fresh_pg_database(PG_URL) as url:
                yield url
        finally:
            _ON_SERVER.remove(lock)


@pytest.fixture
def pg_server_alone(pg_url: str) -> str:
    """``pg_url``, with no other test on the server while this one runs: for a test that restarts the server."""
    (lock,) = _ON_SERVER
    fcntl.flock(lock, fcntl.LOCK_EX)  # the shared hold becomes the only one, once the other worker's test is done
    return pg_url


@pytest.fixture(params=[pytest.param(b, marks=[pytest.mark.postgres] if b == "postgresql" else []) for b in BACKENDS])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend name, 'sqlite' or 'postgresql' (tests using it run once per backend)."""
    return request.param


@pytest.fixture
def backend_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty ledger location on each backend: a SQLite file path, or a PostgreSQL URL."""
    if backend == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def backend_ledger(backend_url: str) -> Iterator[Ledger]:
    """An open ledger on each backend."""
    with Ledger.open(backend_url) as led:
        yield led


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh SQLite ledger path."""
    return tmp_path / "ledger.sqlite"


@pytest.fixture
def ledger(db_path: Path) -> Iterator[Ledger]:
    """An open SQLite ledger."""
    with Ledger.open(db_path) as led:
        yield led


@pytest.fixture(scope="session")
def foreign_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A venv of another Python version with only the toolkit installed: it cannot load the ledger's msgspec."""
    base = other_python()
    if base is None:
        pytest.skip("no second Python (3.13) on this machine to run the toolkit under")
    root = shared_dir(tmp_path_factory)
    venv = root / "foreign-venv"
    with open(root / ".foreign.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker builds it meanwhile: wait for that one build
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)
            make_foreign_venv(base, venv)
            (venv / ".complete").touch()
    return str(venv / "bin" / "python")


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every worker of this test run shares (pytest-xdist gives each worker its own base folder inside
    the run's): what is built once per run goes there, under a lock."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def toolkit_env(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``toolkit_env(version) -> folder`` holding only arc-agi ``version`` (tests/toolkit_versions.py), each built
    once per session; run the project's Python with it first on PYTHONPATH (``toolkit_versions.run_under``)."""
    toolkit_versions.set_root(shared_dir(tmp_path_factory) / "toolkits")
    return toolkit_versions.toolkit_env
