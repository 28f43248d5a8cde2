"""What every ``ledger`` command shares: opening the ledger, errors and their exit codes, output, common options."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

import click
import msgspec

from ledger.errors import LedgerError

if TYPE_CHECKING:
    from ledger.ledger import Ledger

# Choices the options offer, spelled here so that `ledger --help` need not import the modules that define them
# (tests/test_readonly_open.py checks they equal ledger.rules.rescoring.MATCHES, ledger.app.listing.SORT_KEYS
# and the storage's Durability).
MATCHES: tuple[str, ...] = ("exact", "base")
DURABILITIES: tuple[str, ...] = ("normal", "full", "batched")
SORT_KEYS: tuple[str, ...] = ("opened", "closed", "score", "actions", "events", "id")


class LedgerCommandError(click.ClickException):
    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        # Click types exit_code as a class constant; here each error carries its own, and Click reads the instance.
        self.exit_code = exit_code  # type: ignore[misc]


class Entry(NamedTuple):
    """One command as `ledger --help` lists it, known without importing the command's module."""

    where: str  # module:attribute in ledger.cli, imported only when the command runs (or its --help is asked)
    job: str  # a key of JOBS
    summary: str  # its help's first line, said only here: the command's docstring holds the rest
    opens: str  # the ledger --db names: "read", "write" (also takes --durability), or "" (opens none)


