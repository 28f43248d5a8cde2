"""The ledger's card against the document the ARC server returned at close: the first field that differs.

Both sides are JSON values (the ledger's export parsed, the server's answer as received). They are walked in the
ledger's key order, lists item by item, and the first difference is named by its path
(``environments[1].runs[0].actions: ledger 36, server 48``). Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

_MISSING = object()


def _show(v: Any) -> str:
    if v is _MISSING:
        return "(absent)"
    text = repr(v) if isinstance(v, str) else str(v).replace("True", "true").replace("False", "false")
    return text if len(text) <= 60 else text[:57] + "..."


def first_difference(ledger: Any, server: Any, path: str = "") -> str | None:
    """The first difference between two JSON values as ``path: ledger X, server Y``, or None if they are equal."""
    if isinstance(ledger, dict) and isinstance(server, dict):
        for key in [*ledger, *(k for k in server if k not in ledger)]:
            sub = f"{path}.{key}" if path else str(key)
            d = first_difference(ledger.get(key, _MISSING), server.get(key, _MISSING), sub)
            if d is not None:
                return d
        return None
    if isinstance(ledger, list) and isinstance(server, list):
        for i in range(max(len(ledger), len(server))):
            a = ledger[i] if i < len(ledger) else _MISSING
            b = server[i] if i < len(server) else _MISSING
            d = first_difference(a, b, f"{path}[{i}]")
            if d is not None:
                return d
        return None
    # JSON has one number type: 3 and 3.0 are the same value (bool is not a number here).
    same = ledger is server if type(ledger) is bool or type(server) is bool else ledger == server
    return None if same else f"{path or '(document)'}: ledger {_show(ledger)}, server {_show(server)}"


def server_check(
    ledger_doc: Any,
    server_doc: Any | None,
    requests_failed: int,
    *,
    on_server: bool = False,
    baselines_source: str | None = None,
) -> tuple[str, str] | None:
    """(status, message) of the audit's ``server`` check; None for a card with no server behind it.

    ``on_server``: the card was captured from an ARC server's answers; ``baselines_source`` (where the card's
    baselines came from) ends the message.
    """
    if server_doc is None and requests_failed == 0 and not on_server:
        return None
    failed = f"; {requests_failed} request(s) failed and counted nothing" if requests_failed else ""
    source = f"; {baselines_source}" if baselines_source else ""
    if server_doc is None:
        return "WARN", f"no document from the server: the card was not closed on it{failed}{source}"
    diff = first_difference(ledger_doc, server_doc)
    if diff is None:
        return "PASS", f"the ledger's card equals the document the server returned at close{failed}{source}"
    return "FAIL", f"the server's document differs, first at {diff}{failed}{source}"
