"""A Python of another version than the ledger's, for the cases where the command's interpreter cannot load the
ledger: found on the machine, and a venv of it with only the toolkit installed (the ``foreign_python`` fixture of
tests/conftest.py, built once per test session)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

#: The toolkit the second interpreter gets: the version the ledger is tested with.
TOOLKIT = "arc-agi==0.9.9"


def other_python() -> str | None:
    """A Python other than the ledger's (3.12) on which the toolkit installs: 3.13 where the machine has it."""
    found = shutil.which("python3.13")
    candidates = [found] if found else []
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13*/bin/python3.13")))
    for c in candidates:
        ok = subprocess.run([c, "-c", "import sys; assert sys.version_info[:2] == (3, 13)"], capture_output=True)
        if ok.returncode == 0:
            return c
    return None


def make_foreign_venv(base: str, venv: Path) -> str:
    """A venv of ``base`` at ``venv`` with only the toolkit installed (it cannot load the ledger's msgspec); its
    interpreter's path."""
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    pip = subprocess.run([py, "-m", "pip", "install", "-q", TOOLKIT], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr[-2000:]
    return py
