"""One guid's game during re-simulation, when the record leaves some inputs open (``ActionTaken.candidates``). Every
state still agreeing with the record is kept (:mod:`ledger.resim.state_search`); while one is left the live game is
stepped in place, so a card whose inputs are all decided costs one game step per input."""

from __future__ import annotations

import functools
import operator
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.domain.events import ActionIgnored, ActionTaken, FramesNoted, LevelReset, Numbered, PlayStarted
from ledger.formats.frame_lines import LineMap
from ledger.resim.clicks import beyond, by_object, display
from ledger.resim.state_search import (
    ActionOrder,
    Agrees,
    Layer,
    Node,
    SettleSchedule,
    Signature,
    differ,
    first_fit,
    let_go,
    new_engine,
    path,
)
from ledger.toolkit.game_states import Choice, Engine, answer_signature, perform
from ledger.toolkit.search_budget import SearchSpent

#: Game states kept per guid at most; beyond it the first ones are kept and a mismatch is not a proof.
MAX_STATES = 200

#: On the one path a state is kept every MARK_EVERY inputs, the last KEEP_MARKS of them. Where the path breaks,
#: every path from a mark is searched, the nearest mark first: an agent's last choices are the likeliest to have
#: been other than the one taken.
MARK_EVERY = 16
KEEP_MARKS = 64
#: How many inputs before the break the marks searched from lie (each tried in turn, until one reproduces it).
REPAIR_REACH = (8, 64, 512, MARK_EVERY * KEEP_MARKS)
#: Game steps a search from a mark may take per input it replays; beyond, that mark is given up.
REPAIR_STEPS = 40

INPUTS = (PlayStarted, ActionTaken, LevelReset, ActionIgnored)


def agrees(ev: Any, t: type, frame: str | None = None) -> Agrees:
    """Whether an answer (to a choice) agrees with the recorded input event (and the frame the import noted)."""
    if t is ActionTaken:
        return lambda s, c: (
            s[3] != b""
            and s[0] == ev.state
            and s[1] == ev.levels_completed
            and not (c.action == 0 and s[2])
            and (frame is None or s[3].hex() == frame)
        )
    if t is LevelReset:
        return lambda s, c: s[3] != b"" and not s[2] and s[0] == ev.state and s[1] == ev.levels_completed
    if t is ActionIgnored:
        return lambda s, c: s[3] == b"" and s[0] == ev.state
    assert t is PlayStarted
    return lambda s, c: s[3] != b"" and s[2]


def choices_for(ev: Any, t: type) -> tuple[list[Choice], bool]:
    if t is PlayStarted or t is LevelReset:
        return [Choice(0)], False
    if t is ActionTaken and ev.candidates:
        return _open_choices(tuple(ev.candidates), ev.x, ev.y), len(ev.candidates) > 1
    if ev.action == 6 and t is ActionTaken:
        return [Choice(6, ev.x, ev.y)], False
    return [Choice(ev.action)], False


def noted_frames(events: Sequence[Numbered]) -> LineMap[str]:
    """version -> the frame digest an import noted for that undecided action (``FramesNoted``, in stream order)."""
    out: LineMap[str] = LineMap()
    waiting: list[int] = []
    for n in events:
        e: Any = n.event
        if type(e) is ActionTaken and e.candidates:
            waiting.append(n.version)
        elif type(e) is FramesNoted:
            for version, digest in zip(waiting, e.digests, strict=False):
                out[version] = digest
            waiting = []
    return out


def copy_before(events: Sequence[Numbered], i: int, guid: str, frames: Mapping[int, str]) -> int | None:
    """The version of the guid's input before ``events[i]`` when it repeats it (same noted frame, state, levels)."""
    last: list[Numbered] = []
    for n in reversed(events[:i]):
        if type(n.event) in INPUTS and getattr(n.event, "guid", None) == guid:
            last.append(n)
            if len(last) == 2:
                break
    if len(last) < 2:
        return None
    (a, b) = last
    ea: Any = a.event  # an input of any type: compared by what it holds
    eb: Any = b.event
    digest = frames.get(a.version)
    same = type(ea) is ActionTaken and bool(ea.candidates) and digest is not None and digest == frames.get(b.version)
    same = same and getattr(eb, "state", None) == ea.state
    return a.version if same and getattr(eb, "levels_completed", None) == ea.levels_completed else None


@functools.lru_cache(maxsize=256)
def _open_choices(candidates: tuple[int, ...], x: int | None, y: int | None) -> list[Choice]:
    """One shared list per distinct open action (a long card's hold a few between them). Not to be modified."""
    return [Choice(a, x, y) if a == 6 else Choice(a) for a in candidates]


