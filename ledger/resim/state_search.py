"""The search over game states that a record leaves open, shared by the harness import and the audit. A state reached by
several paths is kept once, under the first in priority order; a line's states replace those before it, and the paths
are cut now and then at their common state: memory stays that of one line's states."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ledger.resim.clicks import beyond
from ledger.toolkit.game_states import Choice, Engine, Result
from ledger.toolkit.search_budget import Room

#: Lines between looks for the state every kept state comes from: the lines before it are decided, and let go.
SETTLE_EVERY = 1024

#: (state, levels_completed, full_reset, frame: its :func:`~ledger.toolkit.game_states.frame_key`, b"" if empty).
Signature = tuple[str, int, bool, bytes]
#: Whether an answer (to a choice) agrees with the record.
Agrees = Callable[[Signature, Choice], bool]


class Node:
    """A kept state (``game``: its snapshot, None once let go) and the choice at ``lineno`` that led to it from
    ``parent``; ``merged``: lines where another path to the same state differs."""

    __slots__ = ("choice", "fp", "game", "lineno", "merged", "parent")

    def __init__(self, game: Any, fp: bytes, parent: Node | None, lineno: int, choice: Choice | None) -> None:
        self.game = game
        self.fp = fp
        self.parent = parent
        self.lineno = lineno
        self.choice = choice
        self.merged: set[int] | None = None


def new_engine(game: Any, stop_at: float, until: float, canonical: bool = True) -> Engine:
    """An engine for ``game``'s states within an allowance; ``canonical`` False for one path (no merging)."""
    out = Engine(game)
    out.stop_at, out.deadline = stop_at, until
    out.canonical = canonical
    return out


def in_priority(first: Choice | None, click: tuple[int, int]) -> list[Choice]:
    """Every simple action in the order the search prefers: ``first``, ACTION1..7, RESET last (never invented)."""
    order = [Choice(a) if a != 6 else Choice(6, *click) for a in range(1, 8)] + [Choice(0)]
    return order if first is None else [first, *(c for c in order if c != first)]


class ActionOrder:
    """Where one fitting action is enough: the one the agent took last first, then its most used (agents repeat)."""

    __slots__ = ("last", "used")

    def __init__(self) -> None:
        self.last: Choice | None = None
        self.used: dict[Choice, int] = {}

    def order(self, choices: list[Choice]) -> list[Choice]:
        used = self.used
        return sorted(choices, key=lambda c: (c != self.last, -used.get(c, 0))) if used else choices

    def took(self, c: Choice) -> None:
        self.last = c
        self.used[c] = self.used.get(c, 0) + 1


def widen(engine: Engine, node: Node, choices: list[Choice], pixels: bool = False) -> list[Choice]:
    """ACTION6 at every display cell (``pixels``: pixel) not among ``choices``, when ACTION6 is among them."""
    if not any(c.action == 6 for c in choices):
        return []
    cells = engine.cells(node)
    return [Choice(6, x, y) for x, y in (beyond(cells) if pixels else cells) if Choice(6, x, y) not in choices]


def first_fit(
    engine: Engine, node: Node, tries: Iterable[Choice], agrees: Agrees
) -> tuple[Choice | None, Result | None, Signature | None]:
    """The first of ``tries`` whose answer agrees, with its result, and the first answer given."""
    first = None
    for c in tries:
        r = engine.step(node, c, lambda sig, c=c: agrees(sig, c))  # type: ignore[misc]
        if r is None:
            continue
        first = first or r[0]
        if r[1] is not None:
            return c, r, first
    return None, None, first


