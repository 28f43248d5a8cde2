"""One environment per published arc-agi release, for tests that run a toolkit other than the installed one.

``toolkit_env(version)`` installs ``arc-agi==version`` alone (``pip install --no-deps --target DIR``: every 0.9.x
runs on the arcengine, pydantic and requests this venv already has) and returns DIR, built once per test session
(the ``toolkit_env`` fixture of tests/conftest.py hands this function out after pointing it at the session's
temporary folder). ``run_under(version, args)`` runs the project's own Python with DIR first on ``PYTHONPATH``:
``import arc_agi`` and ``importlib.metadata.version("arc-agi")`` are then that release's, and ``ledger`` is still
importable. Without PyPI the tests that need it skip, saying why (and fail under CI=true).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"
_root: Path | None = None


def set_root(root: Path) -> None:
    """Where the environments are built (the session's temporary folder: tests/conftest.py sets it)."""
    global _root
    _root = root


def toolkit_env(version: str) -> Path:
    """A folder holding arc-agi ``version`` only, built on first use (a lock keeps parallel workers to one build)."""
    root = _root or Path(tempfile.gettempdir()) / f"ledger-toolkits-{os.getuid()}"
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"arc-agi-{version}"
    done = target / ".complete"
    if done.exists():
        return target
    with open(root / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            pip = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-deps",
                    "--target",
                    str(target),
                    f"arc-agi=={version}",
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if pip.returncode != 0:
                why = f"arc-agi=={version} could not be installed: {pip.stderr.strip().splitlines()[-1:]}"
                if IN_CI:
                    pytest.fail(why, pytrace=False)
                pytest.skip(why)
            done.touch()
    return target


def env_for(version: str) -> dict[str, str]:
    """The environment of a subprocess that imports arc-agi ``version`` (and the project, from this checkout)."""
    project = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join([str(toolkit_env(version)), project, os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}


def run_under(version: str, args: list[str], *, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` (the project's interpreter) with arc-agi ``version`` imported instead of the installed one."""
    return subprocess.run(
        [sys.executable, *args], env=env_for(version), capture_output=True, text=True, timeout=timeout
    )
