"""What ``ledger cards`` lists: every card's summary as the toolkit would show it now (auto-close applied)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec

from ledger.app.card_read import shown_close
from ledger.domain.events import CardOpened, card_stream, decode
from ledger.ledger import Ledger
from ledger.rules.timeline import limits
from ledger.store.summary import CardSummary, PageQuery, SummaryRow, count_page, micros, read_page

SortKey = Literal["opened", "closed", "score", "actions", "events", "id"]
SORT_KEYS: tuple[str, ...] = ("opened", "closed", "score", "actions", "events", "id")


class CardFilter(msgspec.Struct, frozen=True):
    tags: tuple[str, ...] = ()
    games: tuple[str, ...] = ()
    state: Literal["open", "closed"] | None = None
    since: datetime | None = None
    limit: int | None = None
    sort: SortKey = "opened"
    reverse: bool = False
    after: str | None = None
    include_retracted: bool = False


def page_of(f: CardFilter, now: datetime, stale: int, max_open: int) -> PageQuery:
    minute = 60_000_000
    return PageQuery(
        tags=f.tags,
        games=f.games,
        state=f.state,
        since_key=micros(f.since) if f.since is not None else None,
        sort=f.sort,
        descending=f.reverse,
        limit=f.limit,
        after=f.after,
        include_retracted=f.include_retracted,
        now_key=micros(now),
        stale_us=stale * minute,
        max_open_us=max_open * minute,
    )


def shown_rows(ledger: Ledger, f: CardFilter | None = None) -> list[tuple[SummaryRow, CardSummary]]:
    f = f or CardFilter()
    if f.after is not None:
        f = msgspec.structs.replace(f, after=resolve_after(ledger, f.after))
    moment = datetime.now(UTC)
    lapse_after = limits(os.environ)
    rows = read_page(ledger.store, page_of(f, moment, *lapse_after))
    return [
        (r, msgspec.structs.replace(CardSummary.of(r, moment, lapse_after, _baselines_known(ledger, r)), competition=c))
        for r, c in ((r, is_competition(ledger, r.card_id)) for r in rows)
    ]


def resolve_after(ledger: Ledger, ref: str) -> str:
    # An unknown card is an InputError (exit 2): a paging script must not take it for the end of the list.
    from ledger.errors import InputError, UnknownCard

    try:
        return ledger.resolve_card(ref)  # AmbiguousCard is an InputError that lists the candidates
    except UnknownCard:
        raise InputError(f"--after {ref!r}: no card has this id or starts with it") from None


def count_cards(ledger: Ledger, f: CardFilter) -> int:
    query = page_of(msgspec.structs.replace(f, after=None), datetime.now(UTC), *limits(os.environ))
    return count_page(ledger.store, query)


def list_cards(ledger: Ledger, f: CardFilter | None = None) -> list[CardSummary]:
    return [shown for _, shown in shown_rows(ledger, f)]


class CardList(msgspec.Struct, frozen=True):
    """What ``ledger cards`` prints: the rows the filter chose, with the ``columns`` of usage asked for."""

    rows: list[CardSummary]
    mixed: str | None
    #: For an empty list that leaves retracted cards out: how many of them match.
    hidden: int
    usage: dict[str, tuple[int | None, float | None]] | None
    filter: CardFilter
    calculator: str | None = None
    columns: tuple[str, ...] = ()

    def to_json(self) -> Any:
        if self.usage is None:
            return self.rows
        usage = self.usage
        return [{**msgspec.to_builtins(r), **_usage_cells(usage[r.card_id], self.columns, raw=True)} for r in self.rows]

    def lines(self) -> list[str]:
        f = self.filter
        if not self.rows:
            plain = CardFilter(sort=f.sort, reverse=f.reverse, include_retracted=f.include_retracted)
            said = "no cards match" if f != plain else "no cards in this ledger"
            if self.hidden:
                said = f"{said} but {self.hidden} retracted card(s) (--include-retracted lists them)"
            return [said]
        out = [cards_table(self.rows, self.usage, self.columns)]
        if self.calculator is not None:
            out.append(f"scores with the calculator of arc-agi {self.calculator}, not each card's own")
        elif self.mixed:
            out.append(
                f"scores with each card's own calculator, and these differ ({self.mixed}): --calculator VERSION "
                "scores them all with one"
            )
        return out


def card_list(
    ledger: Ledger,
    f: CardFilter,
    *,
    calculator: str | None = None,
    mixed: bool = True,
    columns: tuple[str, ...] = (),
) -> CardList:
    """The cards ``f`` chooses (scored with ``calculator`` if given), with the usage ``columns`` asked for."""
    rows = list_cards(ledger, f)
    if calculator is not None:
        from ledger.domain import calculators

        calc = calculators.get(calculator)
        rows = [msgspec.structs.replace(r, score=ledger.document(r.card_id, calculator=calc).score) for r in rows]
        if f.sort == "score":
            rows.sort(key=lambda r: (r.opened or "", r.card_id))
            rows.sort(key=lambda r: r.score, reverse=f.reverse)
    hidden = 0
    if not rows and not f.include_retracted:
        hidden = len(list_cards(ledger, msgspec.structs.replace(f, include_retracted=True)))
    figures = None
    if columns:
        from ledger.app.usage import usage_totals

        figures = usage_totals(ledger, [r.card_id for r in rows])
    own = mixed_calculators(ledger, [r.card_id for r in rows]) if mixed and calculator is None else None
    return CardList(rows, own, hidden, figures, f, calculator, columns)


def _usage_cells(figures: tuple[int | None, float | None], columns: tuple[str, ...], *, raw: bool = False) -> Any:
    """The --columns cells of one card: text for the table, or (``raw``) the values for --json."""
    tokens, cost = figures
    values = {"tokens": tokens, "cost": cost}
    if raw:
        return {c: values[c] for c in dict.fromkeys(columns)}
    shown = {"tokens": "-" if tokens is None else str(tokens), "cost": "-" if cost is None else f"${cost:.4f}"}
    return tuple(shown[c] for c in dict.fromkeys(columns))


def cards_table(
    rows: list[CardSummary],
    usage: dict[str, tuple[int | None, float | None]] | None = None,
    columns: tuple[str, ...] = (),
) -> str:
    """The `ledger cards` table, each column as wide as its widest cell; ``columns`` (from ``usage``) before tags."""
    extra = tuple(dict.fromkeys(columns)) if usage is not None else ()
    head = ("card", "opened", "closed", "games", "actions", "score", *extra, "tags")
    cells = [
        (
            r.card_id + (" (competition)" if r.competition else "") + (" (retracted)" if r.retracted else ""),
            (r.opened or "?")[:19],
            f"{r.closed[:19]} {r.close_reason}{'*' if r.lapsed else ''}" if r.closed else "open",
            str(r.games),
            str(r.actions),
            f"{r.score:.2f}" if r.baselines_known else "not known yet",
            *(_usage_cells(usage[r.card_id], extra) if usage is not None else ()),
            ",".join(r.tags or []) or "-",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    right = set(range(3, 6 + len(extra)))

    def line(values: tuple[str, ...]) -> str:
        return "  ".join(
            v.rjust(w) if i in right else (v if i == len(values) - 1 else v.ljust(w))
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        )

    out = [line(head), *(line(c) for c in cells)]
    if any(r.competition for r in rows):
        out.append("(competition): opened in competition mode, scored over every game of the server")
    if any(r.lapsed for r in rows):
        out.append("* no close event: closed as the toolkit would have (STALE_MINUTES / MAX_OPEN_FOR_MINUTES)")
    return "\n".join(out)


def mixed_calculators(ledger: Ledger, card_ids: list[str]) -> str | None:
    """``arc-agi 0.9.1 (linear): 2 card(s), ...`` when the cards' own calculators score differently, else None."""
    from ledger.app.card_read import own_calculators

    own = own_calculators(ledger, card_ids)
    if len({c.arithmetic for c in own.values()}) < 2:
        return None
    counts: dict[str, int] = {}
    for c in sorted(own.values(), key=lambda c: c.version):
        key = f"{c.version} ({c.arithmetic})"
        counts[key] = counts.get(key, 0) + 1
    return "arc-agi " + ", ".join(f"{k}: {n} card(s)" for k, n in counts.items())