class LedgerGroup(click.Group):
    """The one place a :class:`~ledger.errors.LedgerError` becomes a one-line message and its exit code."""

    def __init__(
        self, *args: Any, lazy: dict[str, Entry], jobs: dict[str, str], subcommands_open: dict[str, str], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy, self.jobs, self.subcommands_open = lazy, jobs, subcommands_open

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The commands first, as uv and git list them: they are what a reader of `ledger --help` looks for.
        self.format_commands(ctx, formatter)
        click.Command.format_options(self, ctx, formatter)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # One column for every section, so that the summaries line up down the whole list.
        width = max((len(name) for name in self.lazy), default=0)
        for job, title in self.jobs.items():
            rows = [(name.ljust(width), e.summary) for name, e in self.lazy.items() if e.job == job]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def loaded(self, cmd_name: str) -> click.Command | None:
        """The subcommand (its module imported now if listed lazily), its help's first line from its entry."""
        if cmd_name not in self.commands and cmd_name in self.lazy:
            import importlib

            entry = self.lazy[cmd_name]
            module, attr = entry.where.split(":")
            cmd: click.Command = getattr(importlib.import_module(f"ledger.cli.{module}"), attr)
            if not getattr(cmd, "_ledger_summary", False):
                import inspect

                cmd.help = f"{entry.summary}.\n\n{inspect.cleandoc(cmd.help or '')}"
                cmd.short_help = entry.summary
                cmd._ledger_summary = True  # type: ignore[attr-defined]
            name_kinds(cmd)
            self.add_command(cmd, cmd_name)
        return self.commands.get(cmd_name)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand, also taking --db (and --durability) after its name when it opens a ledger."""
        cmd = self.loaded(cmd_name)
        if cmd is not None and not getattr(cmd, "_ledger_common", False):
            entry = self.lazy.get(cmd_name)
            add_common_options(cmd, entry.opens if entry else "read", cmd_name, self.subcommands_open)
            cmd._ledger_common = True  # type: ignore[attr-defined]
        return cmd

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        # `ledger --help` prints while its arguments are parsed, before invoke: a closed pipe there ends as in a
        # command (Click itself would exit 1, the code of a failed check).
        try:
            return super().make_context(info_name, args, parent, **extra)
        except OSError as e:
            raise click.exceptions.Exit(output_failed(e)) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with _ctrl_c_latched() as interrupted:
                rv = super().invoke(ctx)
            if interrupted:
                raise KeyboardInterrupt
            # Output still buffered fails here, while the command can still say so (not at interpreter exit).
            sys.stdout.flush()
            return rv
        except OSError as e:
            ctx.exit(output_failed(e))
        except LedgerError as e:
            raise LedgerCommandError(str(e), e.exit_code) from e
        except KeyboardInterrupt:
            # Ctrl-C: 130 like any shell, and one line on what the ledger now holds (each write is one transaction).
            report = (ctx.obj or {}).get("on_interrupt")
            line = report() if callable(report) else INTERRUPTED
            click.echo(f"\n{line}", err=True)
            ctx.exit(130)
        except ImportError as e:  # an optional dependency (the `arc` or `postgres` extra) is not installed
            extra = missing_extra(e)
            if extra is None:
                raise
            raise LedgerCommandError(extra, 1) from e
        except Exception as e:
            # A database that refuses a statement the ledger's schema allows (a table dropped by hand, a file that
            # is no database): one line, never a traceback.
            if not _database_error(e):
                raise
            raise LedgerCommandError(
                f"the database refused: {e} (`ledger verify` says what the ledger holds)", 1
            ) from e


def _database_error(e: Exception) -> bool:
    # By module name: the CLI imports no database driver (only ledger/store/ does).
    return any(c.__module__.partition(".")[0] in ("sqlite3", "psycopg") for c in type(e).__mro__)


@contextmanager
def _ctrl_c_latched() -> Iterator[list[int]]:
    """Ctrl-C still raises KeyboardInterrupt, and is also noted in the list yielded (the command then exits 130). Python
    drops an exception raised in a finalizer or weakref callback (importlib runs one after every import), so a real
    SIGINT is sent again a moment later from a timer thread."""
    import signal
    import threading

    noted: list[int] = []
    in_hook = [False]
    timers: list[threading.Timer] = []

    def on_sigint(signum: int, _frame: Any) -> None:
        noted.append(signum)
        if in_hook[0]:
            return  # raised here it would be dropped again; the timer's SIGINT comes after
        raise KeyboardInterrupt

    def on_unraisable(u: Any) -> None:
        if not (isinstance(u.exc_value, KeyboardInterrupt) and noted):
            hook(u)
            return
        in_hook[0] = True
        try:
            again = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
            again.daemon = True
            timers.append(again)
            again.start()
        finally:
            in_hook[0] = False

    previous = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        with contextlib.suppress(ValueError):  # not the main thread (an embedding program): Ctrl-C is its business
            previous = signal.signal(signal.SIGINT, on_sigint)
    hook = sys.unraisablehook
    if previous is not None:
        sys.unraisablehook = on_unraisable
    try:
        yield noted
    finally:
        if previous is not None:
            for t in timers:
                t.cancel()  # the command is over (it was interrupted already): no SIGINT after it
            sys.unraisablehook = hook
            signal.signal(signal.SIGINT, previous)


def count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def size(n_bytes: float) -> str:
    """A byte count as people read it: ``812 bytes``, ``4.2 KB``, ``31.0 MB`` (never ``0.0 MB`` for a small file)."""
    if n_bytes < 1000:
        return f"{n_bytes:.0f} bytes"
    if n_bytes < 1e6:
        return f"{n_bytes / 1e3:.1f} KB"
    return f"{n_bytes / 1e6:.1f} MB"


def pick_port(host: str, port: int) -> int:
    if port:
        return port
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def listen_error(host: str, port: int, e: OSError) -> LedgerCommandError:
    reason = e.strerror or str(e) or type(e).__name__
    return LedgerCommandError(f"cannot serve on {host}:{port}: {reason}", 2)


#: What Ctrl-C prints when the command did not say more: every write is one transaction, so nothing is half-written.
INTERRUPTED = "interrupted: the ledger holds everything committed before Ctrl-C and nothing half-written"

#: Optional dependencies: the module a command failed to import -> the extra that installs it.
_EXTRAS = {
    "arc_agi": ("arc", "the ARC toolkit"),
    "arcengine": ("arc", "the ARC toolkit"),
    "psycopg": ("postgres", "psycopg"),
}


def missing_extra(e: ImportError) -> str | None:
    """The one-line advice for an optional dependency that is not installed (None for any other ImportError)."""
    name = (e.name or "").split(".")[0]
    if name not in _EXTRAS:
        name = next((n for n in _EXTRAS if n in str(e)), "")
    if not name:
        return None
    extra, what = _EXTRAS[name]
    return (
        f"this needs {what} ({name} cannot be imported: {e}); install the extra: "
        f"pip install 'arc-scorecard-ledger[{extra}]'"
    )


@contextmanager
def open_ledger(ctx: click.Context, *, write: bool = False) -> Iterator[Ledger]:
    """The ledger ``--db`` names, closed when the block ends; read-only (never created or migrated) unless ``write``."""
    from ledger.ledger import Ledger

    if not write:
        ledger = Ledger.open(ctx.obj["db"], readonly=True)
    else:
        ledger = Ledger.open(ctx.obj["db"], durability=ctx.obj["durability"])
    try:
        yield ledger
    finally:
        ledger.close()


def write_output(text: str, out: str | None) -> None:
    if out is None or out == "-":
        click.echo(text)
        return
    from ledger.app.output import write_text_file

    write_text_file(text + "\n", out)


def echo_json(obj: Any) -> None:
    import json

    click.echo(json.dumps(msgspec.to_builtins(obj), indent=2))


def emit(outcome: Any, as_json: bool) -> None:
    """A service's outcome: its ``to_json()``, or its ``lines()`` and its ``usage_error``; then its ``exit_code``."""
    if as_json:
        echo_json(outcome.to_json())
    else:
        for line in outcome.lines():
            click.echo(line)
        error = getattr(outcome, "usage_error", None)  # exit 2: the JSON says it already
        if error:
            click.echo(f"Error: {error}", err=True)
    code = getattr(outcome, "exit_code", 0)
    if code:
        sys.exit(code)


def json_option(help_text: str) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def out_option(help_text: str, dest: str = "out") -> Callable[..., Any]:
    return click.option("-o", "--output", dest, default=None, metavar="FILE", help=help_text)


def tags_option(help_text: str) -> Callable[..., Any]:
    return click.option("--tag", "tags", multiple=True, metavar="TAG", help=help_text)


def include_retracted_option(help_text: str) -> Callable[..., Any]:
    return click.option("--include-retracted", is_flag=True, help=help_text)


def environments_option(help_text: str, *, required: bool = False, path_type: Any = None) -> Callable[..., Any]:
    """``--environments DIR``: a game files folder (each command says what it does with it)."""
    return click.option(
        "--environments",
        type=click.Path(exists=True, file_okay=False, path_type=path_type),
        required=required,
        default=None,
        metavar="DIR",
        help=help_text,
    )


def listen_options(host_help: str, port: int, port_help: str) -> Callable[..., Any]:
    def options(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option("--port", type=click.IntRange(0, 65535), default=port, show_default=True, help=port_help)(f)
        return click.option("--host", default="127.0.0.1", show_default=True, metavar="HOST", help=host_help)(f)

    return options


def card_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--until",
        type=click.IntRange(min=1, max=2**63 - 1),  # a database integer: larger cannot be a version
        default=None,
        metavar="VERSION",
        help="The card as it stood after its own event VERSION (the numbers `ledger events` and `ledger audit` "
        "show); a version the card does not have exits 2.",
    )(f)
    return card_argument(f)


def match_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--all-environments",
        is_flag=True,
        help="Competition view: score against every game of the baseline set, an unplayed game appearing with a "
        "0-action run that scores 0.",
    )(f)
    return match_option(
        "exact: the toolkit's rule (same game_id). base: same 4-letter base id when the version id changed."
    )(f)


