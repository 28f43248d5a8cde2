"""Capture fails closed in every mode, and attaches only to a toolkit it knows.

A write the database refuses reaches the agent as :class:`CaptureError` after the toolkit's own call, in-process
(OFFLINE) and against an ARC server (ONLINE/COMPETITION) alike; a card whose opening was not recorded makes
every later call of it raise, never pass silently. ``Ledger.attach`` refuses an Arcade whose operation mode or
internals it does not know, and an arc-agi release outside the supported range.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from arc_agi import Arcade, OperationMode
from arcengine import GameAction

from ledger import Ledger
from ledger.app.audit import audit_card
from ledger.errors import CaptureError
from ledger.toolkit import arc_adapter, eras
from tests import toolkit
from tests.test_online_capture import API_KEY, _quiet, server

MODES = [OperationMode.OFFLINE, OperationMode.ONLINE, OperationMode.COMPETITION]


@contextmanager
def refused_writes(ledger: Ledger) -> Iterator[None]:
    """The database refuses every write of this process (SQLite's query_only on its writer), then accepts them again."""
    con = ledger.store._write_dbapi()
    con.execute("PRAGMA query_only=ON")
    try:
        yield
    finally:
        con.execute("PRAGMA query_only=OFF")


@contextmanager
def arcade(mode: OperationMode, tmp_path: Path) -> Iterator[tuple[Arcade, Any]]:
    """An Arcade in ``mode`` with no local game files when remote, and whatever holds its cards' truth (the
    OFFLINE Arcade's own manager, or the test server)."""
    if mode == OperationMode.OFFLINE:
        arc = toolkit.arcade()
        yield arc, arc
        return
    with server() as srv:
        yield (
            Arcade(
                arc_api_key=API_KEY,
                arc_base_url=srv.url,
                operation_mode=mode,
                environments_dir=str(tmp_path / "no-games"),
                logger=_quiet,
            ),
            srv,
        )


def only_card(holder: Any) -> str:
    """The id of the only card the toolkit (OFFLINE) or the test server holds."""
    arc = holder if isinstance(holder, Arcade) else holder.arcade
    ids = list(arc.scorecard_manager.scorecards)
    assert len(ids) == 1
    return str(ids[0])


@pytest.fixture(params=MODES, ids=["offline", "online", "competition"])
def attached(request: pytest.FixtureRequest, ledger: Ledger, tmp_path: Path) -> Iterator[tuple[Arcade, Any]]:
    """An Arcade in each mode with the ledger attached, and what holds its cards' truth (see ``arcade``)."""
    with arcade(request.param, tmp_path) as (arc, holder):
        ledger.attach(arc)
        yield arc, holder


def test_a_card_whose_opening_was_not_recorded_fails_every_later_call(
    ledger: Ledger, attached: tuple[Arcade, Any]
) -> None:
    arc, holder = attached
    with refused_writes(ledger), pytest.raises(CaptureError, match="readonly"):
        arc.open_scorecard()
    card = only_card(holder)
    assert not ledger.card_ids()
    # The database accepts writes again; the card's calls still must not pass as if recorded.
    for game in ("cnt3", "clk2"):
        with pytest.raises(CaptureError, match=f"card {card} is not in the ledger"):
            arc.make(game, scorecard_id=card)
    with pytest.raises(CaptureError, match="not in the ledger"):
        arc.close_scorecard(card)
    if holder is not arc:  # the server closed it all the same
        assert card in holder.closes
    assert not ledger.card_ids()


def test_a_close_that_was_not_recorded_raises_and_leaves_the_card_open(
    ledger: Ledger, attached: tuple[Arcade, Any]
) -> None:
    arc, holder = attached
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    assert env is not None
    env.step(GameAction.ACTION1)
    with refused_writes(ledger), pytest.raises(CaptureError, match="readonly"):
        arc.close_scorecard(card)
    c = ledger.load_card(card)
    assert not c.closed and c.total_actions >= 1
    if holder is not arc:
        check = next(x for x in audit_card(ledger, card).checks if x.name == "server")
        assert check.status == "WARN" and "not closed on it" in check.message


def test_every_step_the_database_refused_raised_and_none_was_recorded(ledger: Ledger, tmp_path: Path) -> None:
    with server() as srv:
        arc = Arcade(
            arc_api_key=API_KEY,
            arc_base_url=srv.url,
            operation_mode=OperationMode.ONLINE,
            environments_dir=str(tmp_path / "no-games"),
            logger=_quiet,
        )
        ledger.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("clk2", scorecard_id=card)
        assert env is not None
        raised = 0
        for i in range(12):
            refuse = i % 3 == 1
            try:
                if refuse:
                    with refused_writes(ledger):
                        env.step(GameAction.ACTION6, data={"x": 1, "y": 1})
                else:
                    env.step(GameAction.ACTION6, data={"x": 1, "y": 1})
            except CaptureError:
                raised += 1
        arc.close_scorecard(card)
        doc = srv.closes[card]
    assert raised == 4
    ours = json.loads(ledger.export(card))
    # The server counted 12 clicks; the ledger holds the 8 it was able to record, and says so.
    assert doc["total_actions"] == 12 and ours["total_actions"] == 8
    check = next(x for x in audit_card(ledger, card).checks if x.name == "server")
    assert check.status == "FAIL" and "ledger 8, server 12" in check.message


# -- attaching only to a toolkit the ledger knows -----------------------------------------------------------------


def test_an_unknown_operation_mode_is_refused_never_captured_as_offline(ledger: Ledger) -> None:
    arc = toolkit.arcade()
    # A release whose mode enum spells its values otherwise: the ledger must not guess OFFLINE from it.
    arc.operation_mode = enum.Enum("OperationMode", {"ONLINE": "ONLINE"}).ONLINE
    with pytest.raises(
        CaptureError, match=re.escape("unknown arc_agi operation mode <OperationMode.ONLINE: 'ONLINE'>")
    ):
        ledger.attach(arc)
    assert "make" not in arc.__dict__ and "new_scorecard" not in arc.scorecard_manager.__dict__


def test_an_arcade_without_a_name_capture_reads_is_refused(ledger: Ledger) -> None:
    arc = toolkit.arcade()
    del arc.scorecard_manager.guids
    with pytest.raises(CaptureError, match=r"has no ScorecardManager\.guids"):
        ledger.attach(arc)
    assert "make" not in arc.__dict__


@pytest.mark.parametrize(
    ("version", "era"),
    [
        ("0.9.1", "0.9.1"),
        ("0.9.2", "0.9.2"),
        ("0.9.3", "0.9.3-0.9.5"),
        ("0.9.6", "0.9.6"),
        ("0.9.7", "0.9.7-0.9.9"),
        ("0.9.9.post1", "0.9.7-0.9.9"),
        ("0.9.0", None),
        ("0.9.10", None),
        ("0.10.0", None),
        ("1.0", None),
        ("dev", None),
    ],
)
def test_each_release_has_its_era_and_others_get_the_tested_range(version: str, era: str | None) -> None:
    found = eras.era_of(version)
    assert (found.name if found else None) == era
    problem = arc_adapter.version_problem(version, environ={})
    assert (problem is not None) == (era is None)
    if problem is not None:
        assert problem == (f"arc-agi {version} is installed; live capture is tested with arc-agi 0.9.1-0.9.9", False)
        overridden = arc_adapter.version_problem(version, environ={arc_adapter.OVERRIDE_ENV: "1"})
        assert overridden is not None and overridden[1]


def test_a_later_release_gets_the_message_not_an_attribute_error(ledger: Ledger, monkeypatch, caplog) -> None:
    monkeypatch.setattr(arc_adapter, "installed_version", lambda: "0.10.0")
    monkeypatch.delenv(arc_adapter.OVERRIDE_ENV, raising=False)
    arc = toolkit.arcade()
    with pytest.raises(
        CaptureError, match=r"arc-agi 0\.10\.0 is installed; live capture is tested with arc-agi 0\.9\.1-0\.9\.9"
    ):
        ledger.attach(arc)
    assert "make" not in arc.__dict__
    monkeypatch.setenv(arc_adapter.OVERRIDE_ENV, "1")
    ledger.attach(arc)  # the newest era's adapter, with a warning
    assert "attaching anyway" in caplog.text
    card = arc.open_scorecard()
    toolkit.step(arc.make("cnt3", scorecard_id=card), 1)
    assert ledger.export(card) == arc.get_scorecard(card).model_dump_json()


def test_the_installed_toolkit_is_in_the_range() -> None:
    version = arc_adapter.installed_version()
    assert version is not None and arc_adapter.version_problem(version, environ={}) is None
