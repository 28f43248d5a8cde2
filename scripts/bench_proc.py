"""One measured ``ledger`` process for the bench scripts: its own CPU seconds and peak resident memory.

The command runs as the child of a small launcher, not of the bench: a child started from a process (fork, or
the vfork that ``subprocess`` uses) keeps that process's resident size as its own peak, so a child of a bench that
holds a large ledger or recording would report the bench's size as its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LEDGER = str(Path(sys.executable).with_name("ledger"))

#: Runs a command and prints its CPU seconds and peak resident kB on stderr's last line.
_LAUNCH = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:])\n"
    "_, status, u = os.wait4(p.pid, 0)\n"
    "sys.stderr.write(f'\\nRUSAGE {u.ru_utime + u.ru_stime} {u.ru_maxrss}\\n')\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def measured(*args: str) -> tuple[int, float, float, str]:
    """Run ``ledger ARGS``: (exit code, CPU seconds, peak resident MB of that process alone, stdout)."""
    p = subprocess.run([sys.executable, "-c", _LAUNCH, LEDGER, *args], capture_output=True)
    _, took, kb = p.stderr.decode().rstrip().rsplit("\n", 1)[-1].split()
    return p.returncode, float(took), int(kb) / 1024, p.stdout.decode()