def match_option(help_text: str) -> Callable[..., Any]:
    return click.option("--match", type=click.Choice(MATCHES), default="exact", show_default=True, help=help_text)


def scoring_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = match_options(f)
    return click.option(
        "--baselines",
        default=None,
        metavar="LABEL|ID",
        help="Score under this set (label or id, see `ledger baselines list`), not the one the card was played under.",
    )(f)


def complete_card_ids(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion: the card ids of the ledger named so far on the command line (opened read-only)."""
    from click.shell_completion import CompletionItem

    from ledger.ledger import Ledger

    db = _completion_db(ctx)
    if "://" not in db and not os.path.isfile(db):
        return []  # completing must never create a ledger
    try:
        with Ledger.open(db, readonly=True) as ledger:
            ids = ledger.card_ids()
    except Exception:
        return []
    return [CompletionItem(c) for c in ids if c.startswith(incomplete)]


def _completion_db(ctx: click.Context) -> str:
    from ledger.ledger import default_db

    c: click.Context | None = ctx
    while c is not None:
        if c.params.get("db"):
            return str(c.params["db"])
        c = c.parent
    return default_db()


def card_argument(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.argument("card_id", metavar="CARD", shell_complete=complete_card_ids)(f)


def shown_db(ledger: Ledger, db: str) -> str:
    return ledger.store.describe() if "://" in db else db  # never echo a password given in a URL


def _set_obj(key: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.ensure_object(dict)[key] = value

    return callback


#: The metavar of each kind of value an option takes, whatever the command: a file is FILE, a folder DIR, a count N.
KIND_METAVARS = {"file": "FILE", "dir": "DIR", "int": "N"}


def _kind(t: click.ParamType) -> str | None:
    if isinstance(t, click.Path) and t.file_okay != t.dir_okay:
        return "file" if t.file_okay else "dir"
    return "int" if isinstance(t, click.types.IntParamType) else None


def name_kinds(command: click.Command) -> None:
    """Give every option of ``command`` (and its subcommands) without a metavar the one of its kind (KIND_METAVARS)."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            name_kinds(sub)
    for param in command.params:
        if isinstance(param, click.Option) and param.metavar is None and not param.is_flag:
            kind = _kind(param.type)
            if kind is not None:
                param.metavar = KIND_METAVARS[kind]


def add_common_options(
    command: click.Command, opens: str, path: str = "", overrides: dict[str, str] | None = None
) -> None:
    """Let ``ledger COMMAND --db X`` mean ``ledger --db X COMMAND`` (and ``--durability`` on a writing command);
    a group's subcommands open as it does unless ``overrides`` names them (``"baselines import"``)."""
    overrides = overrides or {}
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            sub_path = f"{path} {name}".strip()
            add_common_options(sub, overrides.get(sub_path, opens), sub_path, overrides)
        return
    if not opens:
        return
    names = {o for p in command.params for o in getattr(p, "opts", [])}
    if "--db" not in names:
        command.params.append(
            click.Option(
                ["--db"],
                default=None,
                expose_value=False,
                callback=_set_obj("db"),
                metavar="PATH|URL",
                help="The ledger (same as `ledger --db`).",
            )
        )
    if opens == "write" and "--durability" not in names:
        command.params.append(
            click.Option(
                ["--durability"],
                type=click.Choice(DURABILITIES),
                default=None,
                expose_value=False,
                callback=_set_obj("durability"),
                help="Same as `ledger --durability`.",
            )
        )


class _Output(io.FileIO):
    """Standard output's file, whose write errors say they are the output's (a full disk, a closed pipe)."""

    def write(self, b: Any) -> int:
        try:
            return super().write(b)
        except OSError as e:
            e.ledger_output = True  # type: ignore[attr-defined]
            raise


def guard_output() -> None:
    out = sys.stdout
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file: nothing the process writes can fail this way
    out.flush()
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_Output(fd, "w", closefd=False)),
        encoding=out.encoding,
        errors=out.errors,
        line_buffering=bool(out.line_buffering),
    )


