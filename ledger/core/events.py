"""The event vocabulary: every fact the ledger records, as small frozen msgspec Structs.

Events are encoded once (JSON, via msgspec) and the encoded bytes are what the log stores and hashes.
The tag of each Struct is the value of the log's ``type`` column.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

#: The card states the toolkit reports (``arcengine.GameState`` values).
State = Literal["NOT_PLAYED", "NOT_FINISHED", "WIN", "GAME_OVER"]

#: Why a card was closed.
CloseReason = Literal["explicit", "idle", "max_open", "end_of_import"]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=True):
    """Base of every event: ``ts`` is when the toolkit observed it (UTC)."""

    ts: datetime


class CardOpened(Event, tag="card_opened", kw_only=True):
    """A scorecard was opened (``Arcade.open_scorecard``/``create_scorecard`` or the first ``make``).

    ``api_key_fingerprint`` is a salted hash of the API key the card was opened with; the key itself is never
    stored. ``baselines_id`` names the baseline set (see :class:`BaselinesRecorded`) the card is scored under:
    the toolkit's ``available_environments`` at the time the card was opened.
    """

    card_id: str
    source_url: str | None = None
    tags: list[str] | None = None
    opaque: Any = None
    competition_mode: bool | None = None
    api_key_fingerprint: str | None = None
    baselines_id: str | None = None


class PlayStarted(Event, tag="play_started", kw_only=True):
    """A full reset: the toolkit's ``Scorecard.new_play``. A new play of ``game_id`` begins for ``guid``.

    arcengine performs a full reset on a RESET sent before any action of the current level (or after a WIN);
    it is not counted as an action or a reset. One guid can carry several plays.
    """

    game_id: str
    guid: str
    seed: int | None = None


class ActionTaken(Event, tag="action_taken", kw_only=True):
    """ACTION1..ACTION7 answered with a frame: one action counted on the guid's current play.

    ``x``/``y`` are set for complex actions (ACTION6). ``levels_completed`` and ``state`` are what the game
    reported after the action. ``reasoning`` is kept only when the user opted in.
    """

    game_id: str
    guid: str
    action: int
    x: int | None = None
    y: int | None = None
    levels_completed: int
    state: State
    reasoning: Any = None


class ActionIgnored(Event, tag="action_ignored", kw_only=True):
    """An action answered with an empty frame (sent after GAME_OVER or WIN, before a RESET).

    The toolkit counts nothing for it; it is kept for the post-mortem (actions wasted after the end).
    """

    game_id: str
    guid: str
    action: int
    state: State


class LevelReset(Event, tag="level_reset", kw_only=True):
    """A RESET that restarted the current level (``Scorecard.reset``): counts one reset and one action.

    The play's state does not go back: a play that was GAME_OVER stays GAME_OVER on the scorecard.
    """

    game_id: str
    guid: str
    levels_completed: int
    state: State


class LevelCompleted(Event, tag="level_completed", kw_only=True):
    """The play's ``levels_completed`` changed to ``levels_completed`` after ``actions`` actions in the play.

    This is one entry of the toolkit's ``Card.actions_by_level``.
    """

    game_id: str
    guid: str
    levels_completed: int
    actions: int


class GameOver(Event, tag="game_over", kw_only=True):
    """The game reported GAME_OVER: the play's scorecard state becomes GAME_OVER."""

    game_id: str
    guid: str


class Win(Event, tag="win", kw_only=True):
    """The game reported WIN: the play's scorecard state becomes WIN and the play counts as completed."""

    game_id: str
    guid: str


class CardClosed(Event, tag="card_closed", kw_only=True):
    """The card was closed; nothing after this counts on it.

    ``reason``: ``explicit`` (``close_scorecard``), ``idle`` (no update for STALE_MINUTES), ``max_open`` (open for
    MAX_OPEN_FOR_MINUTES) or ``end_of_import`` (an imported recording ended). ``document_sha256`` is the hash of
    the scorecard document the ledger produced at close, so an audit can show the rebuilt card still matches it.
    """

    reason: CloseReason
    document_sha256: str | None = None


class BaselineEntry(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=False):
    """One game's scoring data as the toolkit's ``EnvironmentInfo`` carries it."""

    game_id: str
    title: str | None = None
    baseline_actions: list[int] | None = None
    tags: list[str] | None = None
    private_tags: list[str] | None = None
    level_tags: list[list[str]] | None = None


class BaselinesRecorded(Event, tag="baselines_recorded", kw_only=True):
    """A content-addressed baseline set: ``set_id`` is the sha256 of its canonical entries."""

    set_id: str
    entries: list[BaselineEntry]


class LabelSet(Event, tag="label_set", kw_only=True):
    """A human label now points at a baseline set (``ledger baselines import --label``); stream ``label:<label>``."""

    label: str
    set_id: str


class RecordingImported(Event, tag="recording_imported", kw_only=True):
    """How far ``ledger import`` has read one recording file of an imported card (written with its events).

    ``file`` is the file's name in the card's folder; ``offset`` the bytes consumed (complete lines only) and
    ``lines`` the lines consumed, ``skipped`` of them not imported (bad lines). ``tail_sha256`` hashes the last
    4096 bytes before ``offset`` so a rewritten file is told apart from one that grew; ``game_state`` is the game's
    state after the last line, which says whether the next action (without frame data) got an empty frame.
    ``ts`` is the last line's timestamp.
    """

    file: str
    offset: int
    lines: int
    skipped: int = 0
    tail_sha256: str
    game_state: State | None = None


class CardReopened(Event, tag="card_reopened", kw_only=True):
    """An imported card's recordings grew after its ``end_of_import`` close: the close no longer holds.

    The new lines' events follow, then a new ``CardClosed(end_of_import)`` at the card's last timestamp.
    """

    reason: Literal["import_resumed"] = "import_resumed"


AnyEvent = (
    CardOpened
    | PlayStarted
    | ActionTaken
    | ActionIgnored
    | LevelReset
    | LevelCompleted
    | GameOver
    | Win
    | CardClosed
    | BaselinesRecorded
    | LabelSet
    | RecordingImported
    | CardReopened
)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)


def encode(event: Event) -> bytes:
    """The stored bytes of an event."""
    return _encoder.encode(event)


def decode(body: bytes) -> AnyEvent:
    """Decode stored bytes back into an event."""
    return _decoder.decode(body)


def type_of(event: Event) -> str:
    """The tag that goes into the log's ``type`` column."""
    return type(event).__struct_config__.tag  # type: ignore[return-value]


#: Stream name prefixes: one stream per card, one per baseline set, one per label (so that machines which set
#: different labels can be copied into one team ledger without their label histories colliding).
CARD_STREAM = "card:"
BASELINES_STREAM = "baselines:"
LABEL_STREAM = "label:"


def card_stream(card_id: str) -> str:
    """The stream that holds one card's events."""
    return CARD_STREAM + card_id


def baselines_stream(set_id: str) -> str:
    """The stream that holds one baseline set."""
    return BASELINES_STREAM + set_id


def label_stream(label: str) -> str:
    """The stream that holds one label's history (its LabelSet events)."""
    return LABEL_STREAM + label
