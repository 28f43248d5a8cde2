"""Every name of the toolkit's internals that live capture touches (none documented API), checked at attach. Reads go
through the installed release's era (:mod:`ledger.toolkit.eras`); see docs/capture.md for the versions."""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any, Literal

import requests

from ledger.errors import CaptureError
from ledger.toolkit import eras

try:
    from arc_agi import OperationMode
    from arc_agi.scorecard import Scorecard
    from arcengine import FrameData
except ImportError as e:  # a release without these (arc-agi 0.0.x is another package): refused at attach
    _IMPORT_PROBLEM: str | None = f"{type(e).__name__}: {e}"
    OperationMode = Scorecard = FrameData = None  # type: ignore[misc,assignment]
else:
    _IMPORT_PROBLEM = None

log = logging.getLogger(__name__)

#: Set to 1 to attach to an arc-agi release outside the tested range anyway (a warning is logged).
OVERRIDE_ENV = "LEDGER_ARC_AGI_ANY_VERSION"

#: The methods capture replaces on each object.
MANAGER_HOOKS = ("new_scorecard", "update_scorecard", "close_scorecard")
LOCAL_ARCADE_HOOKS = ("make", "close_scorecard", "create_scorecard")
REMOTE_ARCADE_HOOKS = ("create_scorecard", "close_scorecard", "make", "get_scorecard")
WRAPPER_HOOKS = ("step", "reset")
#: What else is read on the Arcade (on the manager: :meth:`Era.manager_fields`).
ARCADE_FIELDS = ("scorecard_manager", "available_environments", "operation_mode", "arc_api_key", "arc_base_url")
#: The modes played on the Arcade's own ``ScorecardManager`` (every era has both).
LOCAL_MODE_NAMES = ("OFFLINE", "NORMAL")


def version_problem(version: str | None, environ: Mapping[str, str] | None = None) -> tuple[str, bool] | None:
    """(message, overridden) when ``version`` (of arc-agi) is outside the tested releases, else None."""
    env = os.environ if environ is None else environ
    if version is None:
        msg = "arc-agi is not installed as a distribution (no version to check)"
    elif eras.era_of(version) is None:
        msg = f"arc-agi {version} is installed; live capture is tested with arc-agi {eras.tested_range()}"
    else:
        return None
    return msg, env.get(OVERRIDE_ENV, "").strip().lower() in ("1", "true", "yes")


@functools.cache
def installed_version() -> str | None:
    """The installed arc-agi release, or None (read once: a lookup scans sys.path)."""
    try:
        return metadata.version("arc-agi")
    except metadata.PackageNotFoundError:
        return None


def era() -> eras.Era:
    """The adapter of the installed release (the newest era's for one outside the tested range, overridden)."""
    return eras.era_of(installed_version()) or eras.NEWEST


def check_toolkit(arcade: Any) -> None:
    """Refuse (:class:`CaptureError`) an untested arc-agi release or an Arcade without a name capture uses."""
    version = installed_version()
    _refuse_unimportable()
    problem = version_problem(version)
    if problem is not None:
        msg, overridden = problem
        if not overridden:
            raise CaptureError(f"{msg}: nothing would be recorded reliably (set {OVERRIDE_ENV}=1 to attach anyway)")
        log.warning("%s; attaching anyway (%s is set): check its cards against the toolkit's", msg, OVERRIDE_ENV)
    current = era()
    missing = [f"Arcade.{n}" for n in ARCADE_FIELDS if not hasattr(arcade, n)]
    if not missing:
        mgr = arcade.scorecard_manager
        missing += [f"ScorecardManager.{n}" for n in (*current.manager_fields(), *MANAGER_HOOKS) if not hasattr(mgr, n)]
        hooks = REMOTE_ARCADE_HOOKS if capture_kind(arcade) == "remote" else LOCAL_ARCADE_HOOKS
        missing += [f"Arcade.{n}" for n in hooks if not callable(getattr(arcade, n, None))]
    if missing:
        raise CaptureError(
            f"this arc_agi (arc-agi {version or '?'}) has no {', '.join(missing)}: the ledger cannot capture it "
            f"(tested: arc-agi {eras.tested_range()})"
        )


def _refuse_unimportable() -> None:
    if _IMPORT_PROBLEM is not None:
        raise CaptureError(
            f"arc-agi {installed_version() or '?'} is not a toolkit the ledger can capture ({_IMPORT_PROBLEM}); "
            f"live capture is tested with arc-agi {eras.tested_range()}"
        )


