"""The card repository: the one place a card is read from the log, and the one fold of a card's events.

Every reader loads a card here (:meth:`CardRepository.load`), and every other module that folds a card's events
(the summary, the viewer's cache, the audit, evidence) goes through :func:`replay`, so a body that does not decode
is one error everywhere.

A snapshot is a cache, never the truth: its row names the version and ``seq`` of the last event it covers, its body
that event's hash and a digest of the state, and a read uses it only where the log's event at that version still
has that ``seq`` and hash (else it is ignored, said once through ``note``). A card whose chain is not whole is
refused with :class:`BrokenChain` unless ``allow_broken``. Reads check the chain's shape; ``verify`` and ``audit``
recompute the hashes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping

import msgspec

from ledger.domain.calculators import Calculator
from ledger.domain.document import ScorecardDoc
from ledger.domain.events import CARD_STREAM, AnyEvent, BaselineEntry, card_stream, decode
from ledger.domain.projection import CardState, fold, new_card
from ledger.domain.replay import ChunkMismatch, fold_joined
from ledger.domain.scoring import score_card
from ledger.errors import AmbiguousCard, InputError, StoreError, UnknownCard
from ledger.store.base import LogStore, Snapshot, StoredEvent
from ledger.store.baselines import BaselineSets

#: The snapshots' format; a new one makes old snapshots be ignored (and rewritten).
SNAPSHOT_KIND = "card/v2"
#: A read that folded this many events past the cached projection caches what it folded.
SNAPSHOT_AFTER = 2000
#: A writer that holds the card's state (live capture) caches it every this many events, and always once the card
#: is closed or imported (a closed card never changes again, so its exports never replay it).
SNAPSHOT_EVERY = 10_000

_DIGEST_DOMAIN = b"arc-scorecard-ledger/snapshot/v2"


class _Envelope(msgspec.Struct, array_like=True, frozen=True):
    """A snapshot's body: the hash of the event it was made up to, a digest binding the state to it, the state."""

    head: str
    digest: str
    state: bytes


_state_enc = msgspec.msgpack.Encoder()
_env_enc = msgspec.msgpack.Encoder()


@functools.cache
def _decoders() -> tuple[msgspec.msgpack.Decoder[_Envelope], msgspec.msgpack.Decoder[CardState]]:
    # Made on the first cached state read (a card's decoder costs about 1 ms): a list of cards reads none.
    return msgspec.msgpack.Decoder(_Envelope), msgspec.msgpack.Decoder(CardState)


class BrokenChain(StoreError):
    """A card whose chain is not whole: it is never shown as if it were (``--allow-broken`` shows what is there)."""

    def __init__(self, card_id: str, why: str) -> None:
        super().__init__(
            f"card {card_id} is broken: {why}; it is not shown as a whole card (`ledger verify` and "
            f"`ledger audit {card_id}` say more; --allow-broken shows what the log holds, marked as broken)"
        )
        self.card_id = card_id
        self.why = why


def _digest(head: str, state: bytes) -> str:
    import hashlib  # here: it loads OpenSSL (about 2 ms), which listing cards never needs

    return hashlib.sha256(_DIGEST_DOMAIN + head.encode("ascii", "replace") + state).hexdigest()


def snapshot_body(state: CardState, head: str) -> bytes:
    """The stored body of a snapshot of ``state`` made up to the event whose hash is ``head``."""
    raw = _state_enc.encode(state)
    return _env_enc.encode(_Envelope(head, _digest(head, raw), raw))


def open_snapshot(body: bytes) -> tuple[str, CardState] | None:
    """(head, state) of a snapshot body whose digest holds; None for one that does not decode or was changed."""
    try:
        env_dec, state_dec = _decoders()
        env = env_dec.decode(body)
        if _digest(env.head, env.state) != env.digest:
            return None
        return env.head, state_dec.decode(env.state)
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError, UnicodeError):
        return None


def unreadable(card_id: str, e: Exception) -> StoreError:
    """The error of a card with a stored event that does not decode."""
    return StoreError(
        f"card {card_id} cannot be read: a stored event does not decode ({e}); `ledger audit {card_id}` says which one"
    )


def replay(card_id: str, bodies: Iterable[bytes], state: CardState | None = None) -> CardState:
    """``state`` (a new card when None) moved forward by the stored ``bodies``, in place. Raises
    :class:`StoreError` (:func:`unreadable`) for a body that is not an event."""
    try:
        return fold(card_id, (decode(b) for b in bodies), state)
    except (TypeError, msgspec.DecodeError, msgspec.ValidationError) as e:
        raise unreadable(card_id, e) from None


def apply_events(card_id: str, events: Iterable[AnyEvent], state: CardState | None = None) -> CardState:
    """``state`` (a new card when None) moved forward by events already decoded (a writer's, the audit's)."""
    return fold(card_id, events, state)


