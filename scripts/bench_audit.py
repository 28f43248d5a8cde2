"""Audit figures: `ledger audit` of one card of 100,000 events, with and without re-simulation, and `ledger verify`
with and without its column checks.

The card is real play of the cnt3 test game through the live-capture translator, closed as live capture leaves it,
so every check has real work to do and passes.
"""

from __future__ import annotations

import logging
import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchlib import best, rounds

from ledger import Ledger
from ledger.app.audit import AuditReport, audit_card
from ledger.app.verify import verify_ledger
from ledger.capture.capture import observation
from ledger.domain import chain, document
from ledger.domain.baselines import entry_from_info
from ledger.domain.events import AnyEvent, CardClosed, CardOpened, card_stream
from ledger.domain.projection import apply, new_card
from ledger.domain.scoring import score_card
from ledger.domain.translator import translate
from ledger.resim.resimulate import scan_games
from ledger.rules.postmortem import postmortem
from ledger.rules.text import postmortem_text
from tests.toolkit import ENV_DIR

GAME = "cnt3-0000000a"
T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)


def record_card(led: Ledger, n_events: int, seed: int = 11) -> tuple[str, int]:
    """A closed card of about ``n_events`` events appended; (card id, events)."""
    from arc_agi import LocalEnvironmentWrapper
    from arcengine import GameAction

    quiet = logging.getLogger("bench.audit.toolkit")
    quiet.setLevel(logging.CRITICAL)
    info = scan_games(ENV_DIR)[GAME]
    entries_set = led.record_baselines([entry_from_info(info)], ts=T0)
    baselines = led.baselines(entries_set)
    rng = random.Random(seed)
    card_id = f"bench-audit-{n_events}"
    stream = card_stream(card_id)
    state = new_card(card_id)
    pending: list[AnyEvent] = []
    version = 0

    def emit(evs: list[AnyEvent]) -> None:
        # The translator has already folded ``evs`` into ``state``.
        nonlocal version
        pending.extend(evs)
        if len(pending) >= 5000:
            led.store.append(stream, pending, expected_version=version)
            version += len(pending)
            pending.clear()

    ts = T0
    opened = CardOpened(ts=ts, card_id=card_id, baselines_id=entries_set)
    apply(state, opened)
    emit([opened])
    games = {}
    for guid, s in (("guid-a", 0), ("guid-b", 1)):
        w = LocalEnvironmentWrapper(environment_info=info, logger=quiet, scorecard_id=card_id, seed=s)
        games[guid] = (w, s)
        frame = w.observation_space
        frame.guid = guid  # the wrapper names its own guid; the recording uses the bench's
        emit(translate(state, observation(frame, True, with_reasoning=False, ts=ts), seed=s))
    actions = [GameAction.ACTION1] * 5 + [GameAction.ACTION2] * 4 + [GameAction.ACTION3, GameAction.RESET]
    while state.events < n_events - 1:
        guid = rng.choice(("guid-a", "guid-b"))
        w, s = games[guid]
        ts = ts + timedelta(milliseconds=rng.randint(50, 4000))
        frame = w.step(rng.choice(actions))
        frame.guid = guid
        empty = len(frame.frame) == 0
        obs = observation(frame, False if empty else bool(frame.full_reset), with_reasoning=False, ts=ts)
        emit(translate(state, obs, seed=s))
    doc = score_card(state, baselines)
    closed = CardClosed(ts=ts + timedelta(seconds=1), reason="explicit", document_sha256=document.sha256(doc))
    apply(state, closed)
    pending.append(closed)
    stored = led.store.append(stream, pending, expected_version=version)
    led.save_snapshot(card_id, state, stored[-1].version, stored[-1].seq)
    return card_id, stored[-1].version


def run(quick: bool) -> list[str]:
    n = 5_000 if quick else 100_000
    repeat = 1 if quick else 3
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "audit.sqlite"
        with Ledger.open(path) as led:
            took, (card_id, events) = best(lambda: record_card(led, n), 1)
            lines.append(f"card of {events:,} events recorded from real play in {took:.1f} s")

        def audit(env: Path | None) -> AuditReport:
            with Ledger.open(path) as led:
                rep = audit_card(led, card_id, environments=env)
                assert rep.card is not None and rep.doc is not None
                postmortem_text(postmortem(rep.card, rep.doc))
                rep.to_json()
                return rep

        secs, rep = best(lambda: audit(None), repeat)
        assert rep.ok, [c.message for c in rep.checks]
        lines.append(
            f"ledger audit, {events:,}-event card (integrity, consistency, lifecycle, post-mortem, JSON): "
            f"{secs:.2f} s (goal < 2 s) = {events / secs:,.0f} events/s"
        )
        secs, rep = best(lambda: audit(ENV_DIR), 1)
        assert rep.ok, [c.message for c in rep.checks]
        resim = rep.checks[2].details
        lines.append(
            f"ledger audit --environments (adds re-simulation of {resim['inputs']:,} inputs against the game code): "
            f"{secs:.2f} s"
        )

        def verify(checked: bool = True) -> float:
            original = chain.column_problem
            if not checked:
                chain.column_problem = lambda row: None  # type: ignore[assignment]
            try:
                with Ledger.open(path, readonly=True) as led:
                    secs, vrep = best(lambda: verify_ledger(led.store), 1)
                    assert vrep.ok
                    return secs
            finally:
                chain.column_problem = original

        secs = rounds(repeat, {"checked": verify, "unchecked": lambda: verify(False)})
        with Ledger.open(path, readonly=True) as led:
            stored = led.store.count()
        lines.append(
            f"ledger verify of the same ledger ({stored:,} events): {secs['checked']:.2f} s with every column's "
            f"type and shape checked, {secs['unchecked']:.2f} s without (x{secs['checked'] / secs['unchecked']:.2f})"
        )
    return lines
