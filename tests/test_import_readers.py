"""Readers added by other packages (entry point group ``ledger.readers``): the example plugin in
``tests/readers_example`` (a real distribution on PYTHONPATH, found by importlib.metadata) reads a REST client's log
of a run played through the real toolkit; ``ledger import`` makes the toolkit's card of it, compares it with a live
card of the same plays, and adds the log's usage to whichever card it is."""

from __future__ import annotations

import json
import os
import random
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger import Ledger
from ledger.domain.events import RunUsage, card_stream, decode
from tests.rest_agent import LEDGER
from tests.toolkit import ENV_DIR, arcade

PLUGIN = Path(__file__).resolve().parent / "readers_example"
GAME = "cnt3-0000000a"


def ledger(*args: str, plugin: Path = PLUGIN) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([*LEDGER, *args], capture_output=True, text=True, env=env, timeout=300)


def play(arc: Any, folder: Path, seed: int) -> tuple[str, Path, dict[str, Any]]:
    """A seeded run on one card, logged as the example plugin's client log: (card id, the log, the toolkit's card)."""
    from arcengine import GameAction

    rng = random.Random(seed)
    card = arc.open_scorecard()
    env = arc.make(GAME, scorecard_id=card)
    lines: list[dict[str, Any]] = [{"card": card}]

    def logged(raw: Any, action: int, x: int | None = None, y: int | None = None) -> None:
        lines.append(
            {
                "ts": datetime.now(UTC).isoformat(),
                "game": raw.game_id,
                "guid": raw.guid,
                "action": action,
                "x": x,
                "y": y,
                "state": raw.state.name,
                "levels": raw.levels_completed,
                "full_reset": bool(raw.full_reset),
                "empty": len(raw.frame) == 0,
            }
        )

    logged(env.observation_space, 0)  # Arcade.make's RESET: the play's start
    for _ in range(40):
        a = rng.choice([0, 1, 1, 2, 3, 4, 5, 6, 7]) if env.observation_space.state.name != "GAME_OVER" else 0
        if a == 6:
            x, y = rng.randint(0, 63), rng.randint(0, 63)
            logged(env.step(GameAction.ACTION6, data={"x": x, "y": y}), 6, x, y)
        else:
            logged(env.step(GameAction.from_id(a)), a)
    lines.append({"tokens": 12345, "cost": 0.5, "model": "m-1"})
    expected = json.loads(arc.get_scorecard(card).model_dump_json())
    arc.close_scorecard(card)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "run.client.log"
    log.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return card, log, expected


def usage_of(db: Path, card: str) -> list[RunUsage]:
    with Ledger.open(db) as led:
        return [e for e in (decode(b) for b in led.store.read_bodies(card_stream(card))[0]) if type(e) is RunUsage]


def test_a_plugin_reader_makes_the_toolkits_card_and_its_usage(tmp_path: Path) -> None:
    card, log, expected = play(arcade(ENV_DIR), tmp_path / "logs", 1)
    db = tmp_path / "l.sqlite"
    r = ledger("--db", str(db), "import", str(log), "--environments", str(ENV_DIR))
    assert r.returncode == 0 and r.stdout.startswith(f"imported          {card}: 1 file, 41 lines"), (
        r.stdout,
        r.stderr,
    )
    r = ledger("--db", str(db), "export", card)
    got = json.loads(r.stdout)
    # The toolkit's document but for the tags (the log names none; the card has the reader's).
    assert got.pop("tags") == ["reader:client-log", "rest-client"]
    assert got == {k: v for k, v in expected.items() if k != "tags"}
    (u,) = usage_of(db, card)
    assert (u.total_tokens, u.cost, u.model, u.folder) == (12345, 0.5, "m-1", "client-log:run.client.log")
    # Again: the card is there; nothing is written twice.
    r = ledger("--db", str(db), "import", str(log))
    assert r.returncode == 0 and "already imported" in r.stdout and len(usage_of(db, card)) == 1, r.stdout
    # Without the plugin, the same file is refused, naming the formats the ledger reads.
    r = ledger("--db", str(tmp_path / "m.sqlite"), "import", str(log), plugin=tmp_path)
    assert r.returncode == 2 and "not a .jsonl recording. ledger import reads: " in r.stderr, r.stderr


def test_a_plugin_readers_log_of_a_live_captured_run_gives_that_card_its_usage(tmp_path: Path) -> None:
    db = tmp_path / "live.sqlite"
    with Ledger.open(db) as led:
        arc = arcade(ENV_DIR)
        capture = led.attach(arc)
        card, log, _ = play(arc, tmp_path / "logs", 2)
        capture.detach()
    before = ledger("--db", str(db), "export", card).stdout
    r = ledger("--db", str(db), "import", str(log))
    assert r.returncode == 0 and f"same card         {card}" in r.stdout, (r.stdout, r.stderr)
    assert f"its usage attached to card {card}: 12345 tokens" in r.stderr
    assert ledger("--db", str(db), "export", card).stdout == before and len(usage_of(db, card)) == 1
    assert ledger("--db", str(db), "audit", card).returncode == 0


def test_a_plugin_that_does_not_load_or_fails_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    (broken / "broken_reader-0.1.dist-info").mkdir(parents=True)
    (broken / "broken_reader-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-reader\n")
    (broken / "broken_reader-0.1.dist-info" / "entry_points.txt").write_text(
        "[ledger.readers]\nbroken = broken_reader:Nowhere\n"
    )
    (broken / "broken_reader.py").write_text("x = 1\n")
    log = tmp_path / "a.client.log"
    log.write_text("{}\n")
    db = tmp_path / "l.sqlite"
    r = ledger("--db", str(db), "import", str(log), plugin=broken)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "the reader broken (broken_reader:Nowhere) does not load: AttributeError" in r.stderr
    # The example reader on a log it cannot read: refused, one line, no card.
    r = ledger("--db", str(db), "import", str(log))
    assert r.returncode == 2 and "the reader client-log failed: KeyError: 'card'" in r.stdout + r.stderr, r
    assert "Traceback" not in r.stderr
    with Ledger.open(db) as led:
        assert led.card_ids() == []