def _modes(names: tuple[str, ...]) -> frozenset[Any]:
    # getattr: an era's OperationMode lacks the later members (0.9.1 has no COMPETITION).
    return frozenset(m for m in (getattr(OperationMode, n, None) for n in names) if m is not None)


def capture_kind(arcade: Any) -> Literal["local", "remote"]:
    """``remote`` for ONLINE/COMPETITION, ``local`` for OFFLINE/NORMAL; any other mode is refused, never guessed."""
    _refuse_unimportable()
    mode = getattr(arcade, "operation_mode", None)
    if mode in _modes(era().remote_mode_names()):
        return "remote"
    if mode in _modes(LOCAL_MODE_NAMES):
        return "local"
    raise CaptureError(f"unknown arc_agi operation mode {mode!r}: the ledger cannot tell how to capture this Arcade")


def manager(arcade: Any) -> Any:
    return arcade.scorecard_manager


def card_of_guid(mgr: Any) -> dict[str, str]:
    return mgr.guids


def scorecards(mgr: Any) -> dict[str, Any]:
    return mgr.scorecards


def played(sc: Any) -> bool:
    return bool(sc.cards)


def opening(sc: Any) -> dict[str, Any]:
    """The fields of a ``Scorecard`` that its CardOpened records (``competition_mode`` None in an era without)."""
    return {
        "source_url": sc.source_url,
        "tags": list(sc.tags) if sc.tags is not None else None,
        "opaque": sc.opaque,
        "competition_mode": era().competition_mode(sc),
        "api_key": sc.api_key,
    }


def auto_close_times(mgr: Any, card_id: str) -> tuple[Any, Any, Any, Any] | None:
    """(last update, opened at, idle limit, open limit or None) of an open card; None if gone."""
    sc = mgr.scorecards.get(card_id)
    if sc is None:
        return None
    idle_for, max_open_for = era().limits(mgr)
    return sc.last_update, sc.open_at, idle_for, max_open_for


def wrapper_card(wrapper: Any) -> str:
    return wrapper.scorecard_id


def empty_frame(out: Any) -> bool:
    """True for a wrapper's answer with no frame that the toolkit keeps from its scorecard (0.9.6 on: the capture
    records it itself); False before, when the manager's hook sees it."""
    return len(out.frame) == 0 and era().wrapper_skips_empty_frames


def local_games(arcade: Any) -> list[str]:
    """The game ids the Arcade read from its own ``metadata.json`` files (not from the server's list)."""
    return sorted({e.game_id for e in arcade.available_environments if getattr(e, "local_dir", None)})


def parse_frame(data: Any) -> Any:
    """An arcengine ``FrameData`` from a server's JSON answer (raises on a malformed one)."""
    return FrameData.model_validate(data)


def state_name(state: Any) -> str:
    return str(state.value)


_wrap_lock = threading.Lock()
_originals: dict[tuple[Any, str], Callable[..., Any]] = {}


def _wrap_once(cls: Any, name: str, replacement: Callable[..., Any]) -> Callable[..., Any]:
    """Patch ``cls.name`` with ``replacement`` the first time only; the original, every time."""
    with _wrap_lock:
        if (cls, name) not in _originals:
            _originals[cls, name] = getattr(cls, name)
            setattr(cls, name, replacement)
        return _originals[cls, name]


def wrap_session_request(replacement: Callable[..., Any]) -> Callable[..., Any]:
    return _wrap_once(requests.Session, "request", replacement)


def wrap_scorecard_update(replacement: Callable[..., Any]) -> Callable[..., Any]:
    return _wrap_once(Scorecard, "update_scorecard", replacement)


def offline_arcade(environments_dir: str, logger: Any = None) -> Any:
    from arc_agi import Arcade, OperationMode

    return Arcade(operation_mode=OperationMode.OFFLINE, environments_dir=environments_dir, logger=logger)


def palette() -> list[str]:
    """The toolkit's 16 colours (``arc_agi.rendering.COLOR_MAP``) as ``#rrggbb``, index = cell value."""
    from arc_agi.rendering import COLOR_MAP

    return ["#" + COLOR_MAP[i].lstrip("#")[:6].lower() for i in range(16)]
