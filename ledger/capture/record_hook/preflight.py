"""Before ``ledger record`` runs a command: can the Python that will run it load the ledger (see docs/record.md)?"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledger.errors import InputError

_PYTHON_NAME = re.compile(r"^(python|pypy)[0-9.]*w?(\.exe)?$")
#: Run by the candidate interpreter: its ``sitecustomize`` (the hook) has already put the ledger's paths on sys.path.
_PROBE = (
    "import sys\n"
    "print(sys.executable or '?', sys.version.split()[0], sep='\\t')\n"
    "if not hasattr(sys.modules.get('sitecustomize'), 'NotRecorded'): sys.exit(%d)\n"
    "import ledger.capture.record_hook.child\n"
)
#: The probe's status when the hook itself was not loaded (``-I``, ``-E``, ``-S``: PYTHONPATH or site ignored).
_NO_HOOK = 86
#: ``env`` options whose value is the next word.
_ENV_VALUED = ("-u", "--unset", "-C", "--chdir")
#: Interpreter options whose value is the next word.
_VALUED = ("-W", "-X", "--check-hash-based-pycs")


class InterpreterRefused(InputError):
    """The command's Python cannot load the ledger: nothing was run."""


@dataclass(frozen=True, slots=True)
class Interpreter:
    """The Python a command runs under, as the command names it and as found on PATH (``path``)."""

    named: str
    path: str
    #: The interpreter's own options, as the command gives them (before the script, ``-m`` or ``-c``).
    flags: tuple[str, ...] = ()
    #: What runs the interpreter in the command (``env -i NAME=VALUE``): the check runs it the same way.
    prefix: tuple[str, ...] = ()


def python_flags(args: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    i = 0
    while i < len(args):
        w = args[i]
        if not w.startswith("-") or w in ("-", "--") or w[1:2] in ("c", "m"):
            break
        out.append(w)
        if w in _VALUED and i + 1 < len(args):
            out.append(args[i + 1])
            i += 1
        i += 1
    return tuple(out)


def interpreter_of(command: Sequence[str], env: Mapping[str, str]) -> Interpreter | None:
    if command and os.path.basename(command[0]) == "env":  # `env [-i] [NAME=VALUE]... python ...`
        i = 1
        while i < len(command) and (command[i].startswith("-") or "=" in command[i]):
            i += 2 if command[i] in _ENV_VALUED else 1
        inner = interpreter_of(command[i:], env) if i < len(command) else None
        return dataclasses.replace(inner, prefix=(*command[:i], *inner.prefix)) if inner else None
    exe = shutil.which(command[0], path=env.get("PATH"))
    if exe is None:
        return None
    if _PYTHON_NAME.match(os.path.basename(command[0])):
        return Interpreter(command[0], exe, python_flags(command[1:]))
    try:
        with open(exe, "rb") as f:
            head = f.readline(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].decode("utf-8", "replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if w not in ("-S", "-") and not w.startswith("--")]  # env's own -S splits
    if not words or not _PYTHON_NAME.match(os.path.basename(words[0])):
        return None
    found = shutil.which(words[0], path=env.get("PATH"))
    return Interpreter(words[0], found, python_flags(words[1:])) if found else None


def check_interpreter(command: Sequence[str], env: Mapping[str, str]) -> None:
    """Raise :class:`InterpreterRefused`, naming both interpreters, if ``command``'s Python cannot load the ledger."""
    interp = interpreter_of(command, env)
    if interp is None:
        return  # not a Python command: each Python it starts is checked when it creates an Arcade
    try:
        done = subprocess.run(
            [*interp.prefix, interp.path, *interp.flags, "-c", _PROBE % _NO_HOOK],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InterpreterRefused(
            f"cannot ask {interp.named} ({interp.path}) whether it can load the ledger: {e}"
        ) from e
    if done.returncode == 0:
        return
    first = done.stdout.split("\n", 1)[0].split("\t")
    where = first[0] if len(first) == 2 else interp.path
    theirs = interp.named if where == interp.named else f"{interp.named} ({where})"
    theirs += f", Python {first[1]}," if len(first) == 2 else ""
    if done.returncode == _NO_HOOK:
        options = " ".join(interp.flags)
        raise InterpreterRefused(
            f"the command's interpreter {theirs} does not load ledger record's hook"
            + (
                f" (with {options} it ignores PYTHONPATH or site)"
                if options
                else " (its PYTHONPATH is cleared or ignored)"
            )
            + ": its Arcades would not be recorded. Nothing was run: keep PYTHONPATH and site (no -I, -E, -S or env -i)"
        )
    errors = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
    why = errors[-1] if errors else f"exit status {done.returncode}"
    ours = f"{sys.executable}, Python {sys.version.split()[0]}"
    raise InterpreterRefused(
        f"the command's interpreter {theirs} cannot load the ledger ({why}); "
        f"the ledger runs on {ours}. Nothing was run: run the command with this ledger's interpreter, "
        "or install arc-scorecard-ledger where the command runs"
    )
