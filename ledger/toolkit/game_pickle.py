"""Pickling a game's state for :mod:`ledger.toolkit.game_states`. The toolkit runs a game file as an unregistered
module, so a snapshot names its classes by number; for a game the plain pickle does not copy, sets are written sorted
and the game's functions by their code's number."""

from __future__ import annotations

import copyreg
import pickle
import sys
from collections.abc import Callable
from types import CellType, CodeType, FunctionType
from typing import Any

#: Classes a snapshot names by number: process-wide and append-only, so a number means one class for good.
_CLASSES: list[type] = []
_NUMBERS: dict[int, int] = {}
#: The game a snapshot is being loaded into: what the snapshot's references to its own game become.
_INTO: list[Any] = []


def _new(i: int, *args: Any) -> Any:
    cls = _CLASSES[i]
    return cls.__new__(cls, *args)


def _new_ex(i: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    cls = _CLASSES[i]
    return cls.__new__(cls, *args, **kwargs)


def _call(i: int, *args: Any) -> Any:
    return _CLASSES[i](*args)


def _the_game() -> Any:
    return _INTO[-1]


#: The arrays of the snapshot being loaded (see :meth:`ledger.toolkit.game_states.Engine._dumps`).
_ARRAYS: list[tuple[Any, ...]] = []


def _array(i: int, _dtype: str, _shape: Any, writeable: bool) -> Any:
    a = _ARRAYS[-1][i].copy()
    if not writeable:
        a.flags.writeable = False
    return a


def _named(c: type) -> bool:
    obj: Any = sys.modules.get(c.__module__)
    for part in c.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is c


def game_module(game: Any) -> tuple[list[type], dict[str, Any]]:
    """The classes of the game's own module (its class and bases first) and the module's globals ({} if none)."""
    cls = type(game)
    found = dict.fromkeys(c for c in cls.__mro__ if c.__module__ == cls.__module__)
    module_globals = next((g for v in vars(cls).values() if isinstance(g := getattr(v, "__globals__", None), dict)), {})
    found.update((x, None) for x in module_globals.values() if isinstance(x, type) and x.__module__ == cls.__module__)
    return list(found), module_globals


def _own_classes(game: Any) -> list[type]:
    return [c for c in game_module(game)[0] if not _named(c)]


def _number(found: list[Any], numbers: dict[int, int], obj: Any) -> int:
    i = numbers.get(id(obj))
    if i is None:
        i = numbers[id(obj)] = len(found)
        found.append(obj)  # held for good, so its id stays its own
    return i


def _by_number(c: type) -> Callable[[Any], Any]:
    """A reducer that pickles an object of ``c`` as pickle would, naming ``c`` by its number."""
    i = _number(_CLASSES, _NUMBERS, c)

    def reduce(obj: Any) -> Any:
        rv = obj.__reduce_ex__(5)
        if isinstance(rv, str):
            return rv
        func, args, *rest = rv
        if func is copyreg.__newobj__ and args and args[0] is c:  # type: ignore[attr-defined]
            return (_new, (i, *args[1:]), *rest)
        if func is copyreg.__newobj_ex__ and args and args[0] is c:  # type: ignore[attr-defined]
            return (_new_ex, (i, args[1], args[2]), *rest)
        if func is c:
            return (_call, (i, *args), *rest)
        return rv

    return reduce


#: The code objects and module globals of game functions a snapshot holds, by number (as the classes are).
_CODES: list[CodeType] = []
_CODE_NUMBERS: dict[int, int] = {}
_GLOBALS: list[dict[str, Any]] = []
_GLOBAL_NUMBERS: dict[int, int] = {}


def _function(code: int, module_globals: int, name: str, closure: tuple[Any, ...] | None) -> FunctionType:
    return FunctionType(_CODES[code], _GLOBALS[module_globals], name, None, closure)


def _module_function(module_globals: int, name: str) -> FunctionType:
    f: FunctionType = _GLOBALS[module_globals][name]
    return f


def _fill_function(f: FunctionType, state: tuple[Any, ...]) -> None:
    f.__defaults__, f.__kwdefaults__, f.__qualname__, d = state
    if d:
        f.__dict__.update(d)


def _cell() -> CellType:
    return CellType()


def _fill_cell(c: CellType, state: tuple[Any, ...]) -> None:
    c.cell_contents = state[0]


def functions_by_code(module_globals: dict[str, Any]) -> Callable[[Any], Any]:
    """``reducer_override`` for the game module's functions: a named one by its name; any other (a run-time lambda)
    by its code's number, its cells and defaults by value (a cell filled after memoizing, so a closure over its own
    holder loads over the copy)."""
    g = _number(_GLOBALS, _GLOBAL_NUMBERS, module_globals)

    def override(o: Any) -> Any:
        t = type(o)
        if t is FunctionType and o.__globals__ is module_globals:
            if module_globals.get(o.__name__) is o:  # the module's own function: the same object in every copy
                return _module_function, (g, o.__name__)
            code = _number(_CODES, _CODE_NUMBERS, o.__code__)
            state = (o.__defaults__, o.__kwdefaults__, o.__qualname__, o.__dict__ or None)
            return _function, (code, g, o.__name__, o.__closure__), state, None, None, _fill_function
        if t is CellType:
            try:
                value = o.cell_contents
            except ValueError:  # a cell not yet filled
                return _cell, ()
            return _cell, (), (value,), None, None, _fill_cell
        return NotImplemented

    return override


class _Pickler(pickle.Pickler):
    """A pickler with a ``reducer_override`` (the C pickler reads it when it is made, so it is set first)."""

    def __init__(self, file: Any, override: Callable[[Any], Any]) -> None:
        self.reducer_override = override  # type: ignore[method-assign]
        super().__init__(file, protocol=5)


def by_value(keep: Callable[[str, str], str], sets: bool) -> Callable[[Any], Any]:
    """Persistent ids: each string as the first equal one ``keep`` was given; with ``sets``, each set sorted by repr
    (its pickle order depends on its history), one id object per set."""
    ids: dict[int, tuple[tuple[int, tuple[Any, ...]], Any]] = {}

    def by_value(o: Any) -> Any:
        t = type(o)
        if t is str:
            return keep(o, o)
        if sets and (t is set or t is frozenset):
            found = ids.get(id(o))
            if found is None:
                # The set is held beside its id so that no other object takes its id during this dump.
                found = ids[id(o)] = ((int(t is frozenset), tuple(sorted(o, key=repr))), o)
            return found[0]
        return None

    return by_value


def _sets_loader() -> Callable[[Any], Any]:
    """``persistent_load`` for :func:`by_value` with sets: a string is itself; a set's id becomes one set."""
    made: dict[int, tuple[Any, Any]] = {}

    def load(pid: Any) -> Any:
        if type(pid) is str:
            return pid
        found = made.get(id(pid))
        if found is None:
            kind, items = pid
            found = made[id(pid)] = (pid, frozenset(items) if kind else set(items))
        return found[1]

    return load