class Appended(msgspec.Struct, frozen=True):
    """What :meth:`CardRepository.append` wrote: the events as stored (the last one only when not ``whole``), and
    whether it cached the card's projection."""

    stored: list[StoredEvent]
    cached: bool


class Loaded(msgspec.Struct, frozen=True):
    """A card as read, with how far its stream goes."""

    state: CardState
    #: The last version and seq read (0, 0 for a card with nothing up to ``until``).
    version: int
    seq: int
    #: Why the card is broken (read with ``allow_broken``), else None.
    broken: str | None = None


class CardRepository:
    """The cards of one store. ``note`` is told, once per card and reason, of a cached state that was ignored."""

    def __init__(self, store: LogStore, note: Callable[[str], None] | None = None) -> None:
        self.store = store
        #: The baseline sets the cards are scored under.
        self.baselines = BaselineSets(store)
        self._note = note
        self._said: set[str] = set()
        #: How many snapshot rows the last :meth:`snapshot_problems` compared.
        self.snapshots_checked = 0

    # -- naming -----------------------------------------------------------------------------------------------

    def ids(self) -> list[str]:
        """Every card id, in the order the ledger first stored each card."""
        return [s.stream[len(CARD_STREAM) :] for s in self.store.streams(CARD_STREAM)]

    def resolve(self, ref: str) -> str:
        """The card id ``ref`` names: the id itself, or a unique prefix of one (:class:`UnknownCard`,
        :class:`AmbiguousCard` listing the candidates)."""
        names = self.store.stream_names(card_stream(ref), 2) if ref else []
        if names and (names[0] == card_stream(ref) or len(names) == 1):
            return names[0][len(CARD_STREAM) :]  # the id itself (it sorts first), or the one card it starts
        if names:  # every candidate, in order of opening, for the message
            raise AmbiguousCard(ref, [s.stream[len(CARD_STREAM) :] for s in self.store.streams(card_stream(ref))])
        raise UnknownCard(ref)

    def seq_at_version(self, card_id: str, version: int) -> int:
        """The ledger-wide ``seq`` of the card's event ``version`` (:class:`InputError` naming the versions it has)."""
        stream = card_stream(card_id)
        row = self.store.event_at(stream, version) if version >= 1 else None
        if row is None:
            top = next((s.version for s in self.store.streams(stream) if s.stream == stream), 0)
            if top == 0:
                raise UnknownCard(card_id)
            raise InputError(f"card {card_id} has versions 1..{top} (see `ledger events {card_id}`), not {version}")
        return row.seq

    # -- reading ------------------------------------------------------------------------------------------------

    def load(
        self, card_id: str, *, until: int | None = None, use_cache: bool = True, allow_broken: bool = False
    ) -> CardState:
        """The card rebuilt from its events (up to global ``seq`` ``until``): the same as a full replay
        (``use_cache=False``), which tests check. Raises :class:`BrokenChain` unless ``allow_broken``."""
        return self.read(card_id, until=until, use_cache=use_cache, allow_broken=allow_broken).state

    def read(
        self, card_id: str, *, until: int | None = None, use_cache: bool = True, allow_broken: bool = False
    ) -> Loaded:
        """:meth:`load`, with the version read and whether the card is broken."""
        got = self.store.bound_snapshot(card_stream(card_id), SNAPSHOT_KIND) if use_cache else None
        snap, link = got if got is not None else (None, None)
        return self._read(card_id, snap, link, until=until, use_cache=use_cache, allow_broken=allow_broken)

    def load_many(self, card_ids: Iterable[str]) -> dict[str, CardState]:
        """Many cards at once (one query for all their cached projections)."""
        return {c: got.state for c, got in self.read_many(card_ids).items()}

    def read_many(self, card_ids: Iterable[str], *, allow_broken: bool = False) -> dict[str, Loaded]:
        """:meth:`load_many`, each with the version read and whether it is broken."""
        ids = list(card_ids)
        snaps = self.store.snapshots_for([card_stream(c) for c in ids], SNAPSHOT_KIND)
        out = {}
        for c in ids:
            snap = snaps.get(card_stream(c))
            link = self.store.link_at(card_stream(c), snap.version) if snap is not None else None
            out[c] = self._read(c, snap, link, allow_broken=allow_broken)
        return out

    def advance(self, card_id: str, state: CardState, version: int) -> tuple[CardState, int]:
        """A card held in memory at ``version`` moved forward by the events appended since (the viewer's cache):
        the state (folded in place) and its version now. The rest of the stream must continue it without a gap."""
        bodies, last, _ = self.store.read_bodies(card_stream(card_id), after_version=version)
        if not bodies:
            return state, version
        if last - version != len(bodies):
            raise BrokenChain(card_id, _gap(version, last, len(bodies)))
        return replay(card_id, bodies, state), last

    def cached(self, card_id: str) -> tuple[int, CardState] | None:
        """The cached projection of a card and the version it covers, bound or not, or None (for the audit, which
        compares it with a replay)."""
        snap = self.store.get_snapshot(card_stream(card_id), SNAPSHOT_KIND)
        opened = open_snapshot(snap.body) if snap else None
        return (snap.version, opened[1]) if snap and opened else None

    def _said_once(self, card_id: str, why: str) -> None:
        key = f"{card_id}\0{why}"
        if self._note is not None and key not in self._said:
            self._said.add(key)
            self._note(
                f"Note: the cached state of card {card_id} was ignored ({why}); the card was read from its events"
            )

    def _bound(
        self, card_id: str, snap: Snapshot, link: tuple[int, str, int] | None, until: int | None
    ) -> tuple[CardState | None, str | None]:
        """(the snapshot's state where it is bound to the log, else None; why the card is broken, else None).
        ``link``: :meth:`LogStore.link_at` of the snapshot's version."""
        if until is not None and snap.seq > until:
            return None, None  # later than the point asked for: not a fault
        opened = open_snapshot(snap.body)
        if opened is None:
            self._said_once(card_id, "it does not decode or its digest does not hold")
            return None, None
        head, state = opened
        if link is None:
            return (
                None,
                f"its cached state was made from {snap.version} events and the log has no version {snap.version}",
            )
        seq, hash_, count = link
        if hash_ != head:
            self._said_once(card_id, f"it was made from another event {snap.version} than the log's")
            return None, None
        if seq != snap.seq:
            self._said_once(card_id, f"it names seq {snap.seq}, the log's event {snap.version} is at seq {seq}")
            return None, None
        if count != snap.version:
            return None, _gap(0, snap.version, count)
        return state, None

    def _read(
        self,
        card_id: str,
        snap: Snapshot | None,
        link: tuple[int, str, int] | None,
        *,
        until: int | None = None,
        use_cache: bool = True,
        allow_broken: bool = False,
    ) -> Loaded:
        stream = card_stream(card_id)
        state, broken = self._bound(card_id, snap, link, until) if snap is not None else (None, None)
        if broken is not None and not allow_broken:
            raise BrokenChain(card_id, broken)
        after = snap.version if snap is not None and state is not None else 0
        last_seq = snap.seq if snap is not None and state is not None else 0
        try:
            joined = _fold_joined(self.store, card_id, snap if state is not None else None, state, until)
        except TypeError as e:  # a column of another type than the schema's (a tampered row): say so, once
            raise unreadable(card_id, e) from None
        if joined is not None:
            state, folded, last_version, last_seq = joined
        else:
            bodies, last_version, read_seq = self.store.read_bodies(stream, after_version=after, until_seq=until)
            if state is None and not bodies:
                if until is not None and self.store.stream_exists(stream):
                    return Loaded(new_card(card_id), 0, 0, broken)
                raise UnknownCard(card_id)
            state = replay(card_id, bodies, state)
            folded = len(bodies)
            if bodies:
                last_seq = read_seq
            else:
                last_version = after
        if broken is None and last_version - after != folded:
            broken = _gap(after, last_version, folded)
            if not allow_broken:
                raise BrokenChain(card_id, broken)
        if use_cache and until is None and broken is None and folded >= SNAPSHOT_AFTER:
            self.save(card_id, state, last_version, last_seq)
        return Loaded(state, last_version, last_seq, broken)

    # -- writing ------------------------------------------------------------------------------------------------

    def save(self, card_id: str, state: CardState, version: int, seq: int, head: str | None = None) -> None:
        """Cache ``state`` as the projection of the card's first ``version`` events (bound to the hash of the event
        at ``version``: ``head``, read from the log when not given). Ignored on a read-only store."""
        if self.store.readonly:
            return
        if head is None:
            row = self.store.event_at(card_stream(card_id), version)
            if row is None:
                return
            head = row.hash
        self.store.put_snapshot(card_stream(card_id), SNAPSHOT_KIND, version, seq, snapshot_body(state, head))

    def append(
        self,
        card_id: str,
        events: Iterable[AnyEvent],
        expected_version: int | None,
        *,
        state: CardState | None = None,
        cached_version: int = 0,
        whole: bool = True,
        hand_over: bool = False,
    ) -> Appended:
        """Append to a card's stream (``expected_version`` None: at its head), then apply the snapshot policy:
        ``state`` (the card after these events, when the caller holds it) is cached once the card is closed or once
        :data:`SNAPSHOT_EVERY` events have followed the snapshot at ``cached_version``. ``hand_over``: the caller
        gives ``state`` up (an import's card, never changed again), and the cards summary scores it as it is
        rather than folding these events once more; a writer that goes on folding into its card (live capture)
        must not."""
        stored = self.store.append(card_stream(card_id), events, expected_version=expected_version, whole=whole)
        cached = False
        if state is not None and stored:
            last = stored[-1]
            if hand_over:
                # Before the snapshot is written: the summary's catch-up, which may be waiting for the writer now,
                # then scores the card without reading its events again. It only reads the card, as the snapshot does.
                self.store.hand_over(card_stream(card_id), state, last.version)
            if state.closed or last.version - cached_version >= SNAPSHOT_EVERY:
                self.save(card_id, state, last.version, last.seq, last.hash)
                cached = True
        return Appended(stored, cached)

    def document(
        self,
        card: CardState,
        *,
        baselines: Mapping[str, BaselineEntry] | None = None,
        calculator: Calculator | None = None,
    ) -> ScorecardDoc:
        """The card's scorecard document, under its own baselines and calculator unless others are given."""
        every = card.environments if card.competition_mode and not card.closed else None  # as the server will close it
        entries = self.baselines.of(card) if baselines is None else baselines
        return score_card(card, entries, all_environments=every, calculator=calculator)

    # -- checking -----------------------------------------------------------------------------------------------

    def snapshot_problems(self, *, every: int = 1) -> Iterator[str]:
        """Each stored snapshot row that differs from the log, one line each: one that does not decode or whose
        digest does not hold, one of a stream that is not a card or not in the log, one not bound to its event, or
        one whose state is not the replay of the card up to there. ``every``: check one row in that many (a sample,
        for ``verify --quick``). Rows of an older kind are left to be ignored (reads never use them)."""
        self.snapshots_checked = 0
        for n, (stream, kind, version, seq) in enumerate(self.store.snapshot_keys()):
            if kind != SNAPSHOT_KIND or n % every:
                continue
            self.snapshots_checked += 1
            card = stream[len(CARD_STREAM) :] if stream.startswith(CARD_STREAM) else None
            problem = self.snapshot_problem(card) if card is not None else "not a card's stream"
            if problem is not None:
                yield f"snapshot of {stream} (version {version}, seq {seq}): {problem}"

    def snapshot_problem(self, card_id: str) -> str | None:
        """How the card's stored snapshot differs from the log (None: it matches, or there is none)."""
        got = self.store.bound_snapshot(card_stream(card_id), SNAPSHOT_KIND)
        if got is None:
            return None
        version, seq = got[0].version, got[0].seq
        opened = open_snapshot(got[0].body)
        if opened is None:
            return "does not decode, or its digest does not hold (reads ignore it)"
        link = got[1]
        if link is None:
            return f"the log has no version {version} of this card"
        if link[1] != opened[0] or link[0] != seq:
            return f"not bound to the log's event {version} (another hash or seq)"
        try:
            want = self.load(card_id, until=seq, use_cache=False, allow_broken=True)
        except (StoreError, UnknownCard) as e:
            return f"the card cannot be replayed: {e}"
        have = opened[1]
        if want != have:
            fields = [f for f in CardState.__struct_fields__ if getattr(want, f) != getattr(have, f)]
            return f"the cached state is not the replay of the log (differs in {', '.join(fields)})"
        return None


