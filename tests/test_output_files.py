"""`export -o`: atomic writes through symbolic links, devices and FIFOs written in place, the umask's mode, and a
one-line error (never a traceback) for a folder, a read-only folder or /proc.

The program runs in its own process where that process's file descriptors, umask or capabilities are the point
(/dev/stdout, a FIFO read as it is written, the umask, a root without CAP_DAC_OVERRIDE); elsewhere through
Click's runner, which writes the same files."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from tests.cli_run import LEDGER, import_copies, in_process, ledger, no_traceback


@pytest.fixture(scope="module")
def card_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """A ledger with one imported card: (db, card id, its export)."""
    root = tmp_path_factory.mktemp("out")
    db = str(root / "l.sqlite")
    import_copies(db, root / "rec", ["card-one"])
    r = in_process("--db", db, "export", "card-one")
    assert r.returncode == 0
    return db, "card-one", r.stdout


def test_export_to_a_symbolic_link_writes_its_target_and_keeps_the_link(card_db, tmp_path: Path) -> None:
    db, card, text = card_db
    target = tmp_path / "real" / "card.json"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(os.path.relpath(target, tmp_path))
    r = in_process("--db", db, "export", card, "-o", str(link))
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and target.read_text() == text
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # an existing file keeps its mode
    assert [p.name for p in target.parent.iterdir()] == ["card.json"]  # no temporary file left behind


def test_a_dangling_link_creates_its_target(card_db, tmp_path: Path) -> None:
    db, card, text = card_db
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "new.json")
    r = in_process("--db", db, "export", card, "-o", str(link))
    assert r.returncode == 0 and link.is_symlink() and (tmp_path / "new.json").read_text() == text


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_mode_the_umask_gives(card_db, tmp_path: Path, umask: int, mode: int) -> None:
    db, card, _ = card_db
    out = tmp_path / "card.json"
    r = subprocess.run(
        [LEDGER, "--db", db, "export", card, "-o", str(out)],
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.umask(umask),
    )
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_dev_stdout_is_written_not_replaced(card_db, tmp_path: Path) -> None:
    # Run as root in CI: replacing /dev/stdout with a regular file would break the whole machine's /dev.
    db, card, text = card_db
    before = os.lstat("/dev/stdout")
    r = ledger("--db", db, "export", card, "-o", "/dev/stdout")
    assert r.returncode == 0, r.stderr
    assert r.stdout == text
    after = os.lstat("/dev/stdout")
    assert stat.S_ISLNK(after.st_mode) and after.st_ino == before.st_ino


def test_a_fifo_is_written_in_place(card_db, tmp_path: Path) -> None:
    db, card, text = card_db
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    r = ledger("--db", db, "export", card, "-o", str(fifo))
    reader.join(timeout=30)
    assert r.returncode == 0, r.stderr
    assert got == [text] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_an_existing_folder_is_refused_in_one_line(card_db, tmp_path: Path) -> None:
    db, card, _ = card_db
    r = in_process("--db", db, "export", card, "-o", str(tmp_path))
    no_traceback(r)
    assert r.returncode == 2
    assert r.stderr.strip() == f"Error: cannot write {tmp_path}: it is a folder (give a file name)"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path", ["/proc/ledger-card.json", "/proc/version", "/proc/self/status", "/sys/card.json"])
def test_kernel_filesystems_are_refused_in_one_line(card_db, path: str) -> None:
    db, card, _ = card_db
    r = in_process("--db", db, "export", card, "-o", path)
    no_traceback(r)
    assert r.returncode == 2 and r.stderr.startswith(f"Error: cannot write {path}: "), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_missing_folder_is_refused(card_db, tmp_path: Path) -> None:
    db, card, _ = card_db
    r = in_process("--db", db, "export", card, "-o", str(tmp_path / "no" / "such" / "card.json"))
    no_traceback(r)
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_a_read_only_folder_is_refused(card_db, tmp_path: Path) -> None:
    # Root writes anywhere; without CAP_DAC_OVERRIDE (setpriv) root obeys the folder's mode as any user does.
    db, card, _ = card_db
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.fail("running as root needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        drop = "-dac_override,-dac_read_search"
        prefix = [setpriv, "--bounding-set", drop, "--inh-caps", drop]
    try:
        r = subprocess.run(
            [*prefix, LEDGER, "--db", db, "export", card, "-o", str(ro / "card.json")], capture_output=True, text=True
        )
        no_traceback(r)
        assert r.returncode == 2, r.stdout + r.stderr
        assert r.stderr.strip() == f"Error: cannot write {ro / 'card.json'}: Permission denied"
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)
