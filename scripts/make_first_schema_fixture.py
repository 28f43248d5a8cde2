"""Build tests/fixtures/first_schema.sqlite: a ledger written with the FIRST schema revision (0001) only.

    .venv/bin/python scripts/make_first_schema_fixture.py            # rewrites the fixture in tests/fixtures/
    .venv/bin/python scripts/make_first_schema_fixture.py --out DIR  # builds it somewhere else

The schema is created with ``alembic upgrade 0001`` (as a ledger of that release had it: the events table and its
append-only triggers, no snapshots table, no CHECK constraints), then real toolkit games are played OFFLINE with the
ledger attached: a closed card (three games: level completions, a level reset, a lost game, an action after the
end, a click game) and a card left open, the first one opened with an API key (its salted fingerprint is stored).

Reproducible: the clock, the toolkit's uuids and the fingerprint salt are fixed, so every build stores the same
events with the same hashes. Beside the database it writes ``first_schema.events.json`` (seq, stream, version,
type, hash of every event) and ``first_schema.exports.json`` (card id -> the JSON the toolkit reported), which
tests/test_schema_upgrade.py compares against after upgrading a copy to the current schema.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIRST_REVISION = "0001"
NAME = "first_schema"


class _Clock(datetime):
    """datetime whose now() ticks one millisecond per call from a fixed instant."""

    _t = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        _Clock._t += timedelta(milliseconds=1)
        return _Clock._t


class _Salt:
    @staticmethod
    def token_hex(n: int = 8) -> str:
        return "5a" * n


def _fix_randomness() -> None:
    import ledger.api

    import ledger.capture

    rng = random.Random(20261201)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)  # type: ignore[assignment]
    ledger.capture.datetime = _Clock  # type: ignore[attr-defined,misc]
    ledger.api.datetime = _Clock  # type: ignore[attr-defined,misc]
    ledger.capture.secrets = _Salt  # type: ignore[attr-defined,assignment]


def build(out: Path) -> tuple[list[list[Any]], dict[str, str]]:
    """Write ``first_schema.sqlite`` and its two listings into ``out``; return (events listing, exports)."""
    _fix_randomness()
    from alembic import command
    from alembic.config import Config

    from ledger import Ledger
    from ledger.store.backends import open_store
    from ledger.store.base import migrations_dir
    from tests.toolkit import arcade, step

    db = out / f"{NAME}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    store = open_store(str(db))
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, FIRST_REVISION)
    assert store.revision() == FIRST_REVISION
    led = Ledger(store)  # not Ledger.open: that would migrate to head

    arc = arcade(arc_api_key="fixture-key-not-a-secret")
    led.attach(arc)
    exports = {}
    closed = arc.open_scorecard(tags=["fixture"], opaque={"agent": "first-schema"})
    cnt3 = arc.make("cnt3", scorecard_id=closed, seed=1)
    for a in (1, 2, 1, 1, 0, 1, 1, 1, 2, 1, 3, 2, 0):  # odd seed: level 1 needs 3 presses; ACTION3 loses
        step(cnt3, a)
    wkex = arc.make("wkex", scorecard_id=closed, seed=0)
    for a in (2, 2, 1, 2, 1, 1, 2, 0, 1):  # WIN after three presses, then an ignored action and a new play
        step(wkex, a)
    clk2 = arc.make("clk2", scorecard_id=closed, seed=2)
    for x, y in ((0, 0), (20, 28), (44, 44), (9, 9)):
        step(clk2, 6, x, y)
    exports[closed] = arc.close_scorecard(closed).model_dump_json()
    still_open = arc.open_scorecard()
    env = arc.make("shrt", scorecard_id=still_open, seed=0)
    for a in (1, 2, 1):
        step(env, a)
    exports[still_open] = arc.get_scorecard(still_open).model_dump_json()

    listing = [[r.seq, r.stream, r.version, r.type, r.hash] for r in store.scan()]
    store.close()
    # One self-contained file: fold the WAL into the database (the fixture is committed without -wal/-shm).
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    rows = ",\n".join(" " + json.dumps(row) for row in listing)
    (out / f"{NAME}.events.json").write_text(f"[\n{rows}\n]\n")
    (out / f"{NAME}.exports.json").write_text(json.dumps(exports, indent=1, sort_keys=True) + "\n")
    return listing, exports


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures", help="folder to write into")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    listing, exports = build(args.out)
    print(f"{args.out / (NAME + '.sqlite')}: {len(listing)} events, {len(exports)} cards, schema {FIRST_REVISION}")


if __name__ == "__main__":
    main()
