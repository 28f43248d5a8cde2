"""The event vocabulary: frozen msgspec Structs whose tag is the log's ``type`` (see docs/evidence-format.md, 11)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, NamedTuple

import msgspec

#: ``arcengine.GameState`` values.
State = Literal["NOT_PLAYED", "NOT_FINISHED", "WIN", "GAME_OVER"]

CloseReason = Literal["explicit", "idle", "max_open", "end_of_import", "abandoned"]


# gc=False: an event refers to nothing that refers back to it, so it never closes a cycle; untracked, the million
# events a cold read decodes do not set off the collector's passes over everything else the process holds.
class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=True, gc=False):
    """Base of every event: ``ts`` is when the toolkit observed it (UTC)."""

    ts: datetime


class PlayEvent(Event, frozen=True, kw_only=True):
    """An event of one play: ``guid``'s play of ``game_id``."""

    game_id: str
    guid: str


class CardOpened(Event, tag="card_opened", frozen=True, kw_only=True):
    """A scorecard was opened; ``api_key_fingerprint`` is a salted hash (the key is never stored)."""

    card_id: str
    source_url: str | None = None
    tags: list[str] | None = None
    opaque: Any = None
    competition_mode: bool | None = None
    api_key_fingerprint: str | None = None
    baselines_id: str | None = None
    #: Competition cards only: the server's games in its order, each made at close if the card never played it.
    environments: list[str] | None = None
    #: The arc-agi release whose calculator scores the card; None (cards from before it was recorded): 0.9.9.
    calculator: str | None = None
    #: ``capture``, ``user`` (``import --calculator``), ``file`` or ``assumed`` (the newest).
    calculator_source: str | None = None


class PlayStarted(PlayEvent, tag="play_started", frozen=True, kw_only=True):
    """A full reset (``Scorecard.new_play``): a new play of ``game_id`` for ``guid``; it counts as no action."""

    seed: int | None = None


class ActionTaken(PlayEvent, tag="action_taken", frozen=True, kw_only=True):
    """ACTION1..ACTION7 answered with a frame: one action counted on the guid's current play. ``candidates``: an
    imported recording did not decide the action; ``action`` is then the first of them (the count is the same whichever
    it was; an audit reports it as undecided, never as a mismatch)."""

    action: int
    x: int | None = None
    y: int | None = None
    levels_completed: int
    state: State
    reasoning: Any = None
    candidates: list[int] | None = None


class ActionIgnored(PlayEvent, tag="action_ignored", frozen=True, kw_only=True):
    """An action answered with an empty frame (after GAME_OVER or WIN): counted nowhere, kept for the post-mortem."""

    action: int
    state: State


class LevelReset(PlayEvent, tag="level_reset", frozen=True, kw_only=True):
    """A RESET that restarted the current level: one reset and one action; a GAME_OVER play stays GAME_OVER."""

    levels_completed: int
    state: State


class LevelCompleted(PlayEvent, tag="level_completed", frozen=True, kw_only=True):
    """The play's ``levels_completed`` changed after ``actions`` actions: one entry of ``Card.actions_by_level``."""

    levels_completed: int
    actions: int


class GameOver(PlayEvent, tag="game_over", frozen=True, kw_only=True):
    pass


class Win(PlayEvent, tag="win", frozen=True, kw_only=True):
    pass


class CardClosed(Event, tag="card_closed", frozen=True, kw_only=True):
    """The card was closed; nothing after this counts on it (``ledger close``'s reason is ``abandoned``)."""

    reason: CloseReason
    document_sha256: str | None = None


class ObservationReapplied(PlayEvent, tag="observation_reapplied", frozen=True, kw_only=True):
    """A RESET the REST server did not execute (competition mode): it counted the play's last observation again."""

    action: int
    levels_completed: int
    state: State


class RequestFailed(Event, tag="request_failed", frozen=True, kw_only=True):
    """A request to the ARC server got no usable answer: nothing was counted."""

    request: str
    game_id: str | None = None
    guid: str | None = None
    status: int | None = None
    error: str


class ServerDocument(Event, tag="server_document", frozen=True, kw_only=True):
    """The scorecard document the ARC server returned at close, as received (``ledger audit`` compares with it)."""

    document: dict[str, Any]


class CaptureContext(Event, tag="capture_context", frozen=True, kw_only=True):
    """How the card was captured (``serve`` or ``record``, with its ``--tag`` values); not in the card's JSON."""

    via: str
    tags: list[str] | None = None


class BaselineEntry(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=False):
    """One game's scoring data as the toolkit's ``EnvironmentInfo`` carries it."""

    game_id: str
    title: str | None = None
    baseline_actions: list[int] | None = None
    tags: list[str] | None = None
    private_tags: list[str] | None = None
    level_tags: list[list[str]] | None = None


class BaselinesRecorded(Event, tag="baselines_recorded", frozen=True, kw_only=True):
    """A baseline set; ``set_id`` is the sha256 of its canonical entries."""

    set_id: str
    entries: list[BaselineEntry]


class LabelSet(Event, tag="label_set", frozen=True, kw_only=True):
    """A human label now points at a baseline set (``ledger baselines import --label``); stream ``label:<label>``."""

    label: str
    set_id: str


