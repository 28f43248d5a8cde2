"""A wheel built from the tree works outside the checkout: it carries the top-level ``migrations/`` inside the
package, creates a new ledger and upgrades one written at the first schema revision.

The wheel is built by pip (hatchling, as pyproject.toml says) and unpacked into a folder that comes first on the
child's import path, in a working folder outside the checkout, so nothing of the source tree can stand in for it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "first_schema.sqlite"


@pytest.fixture(scope="module")
def unpacked_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("arc_scorecard_ledger-*.whl")
    site = out / "site"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "ledger/store/migrations/env.py" in names, "the wheel does not carry the migrations"
        assert any(n.startswith("ledger/store/migrations/versions/0001_") for n in names)
        # The viewer's vendored chart library (no CDN: the viewer and the bundle work offline).
        for vendored in ("uPlot.iife.min.js", "uPlot.min.css", "LICENSE"):
            assert f"ledger/web/static/vendor/uplot/{vendored}" in names, f"the wheel does not carry {vendored}"
        zf.extractall(site)
    return site


def run(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LEDGER_DB"} | {"PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-c", "from ledger.cli import main; main()", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_wheel_finds_its_own_migrations(unpacked_wheel: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [sys.executable, "-c", "import ledger.store.base as b; print(b.__file__); print(b.migrations_dir())"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(unpacked_wheel)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    module, migrations = where.stdout.split()
    assert Path(module).is_relative_to(unpacked_wheel) and Path(migrations).is_relative_to(unpacked_wheel)


def test_the_wheel_creates_a_ledger(unpacked_wheel: Path, tmp_path: Path) -> None:
    done = run(unpacked_wheel, tmp_path, "--db", "new.sqlite", "init")
    assert done.returncode == 0, done.stdout + done.stderr
    verified = run(unpacked_wheel, tmp_path, "--db", "new.sqlite", "verify")
    assert verified.returncode == 0 and "(head)" in verified.stdout, verified.stdout + verified.stderr


def test_the_wheel_upgrades_an_old_ledger(unpacked_wheel: Path, tmp_path: Path) -> None:
    shutil.copy(FIXTURE, tmp_path / "old.sqlite")
    before = run(unpacked_wheel, tmp_path, "--db", "old.sqlite", "verify")
    assert "migrations are at" in before.stdout + before.stderr
    done = run(unpacked_wheel, tmp_path, "--db", "old.sqlite", "init")
    assert done.returncode == 0, done.stdout + done.stderr
    after = run(unpacked_wheel, tmp_path, "--db", "old.sqlite", "verify")
    assert after.returncode == 0 and "(head)" in after.stdout, after.stdout + after.stderr
