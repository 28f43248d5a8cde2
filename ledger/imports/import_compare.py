"""A recording of plays the ledger holds already (captured live, or imported from other files): compared with the
card that holds them, never written as a second card of the same run.

The plays are found by their guids (every line of both recording formats carries its play's guid). Lines after the
held card's close are left out of the comparison and reported: the server counted nothing after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ledger.domain.events import AnyEvent, CardOpened
from ledger.domain.projection import CardState, apply, new_card
from ledger.domain.translator import Observation, translate
from ledger.formats.import_problems import Problem
from ledger.imports.import_cards import CardResult
from ledger.imports.import_identity import GuidIndex
from ledger.rules.import_checks import compare_plays

if TYPE_CHECKING:
    from ledger.ledger import Ledger


def held_elsewhere(index: GuidIndex, obs: Iterable[Observation], card_id: str) -> str | None:
    """The card (other than ``card_id``) that holds a play of these observations' guids, if any."""
    others = index.others({o.guid for o in obs}, card_id)
    return next(iter(others.values())) if others else None


def compare_with_held(
    ledger: Ledger,
    held_id: str,
    obs: Iterable[tuple[int | None, Observation]],
    *,
    where: str,
    first_play: Callable[[CardState, CardOpened, Observation], list[AnyEvent]] | None,
    resets: bool,
    result: CardResult,
    problems: list[Problem],
) -> None:
    """Compare the card ``obs`` make with the held card; set ``result`` ("same card", or "differs", exit 1).

    ``obs``: each observation with its line in the recording (None when not known), read once as they come (a long
    recording's are never all held); ``first_play`` starts the card as the importer does (the harness's unrecorded
    ``Arcade.make`` RESET).
    """
    held = ledger.load_card(held_id)
    how = "imported" if held.close_reason == "end_of_import" else "captured live"
    closed = held.closed_at if held.closed_at is not None and held.close_reason != "end_of_import" else None
    card = new_card(held_id)
    guids: set[str] = set()
    first_ts, started, after, first_after = None, False, 0, None
    for ln, o in obs:
        guids.add(o.guid)
        first_ts = first_ts or o.ts
        if closed is not None and o.ts > closed:
            after += 1
            first_after = ln if after == 1 else first_after
            continue
        if not started:
            started = True
            # The recordings are counted as the toolkit that played the held card counted (its release's rules).
            opened = CardOpened(ts=o.ts, card_id=held_id, calculator=held.calculator)
            if first_play is not None:
                first_play(card, opened, o)
            else:
                apply(card, opened)
        translate(card, o)
    if not started and first_ts is not None:
        apply(card, CardOpened(ts=first_ts, card_id=held_id, calculator=held.calculator))
    if after:
        assert closed is not None  # only lines after a close are left out
        at = f" (from line {first_after})" if first_after is not None else ""
        msg = (
            f"{after} line(s) after the card closed at {closed.isoformat()}{at}, not counted "
            "(the server counted nothing after the close)"
        )
        problems.append(Problem(where, first_after, "not_counted", msg))
    diffs = compare_plays(held, card, guids, resets=resets)
    result.card_id = held_id
    if diffs:
        for d in diffs[:10]:
            problems.append(Problem(where, None, "cross_check", d))
        result.status, result.exit_code = "differs", 1
        result.error = (
            f"its plays are on card {held_id} ({how}) and differ in {len(diffs)} place(s): not imported "
            "(one run is one card)"
        )
    else:
        result.status = "same card"
        msg = f"same card, equal: its plays are on card {held_id} ({how}), found by their guids; nothing written"
        problems.append(Problem(where, None, "harness", msg))
