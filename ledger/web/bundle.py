"""``ledger bundle``: the viewer's pages as a static site that opens from ``file://`` (see docs/viewer.md). Written to a
temporary folder beside ``DIR`` and moved into place at the end, so a failure leaves no half bundle."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from ledger.app.checkpoints import covering_checkpoint, prove
from ledger.app.compare import LeaderRow, comparison, one_calculator
from ledger.app.output import checked_output
from ledger.app.progress import rows_progress
from ledger.app.tag_stats import SIDE_BY_SIDE
from ledger.errors import InputError

from . import pages
from .data import PAGE_SIZE, CardCache, CardRow, card_events, card_row, card_view, usage_of

#: The vendored chart library and its licence, copied beside the pages that draw charts.
VENDORED = ("vendor/uplot/uPlot.iife.min.js", "vendor/uplot/uPlot.min.css", "vendor/uplot/LICENSE")

#: Written in every bundle: a folder holding it may be replaced by a new bundle.
MARKER = ".ledger-bundle"


class BundleResult(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    cards: int
    pages: int
    bytes: int
    replays_without_frames: int


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"cannot write the bundle to {out}: it is a file")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise InputError(f"{out} is not empty and not a bundle: refusing to replace it (choose another -o folder)")
    if out.parent.exists() and not out.parent.is_dir():
        raise InputError(f"cannot write the bundle to {out}: {out.parent} is a file, not a folder")
    if not out.parent.is_dir():
        raise InputError(f"cannot write the bundle to {out}: folder {out.parent} does not exist")


def write_bundle(
    ledger: Any,
    card_ids: Sequence[str],
    out: str | os.PathLike[str],
    *,
    environments: str | None = None,
    with_reasoning: bool = False,
    source: str = "",
    progress: Any = None,
) -> BundleResult:
    with checked_output(out):
        target = Path(out).expanduser().resolve()
        _check_target(target)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
        try:
            result = _write(ledger, card_ids, tmp, environments, with_reasoning, source, progress)
            (tmp / MARKER).write_text("written by `ledger bundle`; the next bundle to this folder replaces it\n")
            if target.exists():
                old = target.with_name(f".{target.name}.old-{os.getpid()}")
                target.rename(old)
                tmp.rename(target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return msgspec.structs.replace(result, path=str(target))


def _write(
    ledger: Any,
    card_ids: Sequence[str],
    root: Path,
    environments: str | None,
    with_reasoning: bool,
    source: str,
    progress: Any,
) -> BundleResult:
    from ledger.resim.frames import palette_or_empty, play_frames

    links = pages.BundleLinks()
    site = pages.Site(links, True, source)
    cache = CardCache(ledger)
    (root / "static").mkdir()
    for name in ("viewer.css", "viewer.js", *VENDORED):
        (root / "static" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pages.STATIC / name, root / "static" / name)
    colours = palette_or_empty()
    loaded, rows = [], []
    written = 0
    no_frames = 0
    for i, cid in enumerate(card_ids):
        card, version = cache.get(cid)
        doc = ledger.document(cid, card=card)
        loaded.append((card, doc))
        rows.append(card_row(card, doc))
        note = covering_checkpoint(ledger, cid)
        if note is not None:
            _put(root / links.evidence(cid), prove(ledger, cid, note))
        evidence = links.evidence(cid) if note is not None else None
        _put(
            root / links.card(cid),
            pages.card_page(
                card_view(card, doc, usage_of(cache, cid)),
                site,
                version=version,
                evidence=evidence,
            ),
        )
        written += 1
        events = card_events(ledger, cid)
        for game_id, plays in card.games.items():
            for n in range(1, len(plays) + 1):
                frames = play_frames(events, game_id, n, environments, with_reasoning=with_reasoning)
                no_frames += 1 if frames.error else 0
                html = pages.replay_page(cid, frames, colours, site)
                _put(root / links.replay(cid, game_id, n), html)
                written += 1
        if progress is not None:
            progress(i + 1, len(card_ids))
    calc = one_calculator([c for c, _ in loaded])
    compared = comparison([(c, ledger.document(c.card_id, card=c, calculator=calc)) for c, _ in loaded], calc)
    written += _index_pages(root, rows, compared.leaderboard, site)
    # Side by side, as the viewer: at most SIDE_BY_SIDE cards (the best scores, ties in the bundle's order); the
    # leaderboard still ranks every bundled card's tags.
    best = sorted(range(len(loaded)), key=lambda i: -compared.cards[i].score)[:SIDE_BY_SIDE]
    chosen = [loaded[i][0] for i in sorted(best)]
    side = comparison([(c, ledger.document(c.card_id, card=c, calculator=calc)) for c in chosen], calc)
    side = msgspec.structs.replace(side, leaderboard=compared.leaderboard)
    html = pages.compare_page(side, site, side_of=len(loaded))
    _put(root / "compare.html", html)
    # The progress chart ranks each card with the compare page's one calculator (its scores, not each card's own).
    under = {c.card_id: c.score for c in compared.cards}
    drawn = [msgspec.structs.replace(r, score=under.get(r.card_id, r.score)) for r in rows]
    prog = rows_progress(drawn, calculator=compared.calculator, rescored=compared.rescored)
    _put(root / "progress.html", pages.progress_page(prog, site))
    written += 1
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return BundleResult(
        path=str(root), cards=len(card_ids), pages=written + 1, bytes=size, replays_without_frames=no_frames
    )


def _index_pages(root: Path, rows: Sequence[CardRow], board: Sequence[LeaderRow], site: pages.Site) -> int:
    """The cards pages, :data:`PAGE_SIZE` cards each: ``index.html`` (with ``board``), ``cards-2.html``..."""
    every_tag, every_game = sorted({t for r in rows for t in r.tags}), sorted({g for r in rows for g in r.games})
    chunks = [rows[i : i + PAGE_SIZE] for i in range(0, len(rows), PAGE_SIZE)] or [[]]
    for n, chunk in enumerate(chunks, 1):
        html = pages.cards_page(
            chunk,
            site,
            stamp=0,
            leaderboard=board if n == 1 else (),
            next_url=f"cards-{n + 1}.html" if n < len(chunks) else None,
            all_tags=every_tag,
            all_games=every_game,
        )
        _put(root / ("index.html" if n == 1 else f"cards-{n}.html"), html)
    return len(chunks)


def _put(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
