"""What the toolkit answered, as the pure :class:`~ledger.domain.translator.Observation`; API-key fingerprints."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from enum import Enum
from typing import Any, cast

from ledger.domain.events import State
from ledger.domain.translator import Observation


def fingerprint(api_key: str | None) -> str | None:
    """A salted sha256 of an API key (``sha256$salt$digest``); the key itself is never stored."""
    if not api_key:
        return None
    salt = secrets.token_hex(8)
    return f"sha256${salt}${hashlib.sha256((salt + api_key).encode()).hexdigest()}"


def click_xy(payload: object) -> tuple[int | None, int | None]:
    """ACTION6's ``x``/``y`` from its data payload; None where absent."""
    if not isinstance(payload, dict):
        return None, None
    x, y = payload.get("x"), payload.get("y")
    return (int(x) if isinstance(x, int) else None, int(y) if isinstance(y, int) else None)


def observation(
    data: Any, full_reset: bool, *, with_reasoning: bool, ts: datetime, frame_empty: bool | None = None
) -> Observation:
    ai = data.action_input
    action = ai.id.value if ai is not None else -1
    x, y = click_xy(ai.data) if action == 6 else (None, None)
    raw = data.state
    # arcengine's GameState is a str Enum whose values are exactly the ledger's State.
    state = cast(State, raw.value if isinstance(raw, Enum) else str(raw))
    return Observation(
        ts=ts,
        game_id=data.game_id,
        guid=data.guid,
        action=action,
        state=state,
        levels_completed=int(data.levels_completed),
        full_reset=bool(full_reset),
        frame_empty=len(data.frame) == 0 if frame_empty is None else frame_empty,
        x=x,
        y=y,
        reasoning=ai.reasoning if with_reasoning and ai is not None else None,
    )
