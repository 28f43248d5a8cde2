"""Hostile input: metadata.json files, card ids and recording lines made to break things (hypothesis).

Every case is either rejected with a message (the documented exceptions, or a reported problem) or gives a sane
result; never another exception, never a write outside the ledger file, never a partial card.
"""

from __future__ import annotations

import json
import os
import tempfile
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from arc_agi.models import EnvironmentInfo
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.cli import cli
from ledger.domain import baselines as bl
from ledger.domain.events import ActionTaken, BaselineEntry, CardClosed, CardOpened, PlayStarted, card_stream, decode
from ledger.errors import ImportInputError
from ledger.formats.import_problems import STRICT_KINDS
from ledger.imports.importing import import_recordings
from ledger.toolkit.game_files import scan_environments

CORPUS = Path(__file__).resolve().parent / "recordings_corpus"
GOOD = next((CORPUS / "good").glob("*/*.jsonl"))
WITH_FRAMES = next((CORPUS / "truncated").glob("*/*.jsonl"))
GOOD_LINES = GOOD.read_bytes().splitlines()
FRAME_LINES = WITH_FRAMES.read_bytes().splitlines()[:-1]  # its last line is the truncated one
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def folder() -> Iterator[Path]:
    # Not tmp_path: one fresh folder per hypothesis example.
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def only_ledger_files_changed(before: dict[str, bytes], after: dict[str, bytes], ledger: str) -> None:
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed <= {ledger, ledger + "-wal", ledger + "-shm"}, changed


# -- metadata.json ------------------------------------------------------------------------------------------------

huge = st.one_of(st.integers(), st.integers(min_value=2**62, max_value=2**300), st.integers(max_value=-(2**62)))
scalar = st.one_of(
    st.none(),
    st.booleans(),
    huge,
    st.floats(),
    st.text(),
    st.sampled_from(["22", "2.0", "1e3", "-1", "", "null", "NaN", "\x00", "../../etc/passwd", "\u202e", "🃏"]),
    st.just("\ud800"),  # a lone surrogate: json.dumps writes it as an escape
)
value = st.recursive(scalar, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=3))
FIELDS = ["game_id", "title", "baseline_actions", "tags", "private_tags", "level_tags", "default_fps"]
FIELDS += ["date_downloaded", "class_name", "local_dir", "extra"]


def metadata_objects() -> st.SearchStrategy[dict[str, Any]]:
    typical = st.fixed_dictionaries(
        {"game_id": st.text(min_size=1)},
        optional={
            "title": st.text(),
            "baseline_actions": st.lists(st.one_of(huge, st.floats(), st.booleans()), max_size=5),
            "tags": st.lists(st.text(), max_size=3),
            "level_tags": st.lists(st.lists(st.text(), max_size=2), max_size=3),
        },
    )
    return st.one_of(typical, st.dictionaries(st.sampled_from(FIELDS), value, max_size=6))


def to_json(obj: dict[str, Any]) -> bytes:
    try:
        return json.dumps(obj, allow_nan=True).encode()
    except (ValueError, OverflowError):
        return b"{}"


def nested(depth: int) -> bytes:
    return b'{"game_id": "deep", "extra": ' + b"[" * depth + b"]" * depth + b"}"


def duplicate_keys(obj: dict[str, Any], again: dict[str, Any]) -> bytes:
    a, b = to_json(obj), to_json(again)
    if len(a) <= 2 or len(b) <= 2:
        return a
    return a[:-1] + b", " + b[1:]  # every key of `again` a second time, after the first ones


hostile_metadata = st.one_of(
    st.binary(max_size=300),
    metadata_objects().map(to_json),
    st.builds(duplicate_keys, metadata_objects(), metadata_objects()),
    st.sampled_from([10, 100, 1000, 5000, 100_000]).map(nested),
    metadata_objects().map(lambda o: b"\xef\xbb\xbf" + to_json(o)),  # a byte order mark
    metadata_objects().map(lambda o: to_json(o) + b"\n{}"),  # trailing data
    st.text().map(lambda t: t.encode("utf-8", "surrogatepass")),
)


def assert_sane(e: BaselineEntry) -> None:
    assert type(e.game_id) is str
    assert e.title is None or type(e.title) is str
    if e.baseline_actions is not None:
        # Plain ints (a bool is not a baseline) that the calculator can square without overflowing.
        assert all(type(b) is int and -(2**63) <= b < 2**63 for b in e.baseline_actions)
    for tags in (e.tags, e.private_tags):
        assert tags is None or all(type(t) is str for t in tags)
    assert e.level_tags is None or all(type(t) is str for lvl in e.level_tags for t in lvl)
    # It can be stored: content-addressed, and it survives an encode/decode round trip.
    assert len(bl.set_id([e])) == 64
    assert msgspec.json.decode(msgspec.json.encode(e), type=BaselineEntry) == e


