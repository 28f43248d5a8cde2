"""REST-server fidelity: the card updates the toolkit's REST API makes without going through ``ScorecardManager``.

``arc_agi/api.py`` ``RestAPI.cmd`` calls ``Scorecard.update_scorecard`` directly on the card in two places:
in competition mode, for a RESET sent while the level has had no action (the server does not execute it and
re-applies the play's last observation instead: one action, plus one reset when that observation was itself a
RESET), and under ``ONLY_RESET_LEVELS=true`` for a game it just made (a second new play). The ledger's hooks sit
on the Arcade's ``ScorecardManager``, which those calls bypass; so the class method is wrapped once per process,
passing straight through for every card no capture watches and for the manager's own calls (the manager's
hook records those).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from ledger.toolkit import arc_adapter


class DirectWatcher(Protocol):
    """What a capture implements to see a direct ``Scorecard.update_scorecard`` call on a card it watches."""

    def direct_update(self, sc: Any, orig: Callable[..., Any], guid: str, data: Any, full_reset: bool) -> Any:
        """Run ``orig(sc, guid, data, full_reset)`` and record what it counted; return its result."""
        ...


_watchers: dict[str, DirectWatcher] = {}
_tls = threading.local()
_lock = threading.Lock()
_original: Callable[..., Any] | None = None


def _update_scorecard(self: Any, guid: str, data: Any, full_reset: bool) -> Any:
    assert _original is not None
    watcher = None if getattr(_tls, "via_manager", False) else _watchers.get(self.card_id)
    if watcher is None:
        return _original(self, guid, data, full_reset)
    return watcher.direct_update(self, _original, guid, data, full_reset)


def install() -> None:
    """Wrap ``Scorecard.update_scorecard`` (once per process)."""
    global _original
    with _lock:
        if _original is None:
            _original = arc_adapter.wrap_scorecard_update(_update_scorecard)


def watch(card_id: str, watcher: DirectWatcher) -> None:
    """Send direct updates of card ``card_id`` to ``watcher``."""
    install()
    _watchers[card_id] = watcher


def unwatch(card_id: str) -> None:
    """Stop watching a card (it was closed)."""
    _watchers.pop(card_id, None)


@contextmanager
def via_manager() -> Iterator[None]:
    """Mark the current thread as inside ``ScorecardManager.update_scorecard`` (whose hook records the update)."""
    prev = getattr(_tls, "via_manager", False)
    _tls.via_manager = True
    try:
        yield
    finally:
        _tls.via_manager = prev


def offline_arcade(environments_dir: str, logger: Any = None) -> Any:
    """An OFFLINE ``arc_agi.Arcade`` over the games under ``environments_dir`` (what ``ledger serve`` serves)."""
    from arc_agi import Arcade, OperationMode

    return Arcade(operation_mode=OperationMode.OFFLINE, environments_dir=environments_dir, logger=logger)


def serve(
    arcade: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8001,
    competition_mode: bool = False,
    **kwargs: Any,
) -> None:
    """Run the toolkit's own REST server (``Arcade.listen_and_serve``) on ``arcade``; blocks until stopped."""
    arcade.listen_and_serve(host=host, port=port, competition_mode=competition_mode, **kwargs)


def check_bindable(host: str, port: int) -> None:
    """Raise ``OSError`` if ``host:port`` cannot be bound now (werkzeug would only print and exit)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
