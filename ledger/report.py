"""Text for people: the per-level post-mortem table of ``ledger replay`` and the ``ledger cards`` listing."""

from __future__ import annotations

from .calculator import best_play_index
from .document import RunDoc, ScorecardDoc
from .projection import CardState


def _num(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


def arithmetic(run: RunDoc) -> str:
    """The run's weighted mean and cap, e.g. ``(1x25 + 2x9.46 + 3x0)/6 = 7.32, cap 3/6 = 50``."""
    scores = run.level_scores or []
    if not scores or run.message:
        return f"score {_num(run.score)}"
    weights = list(range(1, len(scores) + 1))
    total_w = sum(weights)
    scored_w = sum(w for w, s in zip(weights, scores, strict=True) if s > 0)
    terms = " + ".join(f"{w}x{_num(s)}" for w, s in zip(weights, scores, strict=True))
    mean = sum(w * s for w, s in zip(weights, scores, strict=True)) / total_w
    cap = scored_w / total_w * 100
    return f"({terms})/{total_w} = {mean:.2f}, cap {scored_w}/{total_w} = {_num(cap)} -> {run.score:.2f}"


def replay_text(card: CardState, doc: ScorecardDoc) -> str:
    """The card, game by game and play by play, with each level's baseline, actions and score."""
    lines = [f"card {card.card_id}   score {doc.score:.2f}"]
    opened = card.opened_at.isoformat() if card.opened_at else "?"
    closed = f"closed {card.closed_at.isoformat()} ({card.close_reason})" if card.closed_at else "open"
    lines.append(f"  opened {opened}, {closed}, {card.events} events")
    for env in doc.environments:
        plays = card.games.get(env.id, [])
        best = best_play_index(plays)
        lines.append("")
        lines.append(
            f"game {env.id}   score {env.score:.2f}   levels {env.levels_completed}/{env.level_count}   "
            f"actions {env.actions}   resets {env.resets}"
        )
        for i, run in enumerate(env.runs):
            tag = " (best)" if i == best else ""
            lines.append(
                f"  play {i + 1}{tag}  guid {run.guid}  state {run.state}  actions {run.actions}  resets {run.resets}"
            )
            if run.message:
                lines.append(f"    {run.message}")
            lines.append(f"    {'level':>5}  {'baseline':>8}  {'actions':>7}  {'score':>7}")
            for n, (b, a, s) in enumerate(
                zip(run.level_baseline_actions or [], run.level_actions or [], run.level_scores or [], strict=False),
                start=1,
            ):
                lines.append(f"    {n:>5}  {('-' if b < 0 else b)!s:>8}  {a:>7}  {s:>7.2f}")
            lines.append(f"    game score {arithmetic(run)}")
    if doc.tags_scores:
        lines.append("")
        lines.append("tags: " + ", ".join(f"{t.id} {t.score:.2f}" for t in doc.tags_scores))
    return "\n".join(lines)