def toolkit_entry(data: bytes) -> BaselineEntry | None:
    """What the toolkit's own scan makes of the file (None: it skips the file)."""
    try:
        return bl.entry_from_info(EnvironmentInfo.model_validate_json(data.decode("utf-8")))
    except Exception:
        return None


@FUZZ
@given(hostile_metadata)
def test_metadata_json_is_rejected_with_a_message_or_gives_a_sane_entry(data: bytes) -> None:
    try:
        entry = bl.entry_from_metadata(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        assert str(e)
        return
    assert_sane(entry)
    ours = toolkit_entry(data)
    if ours is not None:
        assert entry == ours  # where both accept the file, they read the same entry


@settings(max_examples=40, deadline=None)
@given(st.lists(hostile_metadata, min_size=1, max_size=5))
def test_scan_environments_reports_every_bad_file_and_keeps_the_good_ones(files: list[bytes]) -> None:
    with folder() as root:
        for i, data in enumerate(files):
            (root / f"g{i}" / "v").mkdir(parents=True)
            (root / f"g{i}" / "v" / "metadata.json").write_bytes(data)
        (root / "dir_named" / "metadata.json").mkdir(parents=True)  # unreadable: a folder
        os.symlink(root, root / "loop")  # a symlink loop must not make the scan run forever
        before = tree(root)
        entries, problems = scan_environments(root)
        assert tree(root) == before
        good = 0
        for data in files:
            try:
                bl.entry_from_metadata(data)
                good += 1
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass
        assert len(entries) == good
        assert len(problems) == len(files) - good + 1
        assert all(p.startswith(str(root)) and ": " in p for p in problems)
        for e in entries:
            assert_sane(e)


def test_metadata_edge_cases() -> None:
    ok = bl.entry_from_metadata(b'{"game_id": "x", "baseline_actions": [-3, 0, 9223372036854775807]}')
    assert ok.baseline_actions == [-3, 0, 2**63 - 1]  # the toolkit scores these too
    for bad, says in [
        (b'{"game_id": "x", "baseline_actions": [1e400]}', "out of range"),
        (b'{"game_id": "x", "baseline_actions": [9223372036854775808]}', "<= 9223372036854775807"),
        (b'{"game_id": "x", "baseline_actions": [2.5]}', "Expected `int`"),
        (nested(100_000), "nested too deeply"),
        (b'{"game_id": 7}', "Expected `str`"),
        (b"\xff\xfe", "malformed"),
    ]:
        with pytest.raises((msgspec.DecodeError, msgspec.ValidationError), match=says):
            bl.entry_from_metadata(bad)
    # Duplicate keys: the last one wins, as in the toolkit.
    assert bl.entry_from_metadata(b'{"game_id": "a", "game_id": "b"}').game_id == "b"


# -- card ids -----------------------------------------------------------------------------------------------------

PATHLIKE = ["../../etc/passwd", "..", ".", "a/b\\c", "/abs", "x\x00y", "\x00", "card:nested", "%_%", "'; DROP TABLE--"]
card_ids = st.one_of(st.sampled_from(PATHLIKE), st.text(min_size=1, max_size=300))
TS = datetime(2026, 1, 1, tzinfo=UTC)


@FUZZ
@given(card_ids)
@pytest.mark.heavy
def test_any_card_id_is_stored_and_exported_as_given(card_id: str) -> None:
    with folder() as root:
        db = root / "ledger.sqlite"
        (root / "other").mkdir()
        with Ledger.open(db) as led:
            before = tree(root)
            led.store.append(
                card_stream(card_id),
                [
                    CardOpened(ts=TS, card_id=card_id),
                    PlayStarted(ts=TS, game_id="cnt3-0000000a", guid="g"),
                    ActionTaken(ts=TS, game_id="cnt3-0000000a", guid="g", action=1, levels_completed=0, state="WIN"),
                    CardClosed(ts=TS, reason="explicit"),
                ],
                expected_version=0,
            )
            assert led.card_ids() == [card_id]
            doc = json.loads(led.export(card_id))
            assert doc["card_id"] == card_id and doc["total_actions"] == 1
            assert verify_ledger(led.store).ok
            only_ledger_files_changed(before, tree(root), "ledger.sqlite")
        if "\x00" not in card_id:  # a NUL cannot be a command-line argument
            outputs = []
            for args in (["export", "--", card_id], ["replay", "--json", "--", card_id], ["cards", "--json"]):
                r = CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)
                assert r.exit_code == 0, r.output
                outputs.append(json.loads(r.stdout))
            exported, replayed, listed = outputs
            assert exported == doc and replayed["card_id"] == card_id and [c["card_id"] for c in listed] == [card_id]
            r = CliRunner().invoke(cli, ["--db", str(db), "export", "--", card_id + "?"], catch_exceptions=False)
            assert r.exit_code == 1 and "see `ledger cards`" in r.stderr
        only_ledger_files_changed(before, tree(root), "ledger.sqlite")


