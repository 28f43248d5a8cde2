"""ONLINE capture's cost per step: the toolkit's remote wrapper against its own REST server on 127.0.0.1, bare and
with a ledger attached, next to the HTTP round trip it rides on; the export is checked against the close answer.
"""

from __future__ import annotations

import itertools
import json
import logging
import tempfile
import time
from pathlib import Path

from benchlib import rounds

from ledger import Ledger
from tests.test_online_capture import Server, server

_quiet = logging.getLogger("bench.remote")
_quiet.setLevel(logging.CRITICAL)
logging.getLogger("werkzeug").setLevel(logging.ERROR)


def _step_cost(srv: Server, where: str | None, n_steps: int) -> tuple[float, float, bool | None]:
    """Wall and client-thread CPU seconds per ACTION6 step on clk2, ledger at ``where`` attached (None: bare); and,
    attached, whether the export equals the server's close answer."""
    from arc_agi import Arcade, OperationMode
    from arcengine import GameAction

    arc = Arcade(
        arc_api_key="bench",
        arc_base_url=srv.url,
        operation_mode=OperationMode.ONLINE,
        environments_dir="/nonexistent",
        logger=_quiet,
    )
    led = Ledger.open(where) if where is not None else None
    if led is not None:
        led.attach(arc)
    card = arc.open_scorecard()
    env = arc.make("clk2", scorecard_id=card)
    assert env is not None
    for _ in range(20):
        env.step(GameAction.ACTION6, data={"x": 63, "y": 63})
    t, c = time.perf_counter(), time.thread_time()
    for _ in range(n_steps):
        env.step(GameAction.ACTION6, data={"x": 63, "y": 63})
    dt, dc = (time.perf_counter() - t) / n_steps, (time.thread_time() - c) / n_steps
    arc.close_scorecard(card)
    same = None
    if led is not None:
        same = json.loads(led.export(card)) == srv.closes[card]
        led.close()
    return dt, dc, same


def run(quick: bool) -> list[str]:
    n, n_rounds = (100, 2) if quick else (1000, 3)
    same = []
    with server() as srv, tempfile.TemporaryDirectory() as d:
        names = itertools.count()

        def attached() -> tuple[float, float]:
            dt, dc, ok = _step_cost(srv, str(Path(d) / f"remote-{next(names)}.sqlite"), n)
            same.append(ok)
            return dt, dc

        got = rounds(n_rounds, {"bare": lambda: _step_cost(srv, None, n)[:2], "attached": attached})
    (bare, bare_cpu), (on, on_cpu) = got["bare"], got["attached"]
    return [
        f"ONLINE step through the remote wrapper (HTTP to 127.0.0.1): bare {bare * 1e6:.0f} us, attached "
        f"{on * 1e6:.0f} us: capture adds {(on - bare) * 1e6:.0f} us/step ({(on - bare) / bare:.2f}x the round trip)",
        f"  the client thread's CPU per step: bare {bare_cpu * 1e6:.0f} us, attached {on_cpu * 1e6:.0f} us: capture "
        f"adds {(on_cpu - bare_cpu) * 1e6:.0f} us",
        f"export (no local game files) identical to the server's close answer: {all(same)}",
    ]
