"""The one checked writer of every output file or folder: one line and exit 2 on failure, nothing half-written."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.errors import InputError


class OutputError(InputError):
    """An output path that cannot be written (nothing was written there)."""


@contextmanager
def checked_output(out: str | os.PathLike[str]) -> Iterator[None]:
    try:
        yield
    except OSError as e:
        reason = "it is a folder (give a file name)" if e.errno == errno.EISDIR else e.strerror or str(e)
        raise OutputError(f"cannot write {os.fspath(out)}: {reason}") from None


def check_writable(out: str | None) -> None:
    """Refuse, before any work, an output file that cannot be made: a folder, or one in a folder that does not exist
    (None or ``-``: standard output)."""
    if out is None or out == "-":
        return
    path = Path(out)
    if path.is_dir():
        raise OutputError(f"cannot write {out}: it is a folder (give a file name)")
    if not path.parent.is_dir():
        raise OutputError(f"cannot write {out}: folder {path.parent} does not exist")


def write_text_file(text: str, out: str) -> None:
    """Write ``text`` to ``out`` atomically, keeping its mode (a symlink's target replaced, a device written to)."""
    with checked_output(out):
        _write_file(text, out)


def _write_file(data: str, out: str) -> None:
    try:
        st: os.stat_result | None = os.stat(out)  # follows links, /dev/stdout's magic one too
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"cannot write {out}: it is a folder (give a file name)")
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(out, "w", encoding="utf-8") as f:
            f.write(data)
        return
    target = Path(os.path.realpath(out))  # through every symbolic link: the link stays, its target is written
    if not target.parent.is_dir():
        raise OutputError(f"cannot write {out}: folder {target.parent} does not exist")
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    # The only way to read the umask is to set it; put it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