def is_competition(ledger: Ledger, card_id: str) -> bool:
    # Its first event says so: the summary holds no mode.
    first = ledger.store.event_at(card_stream(card_id), 1)
    if first is None:
        return False
    try:
        opened = decode(first.body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    return isinstance(opened, CardOpened) and opened.competition_mode is True


def _baselines_known(ledger: Ledger, row: SummaryRow) -> bool:
    # Only the page's open cards are loaded to tell: a closed card's baselines are known from its close.
    return row.closed is not None or ledger.baselines_known(ledger.load_card(row.card_id))


def captured_report(ledger: Ledger, card_ids: list[str], now: datetime) -> list[str]:
    lines = []
    for cid in card_ids:
        card = ledger.load_card(cid)
        doc = ledger.document(cid, card=card)
        shown = shown_close(card, now)
        if shown is None:
            state = "left open"
        elif shown[2]:
            state = f"lapsed ({shown[1]} at {shown[0].isoformat(timespec='seconds')}; no close event)"
        else:
            state = f"closed ({shown[1]})"
        if card.captured_via not in (None, "record"):
            state += f"   (captured by `ledger {card.captured_via}`)"
        lines.append(
            f"card {cid}   score {doc.score:.2f}   games {len(card.games)}   actions {card.total_actions}   {state}"
        )
    if card_ids:
        lines.append(f"ledger: {ledger.store.describe()}")
    return lines


def open_cards_report(ledger: Ledger, card_ids: list[str], now: datetime, environ: Mapping[str, str]) -> list[str]:
    from ledger.errors import UnknownCard
    from ledger.rules.timeline import lapse

    stale, max_open = limits(environ)
    lines = []
    for cid in dict.fromkeys(card_ids):
        try:
            card = ledger.load_card(cid)
        except UnknownCard:  # its opening was not recorded: the server closed it again at once (FailClosed)
            continue
        if card.closed:
            continue
        # The earlier of its two lapse moments, passed or not (no moment is after datetime.max).
        due = lapse(card, card.last_ts, datetime.max.replace(tzinfo=UTC), stale, max_open)
        state = "open"
        if due is not None:
            state = f"lapses ({due[1]}) {'at' if due[0] > now else 'since'} {due[0].isoformat(timespec='seconds')}"
        lines.append(f"  card {cid}   games {len(card.games)}   actions {card.total_actions}   {state}")
    if not lines:
        return []
    cards = "1 card stays" if len(lines) == 1 else f"{len(lines)} cards stay"
    head = f"{cards} open in the ledger (the harness did not close them):"
    tail = (
        f"an open card reads as closed by the toolkit's auto-close once idle STALE_MINUTES={stale} or open "
        f"MAX_OPEN_FOR_MINUTES={max_open} (marked lapsed; no close event is written); `ledger close CARD` records "
        "its close now"
    )
    return [head, *lines, tail]
