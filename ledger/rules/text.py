"""Text for people: ``ledger replay``'s per-level tables with the post-mortem summary, and the audit's post-mortem."""

from __future__ import annotations

from collections.abc import Collection

from ledger.domain import calculators
from ledger.domain.calculators import Calculator
from ledger.domain.document import RunDoc, ScorecardDoc
from ledger.domain.projection import CardState
from ledger.domain.scoring import best_play_index, calculator_of
from ledger.rules.postmortem import PostMortem, arithmetic, postmortem
from ledger.rules.server import baselines_source
from ledger.rules.timeline import retraction_note


def _level_table(run: RunDoc, indent: str, known: bool = True) -> list[str]:
    lines = [f"{indent}{'level':>5}  {'baseline':>8}  {'actions':>7}  {'score':>7}"]
    for n, (b, a, s) in enumerate(
        zip(run.level_baseline_actions or [], run.level_actions or [], run.level_scores or [], strict=False),
        start=1,
    ):
        score = f"{s:>7.2f}" if known else f"{'?':>7}"
        lines.append(f"{indent}{n:>5}  {('-' if b < 0 else b)!s:>8}  {a:>7}  {score}")
    return lines


def replay_text(
    card: CardState, doc: ScorecardDoc, unknown: Collection[str] = (), calc: Calculator | None = None
) -> str:
    """The card per game, play and level, then the post-mortem (``unknown``: games without known baselines)."""
    calc = calc if calc is not None else calculator_of(card)
    score = f"score {doc.score:.2f}" if not unknown else "score not known yet"
    lines = [f"card {card.card_id}   {score}"]
    opened = card.opened_at.isoformat() if card.opened_at else "?"
    closed = f"closed {card.closed_at.isoformat()} ({card.close_reason})" if card.closed_at else "open"
    lines.append(f"  opened {opened}, {closed}, {card.events} events")
    note = retraction_note(card)
    if note is not None:
        lines.append(f"  {note} (left out of lists and leaderboards; the record is kept)")
    if card.all_tags:
        lines.append("  card tags: " + ", ".join(card.all_tags))
    lines.append(f"  {baselines_source(card)}")
    lines.append(f"  {calculator_line(card, calc)}")
    if unknown:
        lines.append(
            f"  baselines not known yet for {', '.join(unknown)}: the server reveals them in its scorecard answers "
            "(in competition mode at close); actions, levels and states below are as recorded"
        )
    if card.requests_failed:  # ONLINE/COMPETITION capture: what the server may have counted unseen
        lines.append(f"  {card.requests_failed} request(s) to the server failed; none of them counted")
    for env in doc.environments:
        plays = card.games.get(env.id, [])
        best = best_play_index(plays)
        known = env.id not in unknown
        lines.append("")
        lines.append(
            f"game {env.id}   score {f'{env.score:.2f}' if known else 'not known yet'}   "
            f"levels {env.levels_completed}/{env.level_count if known else '?'}   "
            f"actions {env.actions}   resets {env.resets}"
        )
        for i, run in enumerate(env.runs):
            tag = " (best)" if i == best else ""
            lines.append(
                f"  play {i + 1}{tag}  guid {run.guid or '(not played)'}  state {run.state}  actions {run.actions}  "
                f"resets {run.resets}"
            )
            if run.message and known:
                lines.append(f"    {run.message}")
            lines += _level_table(run, "    ", known)
            # Without baselines there is no arithmetic to show, only the score: the toolkit's message says why.
            ar = arithmetic(run, calc) if known else None
            shown = "not known yet" if not known else ar.text if ar is not None else f"{run.score:.2f}"
            lines.append(f"    game score {shown}")
    if doc.tags_scores:
        lines.append("")
        scores = ", ".join(f"{t.id} {t.score:.2f}" for t in doc.tags_scores) if not unknown else "not known yet"
        lines.append(
            f"game tags (the games' own tags, each scored over the levels of the games that carry it): {scores}"
        )
    lines.append("")
    if unknown:  # every finding of the post-mortem weighs levels by their baselines
        lines.append("post-mortem: not before the baselines are known")
    else:
        lines += summary_lines(postmortem(card, doc, calc))
    return "\n".join(lines)


def calculator_line(card: CardState, calc: Calculator) -> str:
    own = calculator_of(card)
    if calc != own:
        return f"calculator {calculators.label(calc)}: re-scored (played under {own.version})"
    why = {
        "capture": "the toolkit that played it",
        "user": "stated at import",
        "file": "as the recording says",
        "assumed": "the newest: the import was not told which toolkit played it",
    }.get(card.calculator_source or "", "the card does not record its toolkit")
    if card.calculator is not None and card.calculator != own.version:
        why = f"arc-agi {card.calculator} played it, a release the ledger does not know"
    return f"calculator {calculators.label(calc)}: {why}"


def summary_lines(pm: PostMortem) -> list[str]:
    lines = ["post-mortem"]
    if not pm.games:
        lines.append("  no game was played on this card")
    for g in pm.games:
        if not g.plays:
            lines.append(f"  {g.game_id}: not played, score {g.score:.2f}")
            continue
        lines.append(f"  {g.game_id}: best play {g.best_play} of {g.plays}, score {g.score:.2f}")
        lines += [f"    - {f.text}" for f in g.findings] or ["    - nothing stands out"]
    return lines


def postmortem_text(pm: PostMortem) -> str:
    lines = [f"post-mortem of card {pm.card_id}   score {pm.score:.2f}"]
    if not pm.games:
        lines.append("  no game was played on this card")
    for g in pm.games:
        lines.append("")
        if not g.plays:
            lines.append(f"game {g.game_id}   score {g.score:.2f}   not played")
            continue
        lines.append(
            f"game {g.game_id}   score {g.score:.2f}   best play {g.best_play} of {g.plays}  guid {g.guid}  "
            f"state {g.state}"
        )
        if g.message:
            lines.append(f"  {g.message}")
        lines.append(f"  {'level':>5}  {'weight':>6}  {'baseline':>8}  {'actions':>7}  {'score':>7}")
        for lv in g.levels:
            base = "-" if lv.baseline is None else str(lv.baseline)
            lines.append(f"  {lv.level:>5}  {lv.weight:>6}  {base:>8}  {lv.actions:>7}  {lv.score:>7.2f}")
        if g.arithmetic is not None:
            lines.append(f"  game score {g.arithmetic.text}")
        lines += [f"  - {f.text}" for f in g.findings] or ["  - nothing stands out"]
    return "\n".join(lines)
