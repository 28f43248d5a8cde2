"""REST-server fidelity: ``RestAPI.cmd`` updates a card directly, bypassing the manager's hooks, so
``Scorecard.update_scorecard`` is wrapped once per process; and ``ledger serve``'s guard (:class:`FailClosed`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from ledger.domain.events import CardRetracted
from ledger.errors import StoreError
from ledger.toolkit import arc_adapter

if TYPE_CHECKING:
    from ledger.store.cards import CardRepository


class DirectWatcher(Protocol):
    """What a capture implements to see a direct ``Scorecard.update_scorecard`` call on a card it watches."""

    def direct_update(self, sc: Any, orig: Callable[..., Any], guid: str, data: Any, full_reset: bool) -> Any: ...


_watchers: dict[str, DirectWatcher] = {}
_tls = threading.local()
_original: Callable[..., Any] | None = None


def _update_scorecard(self: Any, guid: str, data: Any, full_reset: bool) -> Any:
    assert _original is not None
    watcher = None if getattr(_tls, "via_manager", False) else _watchers.get(self.card_id)
    if watcher is None:
        return _original(self, guid, data, full_reset)
    return watcher.direct_update(self, _original, guid, data, full_reset)


def watch(card_id: str, watcher: DirectWatcher) -> None:
    global _original
    _original = arc_adapter.wrap_scorecard_update(_update_scorecard)  # the toolkit's own, wrapped once per process
    _watchers[card_id] = watcher


def unwatch(card_id: str) -> None:
    _watchers.pop(card_id, None)


class ViaManager:
    """Mark the current thread as inside ``ScorecardManager.update_scorecard`` (whose hook records the update). A plain
    class, not a generator context manager: every captured step enters one (a generator costs more)."""

    __slots__ = ("_prev",)

    def __enter__(self) -> None:
        self._prev = getattr(_tls, "via_manager", False)
        _tls.via_manager = True

    def __exit__(self, *exc: object) -> None:
        _tls.via_manager = self._prev


def serve_problem(competition_mode: bool) -> str | None:
    """Why the installed arc-agi cannot serve what was asked; None when it can."""
    era = arc_adapter.era()
    version = arc_adapter.installed_version() or "?"
    if not era.rest_server:
        return (
            f"arc-agi {version} has no REST server (Arcade.listen_and_serve and arc_agi.server came in 0.9.2): "
            "install arc-agi 0.9.2 or later where ledger serve runs (the agents may keep theirs)"
        )
    if competition_mode and not era.competition:
        return (
            f"arc-agi {version} has no competition mode (it came in 0.9.3): serve without --competition, or "
            "install arc-agi 0.9.3 or later where ledger serve runs"
        )
    return None


#: The ``error`` of an answer whose request the ledger could not record (HTTP 503), and of every later answer about
#: that card (HTTP 500): the card is incomplete in the ledger for good.
NOT_RECORDED = "LEDGER_NOT_RECORDED"
CARD_INCOMPLETE = "LEDGER_CARD_INCOMPLETE"


class FailClosed:
    """``ledger serve``'s answers never acknowledge what the ledger did not record (see docs/guarantees.md). Capture
    runs with ``raise_errors=False`` there (the toolkit's handler holds the server's locks and must finish) and logs
    each failure at ERROR in the request's thread; this guard collects those records per request."""

    def __init__(
        self, repository: CardRepository, arcade: Any, *, on_refusal: Callable[[str], None] | None = None
    ) -> None:
        self.repository = repository
        self.arcade = arcade
        #: Told one line per refused request (``ledger serve`` prints it on stderr).
        self.on_refusal = on_refusal
        self._tls = threading.local()
        self._lock = threading.Lock()
        self._incomplete: dict[str, str] = {}
        self._marked: set[str] = set()
        self._handler = _Failures(self._tls)
        #: The first card this server opened (competition mode serves no other).
        self._first_card: str | None = None

    def install(self, app: Any) -> None:
        logging.getLogger("ledger").addHandler(self._handler)
        app.before_request(self._before)
        app.after_request(self._after)
        app.teardown_request(self._teardown)

    def uninstall(self) -> None:
        logging.getLogger("ledger").removeHandler(self._handler)

    def incomplete(self) -> dict[str, str]:
        with self._lock:
            return dict(self._incomplete)

    def _before(self) -> Any:
        from flask import request

        self._tls.failures = []
        self._tls.refused = False
        card = self._card_named(request)
        self._tls.card = card
        why = self._incomplete.get(card) if card else None
        if card is not None and why is not None and request.endpoint != "close_scorecard":
            self._tls.refused = True  # the after-request hook sees this answer too: it is final
            return self._refuse(500, CARD_INCOMPLETE, card, _incomplete(card, why, "refused"))
        return None

    def _after(self, response: Any) -> Any:
        from flask import request

        if getattr(self._tls, "refused", False):
            return response
        failures: list[str] = getattr(self._tls, "failures", None) or []
        card: str | None = getattr(self._tls, "card", None)
        answered = response.get_json(silent=True) if response.is_json else None
        if card is None and request.endpoint == "open_scorecard" and isinstance(answered, dict):
            card = answered.get("card_id")
            if response.status_code == 200 and self._first_card is None:
                self._first_card = card
            elif response.status_code == 409 and self.on_refusal is not None:
                # The toolkit answers a second open with 409 and no word in the server's log; a harness then exits
                # 0 with no card, so the operator is told here why and what to do.
                self.on_refusal(_one_card_per_server(self._first_card))
        if failures:
            cause = failures[0]
            if card is not None:
                with self._lock:
                    self._incomplete.setdefault(card, cause)
                if request.endpoint == "open_scorecard":
                    # The card is not in the ledger at all: the server must not keep it open either.
                    self.arcade.scorecard_manager.close_scorecard(card, None)
                elif request.endpoint == "close_scorecard":
                    self._closed_incomplete(card)
            return self._refuse(503, NOT_RECORDED, card, _not_recorded(cause, card, request.endpoint))
        if card is not None and card in self._incomplete:
            outcome = "refused"
            if request.endpoint == "close_scorecard":
                outcome = "retracted" if self._closed_incomplete(card) else "closed"
            return self._refuse(500, CARD_INCOMPLETE, card, _incomplete(card, self._incomplete[card], outcome))
        return response

    def _teardown(self, _exc: BaseException | None) -> None:
        self._tls.failures = None
        self._tls.card = None

    def _card_named(self, request: Any) -> str | None:
        card = (request.view_args or {}).get("card_id")
        if card:
            return str(card)
        body = request.get_json(silent=True) if request.method == "POST" else None
        if not isinstance(body, dict):
            return None
        if isinstance(body.get("card_id"), str):
            return str(body["card_id"])
        guid = body.get("guid")
        if isinstance(guid, str):
            sc = self.arcade.scorecard_manager.get_scorecard_from_guid(guid)
            if sc is not None:
                return str(sc.card_id)
        return None

    def _closed_incomplete(self, card: str) -> bool:
        """Retract a card closed on the server while incomplete (once); False if it could not be written."""
        # After the toolkit's close, capture writes nothing more to this card: marking it cannot race capture.
        with self._lock:
            if card in self._marked:
                return True
            why = self._incomplete[card]
        reason = f"incomplete: ledger serve could not record part of this card ({why}); the server counted more"
        try:
            self.repository.append(card, [CardRetracted(ts=datetime.now(UTC), reason=reason)], None)
        except StoreError as e:  # the database may still refuse writes: the next close of it tries again
            if self.on_refusal is not None:
                self.on_refusal(f"card {card} could not be marked incomplete in the ledger: {e}")
            return False
        with self._lock:
            self._marked.add(card)
        return True

    def _refuse(self, status: int, error: str, card: str | None, message: str) -> Any:
        from flask import jsonify, request

        if self.on_refusal is not None:
            self.on_refusal(f"{request.method} {request.path} answered {status}: {message}")
        answer = jsonify({"error": error, "message": message, "card_id": card, "recorded": False})
        answer.status_code = status
        return answer


