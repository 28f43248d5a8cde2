"""The layout's rules, read from the source's syntax trees (no import-linter: no new dependency).

Imports run one way, the data flow's: cli -> web -> imports -> app -> the ledger facade -> capture / resim -> formats
-> store / toolkit -> rules -> domain. A module may import any layer below its own, never one above, and siblings
(store and toolkit, capture and resim) never import each other. Imports
inside functions count, and so do imports under ``if TYPE_CHECKING:``, for the direction and for cycles (a type
names a module too). docs/architecture.md states the same rule.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ledger"

#: Each sub-package (or module) of ``ledger`` and its layer: a module may import its own layer or one below.
LAYERS: dict[str, int] = {
    "ledger.errors": 0,
    "ledger.version": 0,
    "ledger.domain": 1,
    "ledger.rules": 2,
    "ledger.store": 3,
    "ledger.toolkit": 3,
    "ledger.formats": 4,
    "ledger.capture": 5,
    "ledger.resim": 5,
    "ledger.ledger": 6,
    "ledger": 6,  # the package's __init__: the public API, beside the facade
    "ledger.app": 7,
    "ledger.imports": 8,
    "ledger.web": 9,
    "ledger.cli": 10,
}
#: Upward imports the code needs, each for a reason: none. The facade hands live capture its card repository
#: (``Ledger.attach``), never itself.
TYPE_ONLY_UPWARD: frozenset[tuple[str, str]] = frozenset()
#: A process's entry point may open the ledger like the CLI does: the recorded command's hook (``ledger record``).
ENTRY_POINTS = frozenset({"ledger.capture.record_hook.child"})
#: Third-party and standard-library roots only one part of the tree may import.
DRIVERS = frozenset({"sqlite3", "sqlalchemy", "alembic", "psycopg", "psycopg2"})
TOOLKIT = frozenset({"arc_agi", "arcengine"})
#: What pure code may not import: I/O, processes, the network, the clock's modules.
CORE_FORBIDDEN = (
    DRIVERS
    | TOOLKIT
    | frozenset(
        {
            "os",
            "pathlib",
            "io",
            "shutil",
            "tempfile",
            "subprocess",
            "socket",
            "http",
            "urllib",
            "time",
            "logging",
            "click",
        }
    )
)
#: Calls that read the clock (or the filesystem) and so have no place in pure code.
CORE_FORBIDDEN_CALLS = frozenset(
    {"datetime.now", "datetime.utcnow", "datetime.today", "date.today", "time.time", "time.monotonic", "open"}
)


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's target as a dotted name, where it stands, and whether it only runs for a type checker."""

    target: str
    line: int
    type_only: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> dict[str, Path]:
    """Every module of the package by dotted name (the demo games are game code the toolkit loads, not modules)."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "demo_games" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path, modules: set[str]) -> list[Import]:
    """Every import in the file, at any depth (functions included), with relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(a.name, node.lineno, type_only) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for a in node.names:
                # `from ledger.domain import chain` imports the module ledger.domain.chain, not only the package.
                sub = f"{base}.{a.name}"
                found.append(Import(sub if sub in modules else base, node.lineno, type_only))
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(tree, False)
    return list(dict.fromkeys(found))  # `from x import a, b` is one import of x


def layer_of(name: str) -> tuple[str, int] | None:
    """The layer a ``ledger`` module belongs to (the longest matching prefix), or None outside the package."""
    best = None
    for prefix, rank in LAYERS.items():
        if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, rank)
    return best


def _graph() -> tuple[dict[str, Path], dict[str, list[Import]]]:
    files = source_files()
    modules = set(files)
    return files, {name: imports_of(name, path, modules) for name, path in files.items()}


FILES, IMPORTS = _graph()


def _where(name: str, imp: Import) -> str:
    return f"{FILES[name].relative_to(ROOT)}:{imp.line}"


def test_every_module_has_a_layer() -> None:
    missing = [name for name in FILES if layer_of(name) is None]
    assert not missing, f"modules outside every layer of LAYERS in {Path(__file__).name}: {missing}"


def test_imports_run_one_way() -> None:
    """Each module imports only layers below its own (and errors, importable by all)."""
    wrong = []
    for name, imps in IMPORTS.items():
        mine = layer_of(name)
        assert mine is not None
        for imp in imps:
            theirs = layer_of(imp.target)
            if theirs is None or theirs[0] == mine[0]:
                continue
            upward = theirs[1] > mine[1]
            sideways = theirs[1] == mine[1]  # store <-> toolkit, capture <-> resim, the facade <-> its __init__
            if sideways and {mine[0], theirs[0]} == {"ledger", "ledger.ledger"}:
                continue
            if imp.type_only and (mine[0], theirs[0]) in TYPE_ONLY_UPWARD:
                continue
            if name in ENTRY_POINTS and theirs[0] in ("ledger", "ledger.ledger"):
                continue
            if upward or sideways:
                wrong.append(f"{_where(name, imp)}: {name} ({mine[0]}) imports {imp.target} ({theirs[0]})")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def _restricted(roots: frozenset[str], allowed: str) -> list[str]:
    wrong = []
    for name, imps in IMPORTS.items():
        if name == allowed or name.startswith(allowed + "."):
            continue
        wrong += [
            f"{_where(name, imp)}: {name} imports {imp.target}" for imp in imps if imp.target.split(".")[0] in roots
        ]
    return wrong


def test_database_drivers_only_in_storage() -> None:
    wrong = _restricted(DRIVERS, "ledger.store")
    assert not wrong, "a database driver imported outside ledger/store/:\n" + "\n".join(wrong)


def test_toolkit_only_in_toolkit() -> None:
    wrong = _restricted(TOOLKIT, "ledger.toolkit")
    assert not wrong, "arc_agi/arcengine imported outside ledger/toolkit/:\n" + "\n".join(wrong)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def test_domain_and_rules_are_pure() -> None:
    """ledger/domain and ledger/rules import only themselves, errors and pure libraries, and never read the clock
    or a file."""
    wrong = []
    for name, imps in IMPORTS.items():
        if not name.startswith(("ledger.domain.", "ledger.rules.")):
            continue
        for imp in imps:
            root = imp.target.split(".")[0]
            if root in CORE_FORBIDDEN:
                wrong.append(f"{_where(name, imp)}: {name} imports {imp.target}")
        for node in ast.walk(ast.parse(FILES[name].read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _dotted(node.func) in CORE_FORBIDDEN_CALLS:
                wrong.append(f"{FILES[name].relative_to(ROOT)}:{node.lineno}: {name} calls {_dotted(node.func)}()")
    assert not wrong, "I/O or the clock in pure code:\n" + "\n".join(wrong)


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, first repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := dfs(start)):
            return found
    return None


def test_no_import_cycles() -> None:
    edges = {
        name: {imp.target for imp in imps if imp.target in FILES and imp.target != name}
        for name, imps in IMPORTS.items()
    }
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_find_cycle_sees_a_cycle() -> None:
    # The checker itself, on a graph with a known cycle, so a broken checker cannot pass silently.
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_layer_of_longest_prefix() -> None:
    assert layer_of("ledger.domain.chain") == ("ledger.domain", 1)
    assert layer_of("ledger.ledger") == ("ledger.ledger", 6)
    assert layer_of("ledger") == ("ledger", 6)
    assert layer_of("msgspec") is None
