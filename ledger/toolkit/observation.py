"""What the toolkit answered, as the pure core's :class:`~ledger.core.translator.Observation`; API-key fingerprints."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from enum import Enum
from typing import Any

from ledger.core.translator import Observation


def fingerprint(api_key: str | None) -> str | None:
    """A salted sha256 of an API key (``sha256$salt$digest``); the key itself is never stored."""
    if not api_key:
        return None
    salt = secrets.token_hex(8)
    return f"sha256${salt}${hashlib.sha256((salt + api_key).encode()).hexdigest()}"


def observation(
    data: Any, full_reset: bool, *, with_reasoning: bool, ts: datetime, frame_empty: bool | None = None
) -> Observation:
    """An :class:`Observation` from an arcengine ``FrameDataRaw``/``FrameData`` response."""
    ai = data.action_input
    action = ai.id.value if ai is not None else -1
    x = y = None
    if action == 6 and isinstance(ai.data, dict):
        x, y = ai.data.get("x"), ai.data.get("y")
    state = data.state
    state = state.value if isinstance(state, Enum) else str(state)  # arcengine's GameState is a str Enum
    return Observation(
        ts=ts,
        game_id=data.game_id,
        guid=data.guid,
        action=action,
        state=state,
        levels_completed=int(data.levels_completed),
        full_reset=bool(full_reset),
        frame_empty=len(data.frame) == 0 if frame_empty is None else frame_empty,
        x=int(x) if isinstance(x, int) else None,
        y=int(y) if isinstance(y, int) else None,
        reasoning=ai.reasoning if with_reasoning and ai is not None else None,
    )