def _one_card_per_server(first: str | None) -> str:
    which = f" (card {first})" if first else ""
    return (
        f"POST /api/scorecard/open answered 409: in competition mode the toolkit's server serves one card per server "
        f"lifetime and it has served its card{which}; start `ledger serve --competition` again for each run, or "
        "run one server per run, each on its own --port"
    )


def _not_recorded(cause: str, card: str | None, endpoint: str | None) -> str:
    said = f"the ledger did not record this request ({cause}): not recorded"
    if card is None:
        return f"{said}, although the server carried it out"
    if endpoint == "open_scorecard":
        return f"{said}; the server closed card {card} again: open a new card"
    return f"{said}, although the server carried it out; card {card} is incomplete in the ledger from now on"


def _incomplete(card: str, cause: str, outcome: str) -> str:
    said = f"card {card} is incomplete in the ledger: a request on it was not recorded ({cause}); "
    if outcome == "refused":
        return said + "this request was refused (not carried out, not recorded): open a new card"
    marked = "the ledger retracted it" if outcome == "retracted" else "the ledger could not mark it yet"
    return said + f"the server closed it; not recorded as played: {marked}"


class _Failures(logging.Handler):
    """Collects, per request thread, the ERROR records of capture (``ledger.capture.*``, ``ledger.toolkit.*``)."""

    def __init__(self, tls: threading.local) -> None:
        super().__init__(level=logging.ERROR)
        self._tls = tls

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(("ledger.capture", "ledger.toolkit")):
            return
        failures = getattr(self._tls, "failures", None)
        if failures is not None:
            # The failure itself when the record carries it (capture logs "...: %s" with the exception).
            args = record.args if isinstance(record.args, tuple) else ()
            errors = [a for a in args if isinstance(a, Exception)]
            failures.append(str(errors[0]) if errors else record.getMessage())
        elif logging.lastResort is not None:
            # Outside any request (no answer to turn into an error): still said on stderr, as without this handler.
            logging.lastResort.handle(record)