# -- recording lines ----------------------------------------------------------------------------------------------


def mutate(line: bytes, path: list[str], new: Any) -> bytes:
    rec = json.loads(line)
    node = rec
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = new
    return json.dumps(rec, allow_nan=True).encode()


PATHS = [
    ["timestamp"],
    ["data", "game_id"],
    ["data", "state"],
    ["data", "levels_completed"],
    ["data", "guid"],
    ["data", "full_reset"],
    ["data", "action_input", "id"],
    ["data", "action_input", "data"],
    ["data", "action_input"],
    ["data"],
]
mutated = st.builds(
    mutate, st.sampled_from(GOOD_LINES + FRAME_LINES), st.sampled_from(PATHS), value | st.sampled_from(["ACTION9", -1])
)
hostile_line = st.one_of(
    st.sampled_from(GOOD_LINES),
    st.sampled_from(FRAME_LINES),
    mutated,
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([10, 1000, 100_000]).map(lambda d: b'{"timestamp": ' + b"[" * d + b"]" * d + b"}"),
    st.sampled_from(GOOD_LINES).map(lambda x: x[:-1] + b', "data": {"guid": 5}}'),  # a duplicate key
    st.sampled_from(GOOD_LINES).map(lambda x: x[: len(x) // 2]),
    st.just(b""),
)
names = st.one_of(
    st.just(GOOD.name),
    st.text(min_size=1, max_size=40).filter(lambda t: "/" not in t and "\x00" not in t).map(lambda t: t + ".jsonl"),
)
folders = st.text(min_size=1, max_size=40).filter(lambda t: "/" not in t and "\x00" not in t and t not in (".", ".."))


@FUZZ
@given(folders, names, st.lists(hostile_line, max_size=12), st.booleans(), st.booleans())
@pytest.mark.heavy
def test_recording_lines_are_imported_or_reported(
    card: str, name: str, lines: list[bytes], strict: bool, final_newline: bool
) -> None:
    with folder() as root:
        rec = root / "recordings"
        (rec / card).mkdir(parents=True)
        body = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
        (rec / card / name).write_bytes(body)
        db = root / "ledger.sqlite"
        with Ledger.open(db) as led:
            before = tree(root)
            try:
                summary = import_recordings(led, [rec], strict=strict)
            except ImportInputError as e:
                assert str(e)
                return
            only_ledger_files_changed(before, tree(root), "ledger.sqlite")
            assert summary.exit_code in (0, 1, 2)
            assert all(str(p) for p in summary.problems)
            assert verify_ledger(led.store).ok
            ids = led.card_ids()
            assert ids in ([], [card])
            bad = [p for p in summary.problems if p.kind in STRICT_KINDS]
            if strict and bad:
                assert ids == [] and summary.exit_code == 2  # nothing of the card, not half of it
            if ids:
                evs = [decode(r.body) for r in led.store.read_stream(card_stream(card))]
                assert isinstance(evs[0], CardOpened) and isinstance(evs[-1], CardClosed)
                assert json.loads(led.export(card))["card_id"] == card
            events = led.store.count()
            again = import_recordings(led, [rec], strict=strict)
            assert led.store.count() == events  # the same files again: nothing added
            assert {c.status for c in again.cards} <= {"already imported", "nothing to import", "not imported"}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_line, min_size=1, max_size=8), st.booleans())
def test_ledger_import_command_exits_0_or_2_with_one_line_messages(lines: list[bytes], strict: bool) -> None:
    with folder() as root:
        (root / "rec" / "card").mkdir(parents=True)
        (root / "rec" / "card" / GOOD.name).write_bytes(b"\n".join(lines) + b"\n")
        args = [
            "--db",
            str(root / "l.sqlite"),
            "import",
            str(root / "rec"),
            "--json",
            *(["--strict"] if strict else []),
        ]
        r = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert r.exit_code in (0, 2), r.output
        summary = json.loads(r.stdout)  # --json: one JSON object on stdout and nothing else
        assert isinstance(summary, dict)