class Layer:
    """The states after one line, each once under its first path in priority order (``merge``: told of later ones)."""

    def __init__(
        self,
        engine: Engine,
        lineno: int,
        agrees: Agrees | None,
        merge: Callable[[Node, Node], None] | None,
        room: int,
    ) -> None:
        self.engine = engine
        self.lineno = lineno
        self.agrees = agrees
        self.merge = merge
        self.nodes: list[Node] = []
        #: Every state the line gave (those not kept without their game: their paths still tell what differs).
        self.by_fp: dict[bytes, Node] = {}
        self.room = Room(room)
        self.first: Signature | None = None
        self.answer: Signature | None = None

    def expand(self, node: Node, choices: Iterable[Choice]) -> bool:
        matched = False
        agrees = self.agrees
        for c in choices:
            r = self.engine.step(node, c, None if agrees is None else lambda sig, c=c: agrees(sig, c))  # type: ignore[misc]
            if r is None:
                continue
            self.first = self.first or r[0]
            if r[1] is None:
                continue
            self.answer = self.answer or r[0]
            matched = True
            child = Node(r[2], r[1], node, self.lineno, c)
            kept = self.by_fp.get(r[1])
            if kept is None:
                self._add(child)
            elif self.merge is not None:
                self.merge(kept, child)
        return matched

    def each(self, nodes: list[Node], choices_of: Callable[[Node], list[Choice]], clicks: bool) -> None:
        for node in nodes:
            choices = choices_of(node)
            if not self.expand(node, choices) and clicks:
                self.expand(node, widen(self.engine, node, choices))

    def rounds(self, nodes: list[Node], choices: list[Choice]) -> None:
        """From every state, ``choices``; only if none agrees, the clicks at every cell, then every pixel."""
        for wide in range(3):
            for node in nodes:
                self.expand(node, widen(self.engine, node, choices, wide == 2) if wide else choices)
            if self.nodes or not any(c.action == 6 for c in choices):
                break

    def skip(self, node: Node) -> None:
        """Keep ``node``'s own state for this line: the line never reached the game."""
        if node.fp not in self.by_fp:
            self._add(Node(node.game, node.fp, node, self.lineno, None))

    def _add(self, child: Node) -> None:
        self.by_fp[child.fp] = child
        if self.room.admit(child.game):
            self.nodes.append(child)
        else:
            child.game = None


def let_go(old: list[Node], new: list[Node]) -> list[Node]:
    if new is not old:
        for n in old:
            n.game = None
    return new


def differ(a: Node, b: Node, apart: Callable[[Choice | None, Choice | None], bool]) -> set[int]:
    """Lines where two paths took choices ``apart`` tells apart, and lines either path merged."""
    out: set[int] = set()
    while a is not b and a.parent is not None and b.parent is not None:
        if apart(a.choice, b.choice):
            out.add(a.lineno)
        if a.merged:
            out |= a.merged
        if b.merged:
            out |= b.merged
        a, b = a.parent, b.parent
    return out


def path(last: Node) -> list[Node]:
    out: list[Node] = []
    n = last
    while n.parent is not None:
        out.append(n)
        n = n.parent
    out.reverse()
    return out


class SettleSchedule:
    """When to look for the state all kept states come from: every SETTLE_EVERY lines, doubling while they differ."""

    __slots__ = ("every", "left")

    def __init__(self) -> None:
        self.every = self.left = SETTLE_EVERY

    def due(self, nodes: list[Node]) -> Node | None:
        """That state when a look is due and finds one after the paths' last cut, else None."""
        self.left -= 1
        if self.left > 0:
            return None
        common = _common(nodes)
        self.every = SETTLE_EVERY if common is not None else self.every * 2
        self.left = self.every
        return common

    def settle(self, nodes: list[Node], note: Callable[[Node], None]) -> None:
        """When a look finds that state: ``note`` the path to it, which is cut there."""
        common = self.due(nodes)
        if common is not None:
            note(common)
            common.parent = None


def _common(nodes: list[Node]) -> Node | None:
    level = list({id(n): n for n in nodes}.values())
    while len(level) > 1:
        up: dict[int, Node] = {}
        for n in level:
            if n.parent is None:
                return None
            up[id(n.parent)] = n.parent
        level = list(up.values())
    return level[0] if level else None
