"""`ledger serve`: the toolkit's own REST server with the ledger attached (any agent that speaks the REST API)."""

from __future__ import annotations

import os
import signal
import sys
from datetime import UTC, datetime
from typing import Any

import click

from ledger.cli.common import (
    LedgerCommandError,
    check_bindable,
    count,
    environments_option,
    is_loopback,
    listen_error,
    listen_options,
    open_ledger,
    pick_port,
)
from ledger.errors import LedgerError


@click.command("serve")
@environments_option(
    "An environment_files folder (metadata.json + game code per game), scanned as the toolkit does.", required=True
)
@click.option(
    "--competition",
    is_flag=True,
    help="Competition mode (create_app(competition_mode=True)): one card, a game made once per card, an open card "
    "hidden (403), RESET on an untouched level re-applies the last observation, unplayed games made at close.",
)
@listen_options(
    "Address to bind. Anything but a loopback address warns: the API's only check is the X-API-Key header.",
    8001,
    "TCP port (0: any free port).",
)
@click.pass_context
def serve(ctx: click.Context, environments: str, competition: bool, host: str, port: int) -> None:
    """Agents in any language send /api/scorecard/open, /api/cmd/RESET, /api/cmd/ACTION1..7 and
    /api/scorecard/close with an X-API-Key header; each card is recorded exactly as the server counts it
    (the card the server returns at close equals `ledger export CARD`). Ctrl-C stops the server (exit 130).

    Fail closed: a request the ledger could not record is answered 503 (JSON error LEDGER_NOT_RECORDED, saying
    why); its card is then incomplete, and every later request on it is answered 500 (LEDGER_CARD_INCOMPLETE);
    closing it still closes it on the server, and the ledger retracts it, saying why.

    The server is the installed arc-agi's own: 0.9.1 has none (exit 2, saying so), 0.9.2 has no --competition.

    Examples:

    \b
      ledger serve --environments environment_files                            # http://127.0.0.1:8001/
      ledger serve --environments environment_files --competition --port 8002
    """
    from ledger.capture.demo import quiet_toolkit_logger
    from ledger.capture.rest import FailClosed, serve_problem
    from ledger.domain.events import CaptureContext
    from ledger.toolkit.arc_adapter import offline_arcade

    quiet = quiet_toolkit_logger("ledger.serve.toolkit")
    problem = serve_problem(competition)
    if problem is not None:
        raise LedgerCommandError(problem, 2)
    with open_ledger(ctx, write=True) as ledger:
        arcade = offline_arcade(environments, logger=quiet)
        if not arcade.available_environments:
            raise LedgerCommandError(f"no games under {environments}: no metadata.json found", 2)
        # A ledger write that fails is logged, so that the toolkit's handler finishes its work (it holds the server's
        # locks and caches); FailClosed turns the log record into the request's answer.
        # Reasoning is kept: a REST harness sends its usage there (arcagi3's cumulative "tokens:"), and the toolkit's
        # ActionInput refuses any over its 16 KB guard before the ledger sees it, as for an attached Arcade.
        opened: list[str] = []
        ledger.attach(
            arcade,
            context=CaptureContext(ts=datetime.now(UTC), via="serve"),
            raise_errors=False,
            record_reasoning=True,
            on_open=opened.append,
        )
        guard = FailClosed(
            ledger.repository, arcade, on_refusal=lambda line: click.echo(f"ledger serve: {line}", err=True)
        )
        try:
            port = pick_port(host, port)
            check_bindable(host, port)
        except OSError as e:
            raise listen_error(host, port, e) from e
        if not is_loopback(host):
            click.echo(
                f"Warning: serving on {host}, reachable from other machines; the API has no authentication "
                "beyond the X-API-Key header",
                err=True,
            )
        mode = "competition" if competition else "normal"
        click.echo(
            f"serving {count(len(arcade.available_environments), 'game')} on http://{host}:{port} ({mode} mode); "
            f"ledger {ledger.store.describe()}",
            err=True,
        )
        interrupted: list[int] = []

        def on_sigint(signum: int, _frame: object) -> None:
            interrupted.append(signum)  # werkzeug swallows the KeyboardInterrupt; the exit status must not
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, on_sigint)

        def routes(_arcade: object, app: Any) -> None:
            guard.install(app)
            mount_card_pages(app, ledger, environments, arcade, opened if competition else None)

        try:
            arcade.listen_and_serve(
                host=host,
                port=port,
                competition_mode=competition,
                extra_api_routes=routes,
            )
        except KeyboardInterrupt:
            interrupted.append(signal.SIGINT)
        except OSError as e:
            raise listen_error(host, port, e) from e
        finally:
            guard.uninstall()
        from ledger.app.listing import open_cards_report

        try:
            for line in open_cards_report(ledger, opened, datetime.now(UTC), os.environ):
                click.echo(f"ledger serve: {line}", err=True)
        except LedgerError as e:
            click.echo(f"ledger serve: could not list the cards left open: {e}", err=True)
    if interrupted:
        sys.exit(130)


def mount_card_pages(
    app: Any, ledger: Any, environments: str, arcade: Any, competition_cards: list[str] | None
) -> None:
    """The viewer's pages under ``/scorecards/`` (``/scorecards/<card id>`` as the ARC site has it). Reasoning stays off
    these pages (anyone who reaches the API reaches them); while a ``competition_cards`` card is open they answer 403,
    as the API hides an open competition card's score."""
    from flask import request
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    from ledger.web import pages
    from ledger.web.server import create_app

    source = ledger.store.describe()
    viewer = create_app(ledger, environments=environments, source=source, with_reasoning=False, card_ids_at_root=True)
    if competition_cards is not None:
        cards: list[str] = competition_cards

        def hide_while_open() -> Any:
            if request.path.startswith("/static/") or not any(c in arcade.scorecard_manager.scorecards for c in cards):
                return None
            text = (
                "in competition mode the server hides a card until it is closed (GET /api/scorecard answers 403 "
                "too); this page shows it once the card is closed"
            )
            return pages.message_page("Hidden until closed", text, links=pages.LiveLinks(), source=source), 403

        viewer.before_request(hide_while_open)
    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/scorecards": viewer.wsgi_app})