def test_a_card_folder_name_that_is_not_utf8(tmp_path: Path) -> None:
    """Linux allows any bytes in a file name; Python hands them over as lone surrogates."""
    rec = tmp_path / "rec"
    bad = os.path.join(os.fsencode(rec), b"card\xff")
    os.makedirs(bad)
    with open(os.path.join(bad, os.fsencode(GOOD.name)), "wb") as f:
        f.write(GOOD.read_bytes())
    fine = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"  # a card id, as the toolkit names card folders
    (rec / fine).mkdir()
    (rec / fine / GOOD.name).write_bytes(GOOD.read_bytes())
    with Ledger.open(tmp_path / "l.sqlite") as led:
        summary = import_recordings(led, [rec])
        assert led.card_ids() == [fine]
        assert summary.exit_code == 0
        assert any("not UTF-8" in p.message for p in summary.problems)


def write_big_line(path: Path, lines: list[bytes], at: int, big: Iterator[bytes]) -> int:
    """A recording with a huge line at position ``at``, written in pieces (never whole in memory)."""
    with open(path, "wb") as f:
        for line in lines[:at]:
            f.write(line + b"\n")
        for piece in big:
            f.write(piece)
        f.write(b"\n")
        for line in lines[at:]:
            f.write(line + b"\n")
    return path.stat().st_size


def huge_frame_line(template: bytes, mb: int) -> Iterator[bytes]:
    """``template`` (a line with a frame) with a frame of ``mb`` MB: still a valid record."""
    head = template[: template.index(b', "frame": ') + len(b', "frame": ')]
    yield head + b"[["
    row = b"[" + b", ".join([b"5"] * 64) + b"], "
    for _ in range(mb * 1_000_000 // (len(row) * 1000) + 1):
        yield row * 1000
    yield b"[0]]]}}"


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["valid record", "junk"])
def test_a_100_mb_line_keeps_memory_bounded(tmp_path: Path, kind: str) -> None:
    card_id = "1a2b3c4d-0000-4000-8000-000000000100"  # a card id, as the toolkit names card folders
    card = tmp_path / "rec" / card_id
    card.mkdir(parents=True)
    f = card / WITH_FRAMES.name
    at = 4
    big = huge_frame_line(FRAME_LINES[at], 100) if kind == "valid record" else iter([b"x" * 1_000_000] * 100)
    size = write_big_line(f, FRAME_LINES[:at] + FRAME_LINES[at + 1 :], at, big)
    assert size > 100_000_000
    with Ledger.open(tmp_path / "l.sqlite") as led:
        tracemalloc.start()
        try:
            summary = import_recordings(led, [tmp_path / "rec"])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB for a {size / 1e6:.0f} MB line"
        print(f"\n{kind}: {size / 1e6:.0f} MB recording, one huge line: import peak {peak / 2**20:.1f} MiB")
        (result,) = summary.cards
        assert result.status == "imported" and result.lines == len(FRAME_LINES)
        # The same recording with that line at its normal size gives the same card (or the card without it).
        small = tmp_path / "small" / card_id
        small.mkdir(parents=True)
        kept = FRAME_LINES if kind == "valid record" else FRAME_LINES[:at] + FRAME_LINES[at + 1 :]
        (small / WITH_FRAMES.name).write_bytes(b"".join(x + b"\n" for x in kept))
        with Ledger.open(tmp_path / "small.sqlite") as ref:
            import_recordings(ref, [tmp_path / "small"])
            assert led.export(card_id) == ref.export(card_id)
        if kind == "junk":
            assert [p.kind for p in summary.problems] == ["too_long"] and result.skipped == {"too long": 1}
        else:
            assert summary.problems == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [('["22", 5]', [22, 5]), ("[22.0]", [22]), ("[1e2]", [100]), ("[7]", [7])],
)
def test_metadata_numbers_are_read_as_the_toolkit_reads_them(raw: str, expected: list[int]) -> None:
    from arc_agi import EnvironmentInfo

    from ledger.domain.baselines import entry_from_metadata

    data = f'{{"game_id": "ab12-1", "baseline_actions": {raw}}}'.encode()
    assert (
        entry_from_metadata(data).baseline_actions
        == expected
        == EnvironmentInfo.model_validate_json(data).baseline_actions
    )
