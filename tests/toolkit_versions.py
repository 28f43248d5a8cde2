"""The published arc-agi releases as test environments: one folder per release, built once per test session.

Every 0.9.x release runs on arcengine 0.9.3 and the same dependencies as the project's own, so a release is just
its wheel unpacked into a folder (``pip install --no-deps --target``) put first on PYTHONPATH of a subprocess of
this venv's Python. The folders live next to the venv (``<venv>/arc-agi-toolkits/<version>``): built on first
use, then reused by every test file (and every later session). A release that cannot be fetched (no network to
the package index) skips the tests that need it, saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: One release per calculator era before the project's own (0.9.1-0.9.2, 0.9.3-0.9.6), and 0.9.3 for the API era it
#: opens. The 0.9.7-0.9.9 era is the venv's own arc-agi 0.9.9: every other capture test runs under it.
ERA_VERSIONS = ("0.9.1", "0.9.3", "0.9.6")
_HOME = Path(sys.prefix) / "arc-agi-toolkits"
_lock = threading.Lock()


def toolkit_env(version: str) -> Path:
    """The folder holding arc-agi ``version`` (built once); skips the test if it cannot be fetched."""
    target = _HOME / version
    marker = target / ".complete"
    with _lock:
        if not marker.exists():
            done = subprocess.run(
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
                timeout=300,
            )
            if done.returncode != 0:
                pytest.skip(f"arc-agi {version} could not be fetched from the package index: {done.stderr[-300:]}")
            marker.touch()
    return target


def env_for(version: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment whose Python imports arc-agi ``version`` (and this checkout's ``ledger`` and ``tests``)."""
    env = dict(os.environ if base is None else base)
    parts = [str(toolkit_env(version)), str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([*parts, *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_python(version: str, args: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` (this venv's) under arc-agi ``version``."""
    return subprocess.run(
        [sys.executable, *args],
        env=env_for(version),
        capture_output=True,
        text=True,
        cwd=ROOT,
        **kwargs,  # type: ignore[call-overload]
    )
