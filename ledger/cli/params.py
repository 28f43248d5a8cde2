"""Click parameter types the commands share."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import click

_AGE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class Since(click.ParamType):
    """A moment: an ISO date or time (UTC unless it has an offset), or an age back from now (``30m``, ``7d``)."""

    name = "when"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        age = _AGE.match(text)
        if age:
            try:
                return datetime.now(UTC) - timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
            except OverflowError:
                self.fail(f"{text!r} reaches back before the year 1")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(f"{text!r} is neither an ISO date/time (2026-12-01, 2026-12-01T09:30) nor an age (30m, 12h, 7d)")
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


SINCE = Since()


_HEX64 = re.compile(r"[0-9a-f]{64}")


def head_hash(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    v = value.strip().lower()
    if not _HEX64.fullmatch(v):
        raise click.BadParameter(
            "a head hash is 64 hexadecimal characters (as `ledger verify` or `ledger audit` prints it)"
        )
    return v


def expect_head_option(help_text: str) -> Any:
    return click.option("--expect-head", callback=head_hash, default=None, metavar="HASH", help=help_text)


def calculator_version(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """``--calculator VERSION``: a published arc-agi release; another is a usage error (exit 2) naming them."""
    if value is None:
        return None
    from ledger.domain.calculators import UnknownCalculator, get

    try:
        return get(value).version
    except UnknownCalculator as e:
        raise click.BadParameter(str(e)) from None


def calculator_option(help_text: str) -> Any:
    return click.option("--calculator", default=None, metavar="VERSION", callback=calculator_version, help=help_text)
