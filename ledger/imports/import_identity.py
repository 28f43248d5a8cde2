"""Which card each group of recordings is, from what proves it, never from a name alone.

A toolkit recording does not name its card: the toolkit writes ``<recordings_dir>/<card_id>/<game_id>-<guid>.jsonl``
and the card id is the folder's name, a uuid. So a folder named like a card id is taken as the card; the lines'
play guids that the ledger already holds name the card they are on; ``--card-id`` names it for the user. A folder
of any other name (``Downloads``) proves nothing: its files are refused (exit 2) unless one of the other two names
the card. A harness recording is a card of its own, named by the recorder's uuid in its file name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ledger.errors import ImportInputError
from ledger.formats.finding import Found, head_guids
from ledger.formats.import_problems import Problem

if TYPE_CHECKING:
    from ledger.ledger import Ledger

_CARD_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_OPTION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

How = Literal["folder", "option", "ledger", "harness", "unproven"]

LAYOUT_HINT = (
    "put each run's files in a folder named by its card id, as the toolkit writes them "
    "(<recordings_dir>/<card_id>/<game_id>-<guid>.jsonl), or name the card with --card-id ID (one run at a time)"
)


def is_card_id(name: str) -> bool:
    """Whether ``name`` has the shape of a toolkit card id (a uuid)."""
    return _CARD_ID.match(name) is not None


@dataclass(slots=True)
class CardPlan:
    """One card to import: its files and how its id is known."""

    files: list[Path]
    how: How
    #: The name the files came under (a folder's), when the card id is another.
    found_as: str | None = None


@dataclass(slots=True)
class GuidIndex:
    """play guid -> the card that holds it, over the whole ledger: the cards summary's play keys, probed per guid
    (never every card loaded), plus the cards this import committed."""

    ledger: Ledger
    _map: dict[str, str | None] = field(default_factory=dict)

    def owner(self, guid: str) -> str | None:
        """The card holding a play of ``guid`` (None if no card does)."""
        return self.owners({guid}).get(guid)

    def owners(self, guids: set[str]) -> dict[str, str | None]:
        """guid -> the card holding a play of it, or None, for each of ``guids`` (one read for those not asked yet)."""
        new = [g for g in guids if g not in self._map]
        if new:
            from ledger.store.summary import play_owners

            found = play_owners(self.ledger.store, new)
            for g in new:
                self._map[g] = found.get(g)
        return {g: self._map[g] for g in guids}

    def add(self, guids: set[str], card_id: str) -> None:
        """Record that ``card_id`` now holds plays of ``guids`` (a card this import committed)."""
        for g in guids:
            # A guid not asked yet is left to the read, which sees the committed card with any other holder.
            if g in self._map and self._map[g] is None:
                self._map[g] = card_id

    def others(self, guids: set[str], card_id: str) -> dict[str, str]:
        """guid -> the other card that holds it, for guids already on a card that is not ``card_id``."""
        found = self.owners(guids)
        return {g: c for g, c in sorted(found.items()) if c is not None and c != card_id}


def plan_cards(found: Found, index: GuidIndex, card_id: str | None, problems: list[Problem]) -> dict[str, CardPlan]:
    """card id -> its plan. Raises :class:`ImportInputError` when ``card_id`` is given for more than one card."""
    cards = found.cards
    if card_id is not None:
        if not _OPTION_ID.match(card_id):
            raise ImportInputError(f"--card-id {card_id!r}: letters, digits and . _ : - only (at most 128)")
        if len(cards) > 1:
            raise ImportInputError(
                f"--card-id names one card, and the paths hold {len(cards)} ({', '.join(sorted(cards))}): "
                "import one run at a time"
            )
        ((name, files),) = cards.items()
        return {card_id: CardPlan(files, "option", name)}
    out: dict[str, CardPlan] = {}
    for name, files in cards.items():
        if all(getattr(found.readers.get(f), "decides", None) == "frames" for f in files):
            out[name] = CardPlan(files, "harness")
        elif is_card_id(name):
            out.setdefault(name, CardPlan([], "folder")).files.extend(files)
        else:
            # No card folder: each file goes to the card its plays are on, so different runs stay apart.
            for f in files:
                owner = _owner_of(f, index)
                if owner is None:
                    out.setdefault(name, CardPlan([], "unproven")).files.append(f)
                    continue
                if owner not in out:
                    msg = f"card {owner} found by its plays' guids in the ledger (the folder {name!r} names no card)"
                    problems.append(Problem(str(f.parent), None, "harness", msg))
                out.setdefault(owner, CardPlan([], "ledger", name)).files.append(f)
    return out


def _owner_of(f: Path, index: GuidIndex) -> str | None:
    """The one card the ledger holds the file's plays on, else None."""
    owners = {index.owner(g) for g in head_guids(f)}
    return owners.pop() if len(owners) == 1 else None


def unproven_message(plan: CardPlan, name: str) -> str:
    """The refusal of files whose card nothing proves."""
    return (
        f"cannot tell which card these recordings are: the folder name {name!r} is no card id and none of their "
        f"plays is in the ledger; {LAYOUT_HINT}"
    )