def _gap(after: int, last: int, count: int) -> str:
    return f"versions {after + 1}..{last} should be {last - after} events, the log holds {count}: events were removed"


def _fold_joined(
    store: LogStore, card_id: str, snap: Snapshot | None, state: CardState | None, until: int | None
) -> tuple[CardState, int, int, int] | None:
    """(state, events folded, last version, last seq) replayed from bodies the store joins (SQLite), or None (also
    when nothing was read or a body does not decode: the per-body path then says what it says)."""
    after = snap.version if snap else 0
    joined = store.iter_joined(card_stream(card_id), after_version=after, until_seq=until)
    if joined is None:  # the backend reads bodies one by one
        return None
    chunks, last_version, last_seq = joined
    if not last_seq:  # nothing read: the cached state is the card (without one, the per-body path says why)
        return (state, 0, after, snap.seq) if state is not None and snap is not None else None
    counted = _Counted(chunks)
    try:
        state = fold_joined(
            card_id,
            counted,
            state,
            last_event=lambda: decode(store.event_at(card_stream(card_id), last_version).body),  # type: ignore[union-attr]
        )
    except (msgspec.DecodeError, msgspec.ValidationError, ChunkMismatch):
        return None
    finally:
        if hasattr(chunks, "close"):  # a read-ahead not read to the end stops before the store is used again
            chunks.close()
    return state, counted.n, last_version, last_seq


class _Counted:
    """The joined chunks, counting the events they hold as the fold reads them."""

    def __init__(self, chunks: Iterable[tuple[bytes, int]]) -> None:
        self._chunks = chunks
        self.n = 0

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        for chunk in self._chunks:
            self.n += chunk[1]
            yield chunk