@dataclass(slots=True)
class Instance:
    """One guid's game instance: live while one state is possible, else the possible states (``nodes``)."""

    game: Any
    seed: int | None
    engine: Engine | None = None
    nodes: list[Node] | None = None
    #: Some states had to be dropped (MAX_STATES): a later mismatch may be a dropped state's.
    cut: bool = False
    decided: LineMap[Choice] = field(default_factory=LineMap)
    #: Open inputs where states with different choices both still agree, since the states last came from one.
    still_open: set[int] = field(default_factory=set)
    _open_versions: set[int] = field(default_factory=set)
    #: Open inputs the game decided, and those that fit either way, counted once every state came from one after.
    decided_count: int = 0
    still_open_count: int = 0
    _looks: SettleSchedule = field(default_factory=SettleSchedule)
    agreed: bool = True
    #: (fingerprint, snapshot) of the live game while it has not been acted on since it settled.
    _frozen: tuple[bytes, Any] | None = None
    #: Open inputs take the first candidate that agrees with the record, the others not tried (see :meth:`_first`).
    first: bool = False
    #: version -> the choice taken for an open input, where ``first`` (not decided: others may fit too).
    taken: LineMap[Choice] = field(default_factory=LineMap)
    _favoured: ActionOrder = field(default_factory=ActionOrder)
    #: Where the path's last clicks landed, the latest last.
    _recent: list[tuple[int, int]] = field(default_factory=list)
    steps: int = 0
    #: On the one path: the inputs sent; each input since the oldest mark (number, version, choices, open, agrees);
    #: the marks (input number, fingerprint, snapshot before it).
    _sent: int = 0
    _log: deque[tuple[int, int, list[Choice], bool, Agrees]] = field(default_factory=deque)
    _marks: list[tuple[int, bytes, Any]] = field(default_factory=list)
    stop_at: float = float("inf")
    deadline: float = float("inf")

    def send(self, version: int, choices: list[Choice], open_: bool, ok: Agrees) -> Signature | None:
        """Send the input; the answer of an agreeing state (else the first); None: the game raised or lacks it."""
        self.agreed = True
        if self.first:
            return self._along(version, choices, open_, ok)
        if self.nodes is None and not open_:
            return self._live(choices[0])
        if self.nodes is None:
            self._branch()
        return self._search(version, choices, open_, ok)

    def _along(self, version: int, choices: list[Choice], open_: bool, ok: Agrees) -> Signature | None:
        """The input on the one path (or among the states a search from a mark kept, until one is left)."""
        if self.nodes is None and self._sent % MARK_EVERY == 0:
            self._mark()
        self._log.append((self._sent, version, choices, open_, ok))
        self._sent += 1
        if self.nodes is not None:
            answer = self._search(version, choices, open_, ok)
        elif open_:
            answer = self._first(version, choices, ok)
        else:
            answer = self._live(choices[0], exact=True)
            self.agreed = answer is not None and ok(answer, choices[0])
        if self.agreed or not self._marks:
            return answer
        repaired = self._repair()
        return answer if repaired is None else repaired

    def _path_engine(self) -> Engine:
        if self.engine is None:
            self.engine = new_engine(self.game, self.stop_at, self.deadline, canonical=False)
        return self.engine

    def _mark(self) -> None:
        if self._frozen is None:
            self._frozen = self._path_engine().freeze(self.game)
        self._marks.append((self._sent, *self._frozen))
        if len(self._marks) > KEEP_MARKS:
            del self._marks[0]
            while self._log[0][0] < self._marks[0][0]:
                self._log.popleft()

    def _repair(self) -> Signature | None:
        """The last input's answer from an agreeing state, searched from each mark (nearest first); else None."""
        now = self._sent - 1
        tried: set[int] = set()
        for reach in REPAIR_REACH:
            mark = next((m for m in reversed(self._marks) if now - m[0] >= reach), self._marks[0])
            if mark[0] not in tried:
                tried.add(mark[0])
                answer = self._search_from(mark)
                if answer is not None:
                    return answer
        self.agreed = False
        return None

    def _search_from(self, mark: tuple[int, bytes, Any]) -> Signature | None:
        engine = self.engine
        assert engine is not None
        window = [x for x in self._log if x[0] >= mark[0]]
        if window:  # the choices taken since the mark are searched again
            self.taken.drop_from(window[0][1])
        self.nodes = [Node(mark[2], mark[1], None, 0, None)]
        self._frozen = None
        self._open_versions = set()
        # These states are merged where equal, as the search's are: they must pickle alike while it lasts.
        engine.canonical = True
        engine.stop_at = min(self.stop_at, engine.steps + REPAIR_STEPS * len(window))
        answer: Signature | None = None
        try:
            for _n, version, choices, open_, ok in window:
                if self.nodes is None:  # one state was left: every path from it
                    self._branch()
                self.agreed = True
                answer = self._search(version, choices, open_, ok)
                if not self.agreed:
                    break
        except SearchSpent:
            if engine.steps < engine.stop_at or engine.steps >= self.stop_at:  # the time, or the whole allowance
                raise
            self.agreed = False
        finally:
            engine.stop_at = self.stop_at
        if not self.agreed:
            self.nodes, engine.canonical = None, False
            return None
        return answer

    def _live(self, c: Choice, exact: bool = False) -> Signature | None:
        self._frozen = None
        self.steps += 1
        try:
            resp = perform(self.game, *c)
        except Exception:  # the game raised or has no such action: no response
            return None
        if exact:  # the frame too: a frame the import noted is compared
            return answer_signature(resp)
        state = str(getattr(resp.state, "name", resp.state))
        return (state, int(resp.levels_completed), bool(resp.full_reset), b"" if len(resp.frame) == 0 else b"x")

    def _first(self, version: int, choices: list[Choice], ok: Agrees) -> Signature | None:
        """Take the first candidate that agrees, in the agent's order: one path of the game, not every path."""
        engine = self._path_engine()
        node = self._root()
        c, r, answer = first_fit(engine, node, self._tries(node, choices), ok)
        if c is None or r is None or r[1] is None:
            self.agreed = False
            self.game = engine.take(node.game)
            self._frozen = (node.fp, node.game)
            return answer
        self.taken[version] = c
        self._favoured.took(c)
        if c.action == 6 and c.x is not None and c.y is not None:
            self._recent = [*self._recent[-7:], (c.x, c.y)]
        self.game = engine.take(r[2])
        self._frozen = (r[1], r[2])
        return r[0]

    def _tries(self, node: Node, choices: list[Choice]) -> Iterator[Choice]:
        yield from self._favoured.order(choices)
        yield from self._clicks_from(node, choices)

    def _clicks_from(self, node: Node, choices: list[Choice]) -> list[Choice]:
        """ACTION6 at every display pixel, when it is a candidate, in :func:`~ledger.resim.clicks.by_object`'s order."""
        if not any(c.action == 6 for c in choices):
            return []
        engine = self.engine
        assert engine is not None
        cells = engine.cells(node)
        order = by_object(display(engine, node), [*cells, *beyond(cells)], self._recent)
        return [Choice(6, x, y) for x, y in order if Choice(6, x, y) not in choices]

    def _branch(self) -> None:
        if self.engine is None:
            self.engine = new_engine(self.game, self.stop_at, self.deadline)
        self.nodes = [self._root()]
        self._frozen = None

    def _root(self) -> Node:
        assert self.engine is not None
        fp, snap = self._frozen if self._frozen is not None else self.engine.freeze(self.game)
        self.engine.hand(snap, self.game)
        return Node(snap, fp, None, 0, None)

    def _search(self, version: int, choices: list[Choice], open_: bool, ok: Agrees) -> Signature | None:
        if open_:
            self._open_versions.add(version)
        engine, nodes = self.engine, self.nodes
        assert engine is not None and nodes is not None
        layer = Layer(engine, version, ok, None if self.first else self._merge, MAX_STATES)
        layer.rounds(nodes, choices)
        if not layer.nodes:
            self.agreed = False
            return layer.first
        if layer.room.full:
            self.cut = True
        self.nodes = let_go(nodes, layer.nodes)
        if len(self.nodes) == 1:
            self._settle()
        else:
            self._looks.settle(self.nodes, self._note_path)
        return layer.answer

    def _merge(self, kept: Node, child: Node) -> None:
        self.still_open |= differ(kept, child, operator.ne) & self._open_versions

    def _note_path(self, last: Node) -> None:
        """The choices of the open inputs on the path to ``last``; what is open up to it is final."""
        # On the one path, states were searched from a mark only: the choices on its path are taken, not decided.
        into = self.taken if self.first else self.decided
        found = [(n.lineno, n.choice) for n in path(last) if n.lineno in self._open_versions and n.choice is not None]
        for version, c in found:  # the path's own, all after those noted before it
            into[version] = c
        # No later path reaches back past ``last``: what is still open up to it stays so.
        final = {v for v in self.still_open if v <= last.lineno}
        if not self.first:
            self.decided_count += sum(1 for v, _ in found if v not in final)
        self.still_open_count += len(final)
        self.still_open -= final
        self._open_versions = {v for v in self._open_versions if v > last.lineno}

    def _settle(self) -> None:
        assert self.nodes is not None and self.engine is not None
        self._note_path(self.nodes[0])
        node = self.nodes[0]
        if self.first:  # back on one path, which merges no states
            self.engine.canonical = False
        self.game = self.engine.take(node.game)
        self._frozen = (node.fp, node.game)
        self.nodes = None

    def finish(self) -> None:
        if self.nodes is None:
            return
        best = self.nodes[0]
        if not self.first:  # on the one path nothing is decided, so nothing is still open
            for other in self.nodes[1:]:
                self.still_open |= differ(best, other, operator.ne) & self._open_versions
        self._settle()