def output_failed(e: OSError) -> int:
    """For a failed write to standard output: say so in one line (nothing for a closed pipe, as for ``head``),
    drop what is left to write, and give the exit code. Called while ``e`` is handled: any other error is raised
    again, as it came."""
    if not getattr(e, "ledger_output", False):
        raise
    name = "standard output"
    with contextlib.suppress(OSError):
        target = os.readlink("/proc/self/fd/1")
        if target.startswith("/"):
            name += f" ({target})"
    # What is still buffered goes nowhere: the flush at interpreter exit must not fail again.
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    if e.errno == errno.EPIPE:
        from ledger.errors import CLOSED_PIPE

        return CLOSED_PIPE
    with contextlib.suppress(OSError):
        click.echo(f"Error: cannot write to {name}: {e.strerror or e}", err=True)
    return 2


def allow_broken_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--allow-broken",
        is_flag=True,
        help="Show a card whose chain is not whole (events missing) as far as the log holds it, marked as broken; "
        "without it such a card is refused with exit 1.",
    )(f)


# The servers' address checks (`view`, `serve`): here, so the viewer starts without the toolkit capture loads.
def check_bindable(host: str, port: int) -> None:
    """Raise ``OSError`` if ``host:port`` cannot be bound now (werkzeug would only print and exit)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
