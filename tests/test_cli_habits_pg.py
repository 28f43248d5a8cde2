"""The CLI habits on the real PostgreSQL server: card id prefixes in cards/export/events/replay/close, --until VERSION,
`ledger cards` filters, heads and a card left open, through the `ledger` command line (Click's runner)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger import Ledger
from tests.cli_run import append_open_card, import_copies, no_traceback
from tests.cli_run import in_process as ledger

pytestmark = pytest.mark.postgres


def test_prefixes_events_cards_and_heads_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    import_copies(pg_url, tmp_path / "rec", ["run-a1", "run-a2", "run-b"], shift_hours=[2, 1, 3])
    append_open_card(pg_url, "run_%x", datetime.now(UTC) - timedelta(hours=1), tags=["gpu"])
    db = ["--db", pg_url]
    # prefixes
    full = ledger(*db, "export", "run-b")
    assert full.returncode == 0
    assert ledger(*db, "export", "run-").returncode == 2
    r = ledger(*db, "events", "run-a")
    assert (
        r.returncode == 2 and r.stderr.strip() == "Error: 'run-a' is ambiguous: 2 cards start with it: run-a1, run-a2"
    )
    assert ledger(*db, "export", "run-b"[:5]).stdout == full.stdout
    assert ledger(*db, "export", "run%").returncode == 1  # LIKE wildcards are plain characters
    assert ledger(*db, "export", "run_").stdout == ledger(*db, "export", "run_%x").stdout
    r = ledger(*db, "replay", "run-a2")
    assert r.returncode == 0 and "card run-a2" in r.stdout
    # events and --until VERSION
    r = ledger(*db, "events", "run-b", "--json")
    rows = json.loads(r.stdout)["events"]
    assert [e["version"] for e in rows] == list(range(1, len(rows) + 1)) and rows[0]["seq"] > 1
    with Ledger.open(pg_url, readonly=True) as led:
        want = led.export("run-b", until=rows[4]["seq"])
    assert ledger(*db, "export", "run-b", "--until", "5").stdout == want + "\n"
    r = ledger(*db, "export", "run-b", "--until", str(len(rows) + 1))
    no_traceback(r)
    assert r.returncode == 2 and f"has versions 1..{len(rows)}" in r.stderr
    # cards: opening order, tags, filters, the open card shown as the toolkit would have closed it
    js = json.loads(ledger(*db, "cards", "--json").stdout)
    assert [c["card_id"] for c in js] == ["run-b", "run-a1", "run-a2", "run_%x"]
    assert js[3]["tags"] == ["gpu"] and js[3]["close_reason"] == "idle" and js[3]["lapsed"] is True
    assert [c["card_id"] for c in json.loads(ledger("cards", *db, "--json", "--tag", "gpu").stdout)] == ["run_%x"]
    assert [c["card_id"] for c in json.loads(ledger(*db, "cards", "--json", "--since", "90m").stdout)] == [
        "run-a2",
        "run_%x",
    ]
    r = ledger(*db, "close", "run_", "--reason", "abandoned")
    assert r.returncode == 0 and r.stdout.startswith("closed card run_%x (abandoned)")
    assert json.loads(ledger(*db, "cards", "--json", "--closed").stdout)[3]["lapsed"] is False
    # heads
    head = json.loads(ledger(*db, "verify", "--json").stdout)["head"]
    assert ledger(*db, "verify", "--expect-head", head).returncode == 0
    r = ledger(*db, "audit", "run-b", "--expect-head", head)
    assert r.returncode == 0 and "is the ledger's head (as `ledger verify` prints it)" in r.stdout
