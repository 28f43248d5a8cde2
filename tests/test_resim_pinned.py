"""What the game-code paths decide is pinned: every card imported from recordings (with and without the game code)
and every audit verdict (with and without it) equals what ``tests/fixtures/resim_pinned.json`` recorded.

The cases are seeded harness runs of the test games (``lsx3`` is a game whose state does not pickle by name),
copies with lines pasted again (the whole search runs), runs cut part-way, and the recordings corpus. Each card is
kept as its events without timestamps, ids numbered by first appearance (a run's guids and card ids are new
uuids each time), so the pin holds what the search and the re-simulation decided: actions, undecided lines, skipped
lines, verdicts and their messages. ``LEDGER_PIN_WRITE=1`` writes the file again (only on purpose: the point is
that speed-ups of the search change nothing it decides); ``LEDGER_PIN_ALL=1`` checks the two slow cases too.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger import Ledger
from ledger.app.audit import audit_card
from ledger.domain.events import card_stream
from ledger.imports.importing import import_recordings
from tests.harness_recorder import environments, run_swarm

pytestmark = pytest.mark.heavy

PIN = Path(__file__).resolve().parent / "fixtures" / "resim_pinned.json"
CORPUS = Path(__file__).resolve().parent / "recordings_corpus"
# (game, seed, actions): games whose frames show every action, frames that never change within a level, the
# ls20-shaped games (one of them with state that pickles only through the game's own module).
RUNS = [
    ("vis5-0000001a", 1, 40),
    ("cnt3-0000000a", 2, 50),
    ("clk2-0000000b", 3, 50),
    ("shrt-0000000e", 4, 30),
    ("lsx2-0000002b", 5, 60),
    ("lsx3-0000003c", 6, 90),
    ("lsx3-0000003c", 7, 60),
]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?")
# sha256 digests: of the recordings' bytes (their timestamps are the run's) and of the hash chain over them.
_SHA = re.compile(r"\b[0-9a-f]{64}\b")


def _canon(text: str) -> str:
    """Ids numbered by first appearance (their 8-character prefixes too), timestamps and sha256 digests out."""
    ids: dict[str, str] = {}
    for u in _UUID.findall(text):
        ids.setdefault(u, f"ID{len(ids)}")
    for u, name in ids.items():
        text = text.replace(u, name).replace(u[:8], name)
    return _SHA.sub("SHA", _TS.sub("TS", text))


def _digest(x: Any) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True).encode()).hexdigest()


def _card(led: Ledger, card: str) -> str:
    out = []
    for e in led.store.read_stream(card_stream(card)):
        d = msgspec.json.decode(e.body)
        if isinstance(d, dict):
            d.pop("ts", None)
            # The release an import assumes is no decision of the search (tests/test_calculators.py pins it).
            d.pop("calculator", None)
            d.pop("calculator_source", None)
        out.append(d)
    return json.dumps(out, sort_keys=True)


def _audit(led: Ledger, card: str, envs: Path | None, decide: bool = True) -> list[Any]:
    report = audit_card(led, card, environments=envs, decide=decide)
    # The lifecycle check reads the run's own timing (its longest gap): not something the game code decides.
    return [[c.name, c.status, c.message, c.details] for c in report.checks if c.name != "lifecycle"]


def _verdicts(audit: list[Any]) -> list[tuple[str, str]]:
    return [(c[0], c[1]) for c in audit]


def _paste(path: Path, rng: random.Random) -> None:
    """Three frame lines pasted again after themselves, just after the last (the benchmarking harness's
    phantom copies, or an edit): lines no action reproduces there, so the whole search runs."""
    lines = path.read_bytes().splitlines(keepends=True)
    frames = [i for i, raw in enumerate(lines) if b'"frame"' in raw and b'"frame": []' not in raw]
    if len(frames) > 8:
        k = rng.choice(frames[4:-3])
        at = datetime.fromisoformat(json.loads(lines[k])["timestamp"])
        copies = [json.loads(raw) for raw in lines[k - 2 : k + 1]]
        lines[k + 1 : k + 1] = [
            (json.dumps({**c, "timestamp": (at + timedelta(microseconds=i + 1)).isoformat()}) + "\n").encode()
            for i, c in enumerate(copies)
        ]
    path.write_bytes(b"".join(lines))


def _cut(path: Path, rng: random.Random) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    keep = rng.randint(len(lines) // 2, len(lines) - 1)
    path.write_bytes(b"".join(lines[:keep]) + lines[keep][: len(lines[keep]) // 2])


#: Cases left out of the suite's run (``LEDGER_PIN_ALL=1`` runs them): the ls20-shaped pasted copies imported
#: without the code, whose audits fail only after every display cell was tried as a click at the pasted line (4,096
#: game steps, a quarter of a minute each); their imports with the code, and every other case, still run.
SLOW = re.compile(r"^lsx3-0000003c-\d+-pasted-frames$")


def pinned(root: Path, only: str = "", skip: re.Pattern[str] | None = None) -> dict[str, Any]:
    """Case name -> its cards and audits, canonical (``only``: the cases whose name it matches, a regex; ``skip``:
    the cases left out)."""
    envs = environments(root / "envs")
    out: dict[str, Any] = {}
    cases: list[tuple[str, Path]] = []
    for game, seed, actions in RUNS:
        rec = root / f"rec-{game}-{seed}"
        run_swarm(rec, [game], seed, env_dir=envs, max_actions=actions)
        (path,) = rec.glob("*.jsonl")
        cases.append((f"{game}-{seed}", rec))
        for what, change in (("pasted", _paste), ("cut", _cut)):
            other = root / f"{what}-{game}-{seed}"
            other.mkdir()
            shutil.copy(path, other / path.name)
            change(other / path.name, random.Random(f"{game}-{seed}-{what}"))
            cases.append((f"{game}-{seed}-{what}", other))
    for d in sorted(CORPUS.iterdir()):
        if d.is_dir() and d.name not in ("expected",):
            cases.append((f"corpus-{d.name}", d))
    for name, folder in cases:
        if not re.search(only, name):
            continue
        for with_code in (False, True):
            if skip is not None and skip.search(f"{name}-{'code' if with_code else 'frames'}"):
                continue
            with Ledger.open(root / f"{name}-{with_code}.sqlite") as led:
                s = import_recordings(led, [folder], environments=envs if with_code else None)
                cards = sorted(led.card_ids())
                entry = {
                    "exit": s.exit_code,
                    "cards": [_card(led, c) for c in cards],
                    "exports": [led.export(c) for c in cards],
                    "audits": [[_audit(led, c, None), _audit(led, c, envs)] for c in cards],
                }
                # The audit's own way (one path of the game through the undecided actions, not every candidate of
                # each) reaches the same verdicts as the search the pin holds.
                for c, (_, searched) in zip(cards, entry["audits"], strict=True):
                    assert _verdicts(_audit(led, c, envs, decide=False)) == _verdicts(searched), (name, c)
            entry = json.loads(_canon(json.dumps(entry).replace(str(root), "ROOT")))
            # The cards and documents as digests (the file stays small), the verdicts in full (a change reads).
            for k in ("cards", "exports"):
                entry[k] = [_digest(c) for c in entry[k]]
            out[f"{name}-{'code' if with_code else 'frames'}"] = entry
    return out


def test_what_the_game_code_paths_decide_is_pinned(tmp_path: Path) -> None:
    every = os.environ.get("LEDGER_PIN_WRITE") == "1" or os.environ.get("LEDGER_PIN_ALL") == "1"
    got = pinned(tmp_path, skip=None if every else SLOW)
    if os.environ.get("LEDGER_PIN_WRITE") == "1":
        PIN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(PIN.read_text())
    left_out = sorted(k for k in want if SLOW.search(k))
    assert sorted(got) == sorted(want) if every else sorted(got) == sorted(set(want) - set(left_out))
    assert len(left_out) == 2 and len(got) >= 62
    for name in sorted(got):
        assert got[name] == want[name], name
    # The pin is not empty: searched, undecided and skipped lines and a resimulation verdict with the code.
    text = json.dumps(want)
    assert '"undecided_actions"' in text and '"import", "WARN"' in text and '"resimulation", "PASS"' in text
