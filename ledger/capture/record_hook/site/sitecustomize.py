"""``ledger record``: loaded at start-up by every Python process the recorded command starts. Once ``arc_agi.base`` is
imported, ``Arcade.__init__`` is wrapped to attach the ledger (standard library only until then; a shadowed
``sitecustomize`` still runs). An Arcade that cannot be attached raises :class:`NotRecorded`."""

import contextlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_shadowed_sitecustomize() -> None:
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None and spec.origin != os.path.abspath(__file__):
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


class NotRecorded(RuntimeError):
    """This Arcade cannot be recorded by ``ledger record``, so it is not let run (nothing it plays would count)."""


def _note(entry: dict) -> None:
    # The twin of ``record_hook.child._note``, kept apart on purpose: this file must run in a Python that cannot
    # import the ledger (to say so), so it imports nothing of it.
    path = os.environ.get("LEDGER_RECORD_CARDS")
    if path:
        import json

        # One short O_APPEND write per note: lines from several processes do not interleave.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
        finally:
            os.close(fd)


def _hook_arcade(module: object) -> None:
    cls = module.Arcade  # type: ignore[attr-defined]
    original_init = cls.__init__

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        original_init(self, *args, **kwargs)
        try:
            from ledger.capture.record_hook.child import attach

            attach(self)
        except Exception as e:
            # Fail closed: an Arcade that plays unrecorded under `ledger record` is data lost without a word.
            reason = f"{type(e).__name__}: {e}"
            version = sys.version.split()[0]
            _note({"uncaptured": reason, "pid": os.getpid(), "python": sys.executable, "version": version})
            raise NotRecorded(
                f"ledger record: this Arcade cannot be recorded (Python {version} at {sys.executable}): {reason}"
            ) from e

    cls.__init__ = __init__


#: The paths of the ARC API a client plays through (the toolkit's REST server, the ARC server, ``ledger serve``).
_API_PATHS = ("/api/cmd/", "/api/scorecard/open", "/api/scorecard/close")


def _hook_http(module: object) -> None:
    """Note the first request to the ARC API sent without the toolkit: a REST client only ``ledger serve`` captures."""
    cls = module.HTTPConnection  # type: ignore[attr-defined]
    original = cls.putrequest
    seen: list[str] = []

    def putrequest(self: object, method: str, url: str, *args: object, **kwargs: object) -> object:
        if not seen and any(p in url for p in _API_PATHS):
            seen.append(url)
            # A note is a hint: never the reason a request fails.
            with contextlib.suppress(OSError):
                _note({"http": f"{method} {getattr(self, 'host', '?')}:{getattr(self, 'port', '?')}{url}"})
        return original(self, method, url, *args, **kwargs)

    cls.putrequest = putrequest


_HOOKS = {"arc_agi.base": _hook_arcade, "http.client": _hook_http}


class _ArcadeFinder:
    """Finds ``arc_agi.base`` (and ``http.client``) with the other finders and runs its hook once it is loaded."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        hook = _HOOKS.get(name)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original_exec = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            original_exec(module)
            hook(module)

        setattr(loader, "exec_module", exec_module)  # noqa: B010 (a patch of this one loader, not a typed attribute)
        return spec


def _install() -> None:
    if not os.environ.get("LEDGER_RECORD_DB"):
        return
    # The ledger's own import paths, after the command's: the command's packages win where both have one.
    for p in os.environ.get("LEDGER_RECORD_PATH", "").split(os.pathsep):
        if p and p not in sys.path:
            sys.path.append(p)
    for name, hook in _HOOKS.items():
        if name in sys.modules:
            hook(sys.modules[name])
    if any(name not in sys.modules for name in _HOOKS):
        sys.meta_path.insert(0, _ArcadeFinder())


_install()
_run_shadowed_sitecustomize()
