"""`ledger serve`: the toolkit's own REST server with the ledger attached (any agent that speaks the REST API)."""

from __future__ import annotations

import signal
import sys
from datetime import UTC, datetime

import click

from ledger.cli.common import LedgerCommandError, count, listen_error, open_ledger, pick_port


@click.command("serve")
@click.option(
    "--environments",
    required=True,
    type=click.Path(exists=True, file_okay=False, dir_okay=True),
    metavar="DIR",
    help="An environment_files folder (metadata.json + game code per game), scanned as the toolkit does.",
)
@click.option(
    "--competition",
    is_flag=True,
    help="Competition mode (create_app(competition_mode=True)): one card, a game made once per card, an open card "
    "hidden (403), RESET on an untouched level re-applies the last observation, unplayed games made at close.",
)
# Bound like `ledger view` (view.py); each help names what its own server exposes.
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    metavar="HOST",
    help="Address to bind. Anything but a loopback address warns: the API's only check is the X-API-Key header.",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8001, show_default=True, help="TCP port (0: any free port)."
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
    import logging

    from ledger.core.events import CaptureContext
    from ledger.toolkit.rest import FailClosed, check_bindable, is_loopback, offline_arcade, serve, serve_problem

    quiet = logging.getLogger("ledger.serve.toolkit")
    quiet.setLevel(logging.WARNING)
    logging.getLogger("arc_agi.scorecard").setLevel(logging.WARNING)
    problem = serve_problem(competition)
    if problem is not None:
        raise LedgerCommandError(problem, 2)
    with open_ledger(ctx, write=True) as ledger:
        arcade = offline_arcade(environments, logger=quiet)
        if not arcade.available_environments:
            raise LedgerCommandError(f"no games under {environments}: no metadata.json found", 2)
        # A ledger write that fails is logged, so that the toolkit's handler finishes its work (it holds the server's
        # locks and caches); FailClosed turns the log record into the request's answer.
        ledger.attach(arcade, context=CaptureContext(ts=datetime.now(UTC), via="serve"), raise_errors=False)
        guard = FailClosed(ledger, arcade, on_refusal=lambda line: click.echo(f"ledger serve: {line}", err=True))
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
        try:
            serve(
                arcade,
                host=host,
                port=port,
                competition_mode=competition,
                extra_api_routes=lambda _arcade, app: guard.install(app),
            )
        except KeyboardInterrupt:
            interrupted.append(signal.SIGINT)
        except OSError as e:
            raise listen_error(host, port, e) from e
        finally:
            guard.uninstall()
    if interrupted:
        sys.exit(130)
