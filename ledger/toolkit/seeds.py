"""Games started as ``Arcade.make`` starts them, and the seeds worth trying for a play whose seed is not recorded."""

from __future__ import annotations

import hashlib
import pickle
from typing import Any

from ledger.toolkit.game_files import LocalGame
from ledger.toolkit.game_states import fingerprint

SEED_TRIES = 32


def start_game(info: Any, seed: int | None = 0) -> Any:
    """The game alone, as ``LocalEnvironmentWrapper`` starts it (seed 0: the harness's ``Arcade.make``)."""
    return LocalGame(info, seed).game


def seed_classes(info: Any) -> list[int]:
    """Seeds of 0..SEED_TRIES-1 that start the game in a state the default seed does not (one per state)."""
    seen = {_start_digest(info, None)}
    out = []
    for s in range(SEED_TRIES):
        d = _start_digest(info, s)
        if d not in seen:
            seen.add(d)
            out.append(s)
    return out


def _start_digest(info: Any, seed: int | None) -> bytes:
    """A digest of the game's state after its first RESET, its own record of the seed left out."""
    try:
        game = start_game(info, seed)
    except Exception:  # a seed the game's code refuses: a state of its own
        return b"error"
    game.__dict__.pop("_seed", None)  # the game is this digest's alone: nothing needs its seed back
    try:
        return hashlib.blake2b(pickle.dumps(vars(game), protocol=5), digest_size=20).digest()
    except Exception:  # state that does not pickle: the slower walk
        return fingerprint(game)
