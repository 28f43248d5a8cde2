"""``ledger record``, inside the recorded command: attach every new Arcade to the ledger named in the environment."""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from datetime import UTC, datetime
from typing import Any

from ledger.capture.record_hook import ENV_CARDS, ENV_DB, ENV_TAGS
from ledger.domain.events import CaptureContext
from ledger.ledger import Ledger

_lock = threading.Lock()
_ledger: Ledger | None = None
_pid: int | None = None


class _FailureNotes(logging.Handler):
    """Tells the recorder of each capture failure (the harness may catch the ``CaptureError`` and play on)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _note({"failed": record.getMessage(), "pid": os.getpid()})
        except Exception:
            self.handleError(record)


_failures = _FailureNotes(logging.ERROR)


def _open() -> Ledger:
    global _ledger, _pid
    with _lock:
        if _ledger is None or _pid != os.getpid():
            # A forked child opens its own connection: the parent's is not its to use.
            _ledger, _pid = Ledger.open(os.environ[ENV_DB]), os.getpid()
            atexit.register(_ledger.close)
            logging.getLogger("ledger").addHandler(_failures)  # (once: adding a handler twice is a no-op)
        return _ledger


def _note(entry: dict[str, Any]) -> None:
    path = os.environ.get(ENV_CARDS)
    if path:
        # One short O_APPEND write per note: lines from several processes do not interleave.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
        finally:
            os.close(fd)


def attach(arcade: Any) -> Any:
    tags = json.loads(os.environ.get(ENV_TAGS) or "[]")
    context = CaptureContext(ts=datetime.now(UTC), via="record", tags=list(tags) or None)
    return _open().attach(
        arcade,
        context=context,
        on_open=lambda card_id: _note({"card": card_id, "pid": os.getpid()}),
        on_aside=lambda card_id, holder: _note({"aside": card_id, "by": holder, "pid": os.getpid()}),
    )