class RecordingImported(Event, tag="recording_imported", frozen=True, kw_only=True):
    """How far ``ledger import`` has read one recording file of an imported card. ``tail_sha256`` hashes the 4096 bytes
    before ``offset`` (a rewritten file vs one that grew); ``game_state`` says whether the next action, without frame
    data, got an empty frame."""

    file: str
    offset: int
    lines: int
    skipped: int = 0
    tail_sha256: str
    game_state: State | None = None
    #: sha256 of every byte before ``offset``: a rewrite anywhere in what was imported is found (absent in events
    #: written before it existed, whose files are checked by ``tail_sha256`` only).
    prefix_sha256: str | None = None


class SkippedLine(msgspec.Struct, frozen=True):
    """One line of a recording that was not imported (``line`` is 1-based)."""

    line: int
    reason: str
    sha256: str
    size: int


class LinesSkipped(Event, tag="lines_skipped", frozen=True, kw_only=True):
    """Lines of ``file`` that ``ledger import`` could not use (not JSON, wrong types, cut mid-file, not
    reproducible by the game): the card may be short of what the run did, and ``ledger audit`` says so."""

    file: str
    lines: list[SkippedLine]


class ActionsInferred(Event, tag="actions_inferred", frozen=True, kw_only=True):
    """A harness recording (which holds answers, not actions) was imported: how its actions were found. ``method``:
    ``resimulated``, ``frames`` (resets unknown) or ``recorded``. ``undecided``: lines that could be a level RESET as
    well; a long list is split over consecutive events, 4,096 lines each (the first holds ``inferred``)."""

    file: str
    method: Literal["resimulated", "frames", "recorded"]
    inferred: int
    undecided: list[int] = []
    resets_known: bool = True


class BaselinesAttached(Event, tag="baselines_attached", frozen=True, kw_only=True):
    """A card imported without baselines is scored from now on under ``baselines_id``."""

    baselines_id: str


class CardReopened(Event, tag="card_reopened", frozen=True, kw_only=True):
    """An imported card's recordings grew after its ``end_of_import`` close, so a new close follows the new events."""

    reason: Literal["import_resumed"] = "import_resumed"


class CardRetracted(Event, tag="card_retracted", frozen=True, kw_only=True):
    """``ledger retract``: the card leaves lists, comparisons and leaderboards; its events stay and are read."""

    reason: str


class FramesNoted(Event, tag="frames_noted", frozen=True, kw_only=True):
    """Digests of the frames answering the undecided actions since the previous FramesNoted (4,096 at most), so a
    re-simulation tells candidates apart: the first 32 hex digits of a blake2b of the grids (int16, then shape)."""

    file: str
    digests: list[str]


class LevelUsage(msgspec.Struct, frozen=True):
    """What the agent's steps cost while ``levels_completed`` levels were done (so: playing the next one)."""

    levels_completed: int
    steps: int
    tokens: int | None = None
    cost: float | None = None


class RunUsage(Event, tag="run_usage", frozen=True, kw_only=True):
    """What a benchmarking run folder says the run used and cost; ``levels`` splits it by the level being played."""

    folder: str
    run_id: str | None = None
    model: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost: float | None = None
    levels: list[LevelUsage] = msgspec.field(default_factory=list)
    # Left out of the event when absent (omit_defaults): events written before these existed encode, and hash, as
    # they did.
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None
    usage_other: dict[str, Any] | None = None


class CardOnServer(Event, tag="card_on_server", frozen=True, kw_only=True):
    """The card lives on the ARC server at ``server``; its baselines come from local game files or BaselinesReported."""

    server: str
    #: The games whose entries the client read from its own game files (``metadata.json``) at open: their
    #: baselines are known without the server.
    local_games: list[str] = []


class BaselinesReported(Event, tag="baselines_reported", frozen=True, kw_only=True):
    """Baselines the ARC server revealed in a document; ``baselines_id``: the card's set with those of ``games``."""

    baselines_id: str
    answer: Literal["close", "scorecard"]
    games: list[str]
    server: str | None = None


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
    | ObservationReapplied
    | RequestFailed
    | ServerDocument
    | CaptureContext
    | LinesSkipped
    | ActionsInferred
    | BaselinesAttached
    | CardRetracted
    | FramesNoted
    | RunUsage
    | CardOnServer
    | BaselinesReported
)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)


def encode(event: Event) -> bytes:
    return _encoder.encode(event)


def decode(body: bytes) -> AnyEvent:
    return _decoder.decode(body)


def type_of(event: Event) -> str:
    return type(event).__struct_config__.tag  # type: ignore[return-value]


#: Stream name prefixes: one stream per card, one per baseline set, one per label (so that machines which set
#: different labels can be copied into one team ledger without their label histories colliding).
CARD_STREAM = "card:"
BASELINES_STREAM = "baselines:"
LABEL_STREAM = "label:"


def card_stream(card_id: str) -> str:
    return CARD_STREAM + card_id


def baselines_stream(set_id: str) -> str:
    return BASELINES_STREAM + set_id


def label_stream(label: str) -> str:
    return LABEL_STREAM + label


class Numbered(NamedTuple):
    version: int
    seq: int
    event: AnyEvent
