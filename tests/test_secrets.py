"""API keys given to the toolkit are never stored and never printed: only a salted fingerprint is kept.

The key is grepped for (as text, hex and base64) in every file of the ledger (the database and its -wal/-shm,
while it is open and after it is closed), in a copy of it, in a ledger the toolkit's recordings were imported
into, and in the output of every command that prints what the ledger holds.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli import cli
from ledger.domain.events import CardOpened, card_stream, decode
from tests.toolkit import arcade, step


def forms(key: str) -> list[bytes]:
    raw = key.encode()
    return [raw, raw.hex().encode(), base64.b64encode(raw), key.encode("utf-16-le")]


def assert_absent(key: str, blob: bytes, where: str) -> None:
    for f in forms(key):
        assert f not in blob, f"{where} holds the API key ({f[:12]!r}...)"


def ledger_files(folder: Path) -> bytes:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    assert files
    return b"".join(p.read_bytes() for p in files)


def run(db: Path, *args: str) -> str:
    r = CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def play(arc, led: Ledger) -> list[str]:
    """Three cards: closed, open, and the default card ``make`` opens without a scorecard id."""
    led.attach(arc)
    closed = arc.open_scorecard(tags=["secret-test"], opaque={"agent": "a"})
    env = arc.make("cnt3", scorecard_id=closed, seed=1, save_recording=True)
    for a in (1, 1, 1, 2, 0, 1, 3, 0):
        step(env, a)
    arc.close_scorecard(closed)
    still_open = arc.open_scorecard()
    step(arc.make("wkex", scorecard_id=still_open, save_recording=True), 1)
    default_env = arc.make("clk2", save_recording=True)
    step(default_env, 6, 17, 25)
    return [closed, still_open, default_env.scorecard_id]


def check_fingerprints(led: Ledger, key: str, cards: list[str]) -> None:
    fps = []
    for card in cards:
        opened = decode(led.store.read_stream(card_stream(card))[0].body)
        assert isinstance(opened, CardOpened)
        algo, salt, digest = (opened.api_key_fingerprint or "").split("$")
        # A fingerprint of this very key (so "was this card played with key K?" can be answered) ...
        assert algo == "sha256" and len(salt) == 16
        assert hashlib.sha256((salt + key).encode()).hexdigest() == digest
        fps.append(opened.api_key_fingerprint)
    # ... salted per card: equal keys do not give equal fingerprints.
    assert len(set(fps)) == len(fps)


@pytest.mark.parametrize("given", ["argument", "environment"])
def test_api_key_never_stored_nor_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    key = f"arc-{secrets.token_hex(16)}"
    monkeypatch.chdir(tmp_path)  # the toolkit writes recordings/ under the working folder
    rec = tmp_path / "recordings"
    if given == "environment":
        monkeypatch.setenv("ARC_API_KEY", key)
        arc = arcade(recordings_dir=str(rec))
    else:
        arc = arcade(arc_api_key=key, recordings_dir=str(rec))
    assert arc.arc_api_key == key
    folder = tmp_path / "ledger"
    folder.mkdir()
    db = folder / "ledger.sqlite"
    with Ledger.open(db) as led:
        cards = play(arc, led)
        check_fingerprints(led, key, cards)
        assert (folder / "ledger.sqlite-wal").exists()
        assert_absent(key, ledger_files(folder), "the open ledger (db, -wal, -shm)")

    outputs = [run(db, "cards"), run(db, "cards", "--json"), run(db, "verify", "--json")]
    for card in cards:
        outputs += [
            run(db, "export", card),
            run(db, "export", card, "--indent", "2"),
            run(db, "replay", card),
            run(db, "replay", card, "--json"),
            run(db, "audit", card),
        ]
    out_file = tmp_path / "card.json"
    run(db, "export", cards[0], "-o", str(out_file))
    outputs.append(out_file.read_text())
    copy = tmp_path / "copy" / "copy.sqlite"
    copy.parent.mkdir()
    outputs.append(run(db, "copy", "--to", str(copy)))
    for i, text in enumerate(outputs):
        assert_absent(key, text.encode(), f"command output #{i}")
    assert_absent(key, ledger_files(folder), "the closed ledger")
    assert_absent(key, ledger_files(copy.parent), "the copied ledger")
    with Ledger.open(copy) as led:
        check_fingerprints(led, key, cards)

    # The toolkit's own recordings, imported into another ledger: no key there either.
    assert list(rec.rglob("*.jsonl"))
    imported = tmp_path / "imported" / "imported.sqlite"
    imported.parent.mkdir()
    outputs = [run(imported, "import", str(rec)), run(imported, "cards", "--json")]
    outputs += [run(imported, "export", card) for card in cards]
    for text in outputs:
        assert_absent(key, text.encode(), "import output")
    assert_absent(key, ledger_files(imported.parent), "the imported ledger")
