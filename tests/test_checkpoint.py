"""Signed checkpoints on both backends: `ledger keygen`, `ledger checkpoint`, `ledger verify --checkpoint` against a
ledger that grew honestly and against ledgers doctored past their triggers (and rebuilt through `ledger copy`).

The RFC 9162 and signed-note verifiers at the top are written here from the RFC's pseudocode (sections 2.1.1,
2.1.3.2, 2.1.4.2) and the C2SP specifications, separately from ``ledger.domain``: the library's notes and proofs must
pass a verifier it did not write.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import create_engine, text

from ledger import Ledger
from ledger.domain import merkle
from ledger.domain.events import card_stream
from ledger.store.merkle_store import TreeStore
from tests.cli_run import in_process, no_traceback
from tests.cli_run import ledger as ledger_process
from tests.test_audit import play_disputed_card, play_open_card, rewrite_card, run

# -- an independent RFC 9162 verifier (from the RFC's text) -------------------------------------------------------


def sha(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def rfc_mth(entries: list[bytes]) -> bytes:
    """MTH(D[n]) of section 2.1.1, over the entries themselves (not their leaf hashes)."""
    n = len(entries)
    if n == 0:
        return sha(b"")
    if n == 1:
        return sha(b"\x00" + entries[0])
    k = 1
    while k * 2 < n:
        k *= 2
    return sha(b"\x01" + rfc_mth(entries[:k]) + rfc_mth(entries[k:]))


def rfc_verify_inclusion(leaf_index: int, tree_size: int, leaf: bytes, path: list[bytes], root: bytes) -> bool:
    """Section 2.1.3.2, step by step."""
    if leaf_index >= tree_size:
        return False
    fn, sn, r = leaf_index, tree_size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            r = sha(b"\x01" + p + r)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn //= 2
                    sn //= 2
        else:
            r = sha(b"\x01" + r + p)
        fn //= 2
        sn //= 2
    return sn == 0 and r == root


def rfc_verify_consistency(first: int, second: int, first_hash: bytes, second_hash: bytes, path: list[bytes]) -> bool:
    """Section 2.1.4.2, step by step (first < second)."""
    if first == second:
        return not path and first_hash == second_hash
    if first & (first - 1) == 0:
        path = [first_hash, *path]
    fn, sn = first - 1, second - 1
    while fn % 2 == 1:
        fn //= 2
        sn //= 2
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            fr = sha(b"\x01" + c + fr)
            sr = sha(b"\x01" + c + sr)
            while fn % 2 == 0 and fn != 0:
                fn //= 2
                sn //= 2
        else:
            sr = sha(b"\x01" + sr + c)
        fn //= 2
        sn //= 2
    return sn == 0 and fr == first_hash and sr == second_hash


def note_verify(note: str, vkey: str) -> tuple[str, int, bytes, list[str]]:
    """C2SP signed-note + tlog-checkpoint: check the signature by ``vkey`` and return (origin, size, root, extra
    lines). Raises AssertionError if it does not verify."""
    name, hex_id, key_b64 = vkey.strip().split("+", 2)
    raw = base64.b64decode(key_b64)
    assert raw[0] == 1 and len(raw) == 33
    assert sha(name.encode() + b"\n" + raw)[:4].hex() == hex_id
    body, _, sigs = note.partition("\n\n")
    body += "\n"
    ok = False
    for line in sigs.splitlines():
        assert line.startswith("\u2014 ")
        signer, enc = line[2:].split(" ")
        blob = base64.b64decode(enc)
        if signer == name and blob[:4].hex() == hex_id:
            try:
                Ed25519PublicKey.from_public_bytes(raw[1:]).verify(blob[4:], body.encode())
                ok = True
            except InvalidSignature:
                pass
    assert ok, "no valid signature by the key"
    lines = body.splitlines()
    return lines[0], int(lines[1]), base64.b64decode(lines[2]), lines[3:]


# -- helpers -------------------------------------------------------------------------------------------------------


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    key = tmp_path / "team.key"
    code, out = run("keygen", "team-ledger", "-o", str(key))
    assert code == 0, out
    return key, tmp_path / "team.key.pub"


def checkpoint(db: str, key: Path, out: Path) -> str:
    code, text_out = run("--db", db, "checkpoint", "--key", str(key), "-o", str(out))
    assert code == 0, text_out
    return out.read_text()


def verify_cp(db: str, cp: Path, pub: Path) -> tuple[int, dict]:
    code, out = run("--db", db, "verify", "--checkpoint", str(cp), "--key", str(pub), "--json")
    return code, json.loads(out)


def doctor(url: str, *statements: str) -> None:
    """Run SQL behind the ledger's back, its append-only triggers dropped first (what an attacker with the
    database does)."""
    engine = create_engine(url if "://" in url else f"sqlite:///{url}")
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        for trig in ("events_no_update", "events_no_delete"):
            conn.execute(text(f"DROP TRIGGER IF EXISTS {trig}" + (" ON events" if pg else "")))
        for s in statements:
            conn.execute(text(s))
    engine.dispose()


def event_entries(led: Ledger) -> list[bytes]:
    return [bytes.fromhex(e.hash) for e in led.store.scan()]


# -- tests -----------------------------------------------------------------------------------------------------------


def test_keygen_writes_a_private_key_0600_and_refuses_to_overwrite(keys: tuple[Path, Path]) -> None:
    key, pub = keys
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.read_text().startswith("PRIVATE+KEY+team-ledger+")
    assert pub.read_text().count("\n") == 1 and pub.read_text().startswith("team-ledger+")
    before = key.read_text()
    code, out = run("keygen", "team-ledger", "-o", str(key))
    assert code == 2 and "never overwrites" in out
    assert key.read_text() == before
    code, out = run("keygen", "bad name", "-o", str(key.with_name("other")))
    assert code == 2 and "cannot name a key" in out and not key.with_name("other").exists()


def test_checkpoint_interoperates_and_the_log_grows_and_still_verifies(
    backend_ledger: Ledger, backend_url: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    key, pub = keys
    play_disputed_card(backend_ledger)
    first = checkpoint(backend_url, key, tmp_path / "cp1.txt")
    origin, size, root, extra = note_verify(first, pub.read_text())
    entries = event_entries(backend_ledger)
    assert (origin, size) == ("team-ledger", len(entries))
    assert root == rfc_mth(entries)
    assert extra[0].startswith("stream-heads 2 ")
    code, doc = verify_cp(backend_url, tmp_path / "cp1.txt", pub)
    assert code == 0 and doc["checkpoint"]["ok"], doc

    play_open_card(backend_ledger)  # the log grows: the old checkpoint still verifies, a new one covers more
    code, doc = verify_cp(backend_url, tmp_path / "cp1.txt", pub)
    assert code == 0 and doc["checkpoint"]["events"] > size, doc
    second = checkpoint(backend_url, key, tmp_path / "cp2.txt")
    _, size2, root2, _ = note_verify(second, pub.read_text())
    entries = event_entries(backend_ledger)
    assert size2 == len(entries) and root2 == rfc_mth(entries)

    # The stored tree's proofs pass the independent verifier: every inclusion and every consistency proof.
    tree = TreeStore(backend_ledger.store)
    head = tree.catch_up()
    assert head.root == root2
    leaves = [sha(b"\x00" + e) for e in entries]
    for n in (1, 2, size, 17, size2):
        for m in range(n):
            path = merkle.tree_hashes(merkle.inclusion_ranges(m, n), tree.parts)
            assert rfc_verify_inclusion(m, n, leaves[m], path, rfc_mth(entries[:n]))
        for m in range(1, n + 1):
            path = merkle.tree_hashes(merkle.consistency_ranges(m, n), tree.parts)
            assert rfc_verify_consistency(m, n, rfc_mth(entries[:m]), rfc_mth(entries[:n]), path)
    assert [c.size for c in tree.checkpoints()] == [size, size2]


def test_wrong_key_and_forged_signature_fail(
    backend_ledger: Ledger, backend_url: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    key, pub = keys
    play_open_card(backend_ledger)
    note = checkpoint(backend_url, key, tmp_path / "cp.txt")
    run("keygen", "team-ledger", "-o", str(tmp_path / "other.key"))
    code, doc = verify_cp(backend_url, tmp_path / "cp.txt", tmp_path / "other.key.pub")
    assert code == 1 and "not signed by the key team-ledger" in doc["checkpoint"]["error"]
    body, _, sig = note.partition("\n\n")
    lines = body.split("\n")
    lines[1] = str(int(lines[1]) - 1)  # a smaller tree under the old signature
    forged = tmp_path / "forged.txt"
    forged.write_text("\n".join(lines) + "\n\n" + sig)
    code, doc = verify_cp(backend_url, forged, pub)
    assert code == 1 and "not signed" in doc["checkpoint"]["error"]


def _last_seq(url: str, card: str) -> int:
    with Ledger.open(url, readonly=True) as led:
        return led.store.read_stream(card_stream(card))[-1].seq


@pytest.mark.parametrize("attack", ["delete_last_event", "truncate", "reorder", "delete_card_then_copy"])
def test_a_doctored_ledger_fails_verify_checkpoint(
    backend_ledger: Ledger, backend_url: str, keys: tuple[Path, Path], tmp_path: Path, attack: str
) -> None:
    key, pub = keys
    card, _ = play_disputed_card(backend_ledger)
    other = play_open_card(backend_ledger)
    checkpoint(backend_url, key, tmp_path / "cp.txt")
    backend_ledger.close()
    last = _last_seq(backend_url, card)
    target = backend_url
    if attack == "delete_last_event":
        doctor(backend_url, f"DELETE FROM events WHERE seq = {last}", "DELETE FROM snapshots")
        expect = "events were removed"
    elif attack == "truncate":
        doctor(backend_url, f"DELETE FROM events WHERE seq > {last}")
        expect = "events were removed"
    elif attack == "reorder":
        # Two neighbouring events of different streams swap places: every chain still holds.
        first_other = next(e.seq for e in Ledger.open(backend_url, readonly=True).store.read_stream(card_stream(other)))
        doctor(
            backend_url,
            f"UPDATE events SET seq = -1 WHERE seq = {first_other}",
            f"UPDATE events SET seq = {first_other} WHERE seq = {last}",
            f"UPDATE events SET seq = {last} WHERE seq = -1",
        )
        expect = "consistency proof fails"
    else:
        doctor(backend_url, f"DELETE FROM events WHERE stream = '{card_stream(card)}'", "DELETE FROM snapshots")
        target = str(tmp_path / "rebuilt.sqlite")
        code, out = run("copy", "--from", backend_url, "--to", target)
        assert code == 0, out
        code, out = run("--db", target, "verify")
        assert code == 0, out  # the rebuilt ledger passes every other check
        expect = "events were removed"
    code, doc = verify_cp(target, tmp_path / "cp.txt", pub)
    assert code == 1
    assert expect in doc["checkpoint"]["error"], doc["checkpoint"]


def test_a_stream_rewritten_consistently_fails_in_a_child_process(keys: tuple[Path, Path], tmp_path: Path) -> None:
    key, pub = keys
    db = tmp_path / "l.sqlite"
    with Ledger.open(db) as led:
        card, _ = play_disputed_card(led)
        play_open_card(led)
    checkpoint(str(db), key, tmp_path / "cp.txt")
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER events_no_delete")
    # The same events written again (their chain recomputed): every hash is the same, only the order in the log
    # moved (the stream now comes after the other one).
    rewrite_card(con, card, lambda evs: evs)
    con.close()
    r = ledger_process("--db", str(db), "verify", "--checkpoint", str(tmp_path / "cp.txt"), "--key", str(pub))
    no_traceback(r)
    assert r.returncode == 1
    assert "FAIL checkpoint: the log's first" in r.stdout, r.stdout
    r = ledger_process("--db", str(db), "verify", "--checkpoint", str(tmp_path / "cp.txt"))
    assert r.returncode == 2 and "--checkpoint and --key go together" in r.stderr


def test_signed_checkpoints_are_append_only(backend_ledger: Ledger, backend_url: str, keys, tmp_path: Path) -> None:
    key, _ = keys
    play_open_card(backend_ledger)
    checkpoint(backend_url, key, tmp_path / "cp.txt")
    engine = create_engine(backend_url if "://" in backend_url else f"sqlite:///{backend_url}")
    try:
        for stmt in ("UPDATE merkle_checkpoints SET size = 0", "DELETE FROM merkle_checkpoints"):
            with pytest.raises(Exception, match="checkpoints are append-only"), engine.begin() as conn:
                conn.execute(text(stmt))
    finally:
        engine.dispose()
    assert [c.size for c in TreeStore(backend_ledger.store).checkpoints()] == [backend_ledger.store.count()]


def test_the_library_proofs_and_verifiers_agree_with_the_rfc_for_every_small_tree() -> None:
    rng = random.Random(9162)
    entries = [rng.randbytes(32) for _ in range(40)]
    leaves = [sha(b"\x00" + e) for e in entries]
    roots = [rfc_mth(entries[:k]) for k in range(41)]
    for n in range(1, 41):
        root = roots[n]
        assert merkle.root_of(leaves[:n]) == root
        for m in range(n):
            path = merkle.proof_from_leaves(leaves[:n], merkle.inclusion_ranges(m, n))
            assert rfc_verify_inclusion(m, n, leaves[m], path, root)
            assert merkle.verify_inclusion(m, n, leaves[m], path, root)
            assert not merkle.verify_inclusion(m, n, leaves[(m + 1) % n], path, root) or n == 1
        for m in range(1, n + 1):
            path = merkle.proof_from_leaves(leaves[:n], merkle.consistency_ranges(m, n))
            old = roots[m]
            assert rfc_verify_consistency(m, n, old, root, path)
            assert merkle.verify_consistency(m, n, old, root, path)
            if path:
                assert not merkle.verify_consistency(m, n, old, root, [*path[:-1], sha(path[-1])])
        wanted = sorted(rng.sample(range(n), rng.randint(1, n)))
        proof = merkle.proof_from_leaves(leaves[:n], merkle.multiproof_ranges(wanted, n))
        assert merkle.multiproof_root(wanted, [leaves[i] for i in wanted], proof, n) == root


@pytest.mark.heavy
def test_concurrent_checkpoints_while_a_card_is_played(
    backend_ledger: Ledger, backend_url: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """Four `ledger checkpoint` processes at once, while the log grows: each signs a tree of the log as it stood,
    the stored tree is written once per leaf, and every checkpoint verifies afterwards."""
    import subprocess

    from tests.cli_run import LEDGER

    key, pub = keys
    play_open_card(backend_ledger)
    procs = [
        subprocess.Popen(
            [LEDGER, "--db", backend_url, "checkpoint", "--key", str(key), "-o", str(tmp_path / f"cp{i}.txt")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    play_disputed_card(backend_ledger)
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    entries = event_entries(backend_ledger)
    for i in range(4):
        _, size, root, _ = note_verify((tmp_path / f"cp{i}.txt").read_text(), pub.read_text())
        assert root == rfc_mth(entries[:size])
        code, doc = verify_cp(backend_url, tmp_path / f"cp{i}.txt", pub)
        assert code == 0, doc
    head = TreeStore(backend_ledger.store).catch_up()
    assert (head.size, head.root) == (len(entries), rfc_mth(entries))
    assert len(TreeStore(backend_ledger.store).checkpoints()) == 4


# -- the stored tree: append-only, and checked against the log before it is signed ---------------------------------

TREE_TRIGGERS = [
    ("merkle_nodes_no_update", "merkle_nodes"),
    ("merkle_nodes_no_delete", "merkle_nodes"),
    ("merkle_runs_no_update", "merkle_runs"),
    ("merkle_runs_no_delete", "merkle_runs"),
    ("merkle_heads_no_rewind", "merkle_heads"),
    ("merkle_heads_no_delete", "merkle_heads"),
    ("tracking_tree_no_rewind", "tracking"),
    ("tracking_tree_no_delete", "tracking"),
]


def doctor_tree(url: str, *statements: str) -> None:
    """Run SQL on the stored tree (and the events) with every append-only trigger dropped first."""
    engine = create_engine(url if "://" in url else f"sqlite:///{url}")
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        for trig, table in [*TREE_TRIGGERS, ("events_no_update", "events"), ("events_no_delete", "events")]:
            conn.execute(text(f"DROP TRIGGER IF EXISTS {trig}" + (f" ON {table}" if pg else "")))
        for s in statements:
            conn.execute(text(s))
    engine.dispose()


def test_the_stored_tree_is_append_only(backend_ledger: Ledger, backend_url: str, keys, tmp_path: Path) -> None:
    key, _ = keys
    play_disputed_card(backend_ledger)
    checkpoint(backend_url, key, tmp_path / "cp.txt")
    engine = create_engine(backend_url if "://" in backend_url else f"sqlite:///{backend_url}")
    refused = [
        "UPDATE merkle_nodes SET hash = hash",
        "DELETE FROM merkle_nodes",
        "UPDATE merkle_runs SET first_seq = first_seq + 1",
        "DELETE FROM merkle_runs",
        "UPDATE merkle_heads SET version = version - 1",
        "UPDATE merkle_heads SET hash = 'x'",  # the same version, another head
        "DELETE FROM merkle_heads",
        "UPDATE tracking SET n = 0, seq = 0 WHERE name = 'merkle'",
        "UPDATE tracking SET name = 'other' WHERE name = 'merkle'",
        "DELETE FROM tracking WHERE name = 'merkle'",
    ]
    if engine.dialect.name == "postgresql":
        refused += [f"TRUNCATE {t}" for t in ("merkle_nodes", "merkle_runs", "merkle_heads", "tracking")]
    try:
        for stmt in refused:
            with pytest.raises(Exception, match="the Merkle tree is append-only"), engine.begin() as conn:
                conn.execute(text(stmt))
    finally:
        engine.dispose()
    play_open_card(backend_ledger)  # growing the tree (heads and state move forward) is still allowed
    checkpoint(backend_url, key, tmp_path / "cp2.txt")
    code, doc = verify_cp(backend_url, tmp_path / "cp.txt", keys[1])
    assert code == 0, doc


@pytest.mark.parametrize(
    "attack",
    ["zero_nodes", "heads_changed", "last_events_deleted", "stream_rewritten", "state_rewound", "runs_moved"],
)
def test_checkpoint_refuses_a_tree_the_log_does_not_make(
    backend_ledger: Ledger, backend_url: str, keys: tuple[Path, Path], tmp_path: Path, attack: str
) -> None:
    key, _ = keys
    card, _ = play_disputed_card(backend_ledger)
    play_open_card(backend_ledger)
    checkpoint(backend_url, key, tmp_path / "cp1.txt")
    backend_ledger.close()
    zero = "x'" + "00" * 32 + "'" if "://" not in backend_url else "'\\x" + "00" * 32 + "'::bytea"
    last = _last_seq(backend_url, card)
    expect = {
        "zero_nodes": [f"UPDATE merkle_nodes SET hash = {zero}"],
        "heads_changed": ["UPDATE merkle_heads SET hash = '" + "0" * 64 + "'"],
        "last_events_deleted": [f"DELETE FROM events WHERE seq >= {last - 4}", "DELETE FROM snapshots"],
        # The card's events written again, unchanged, after the other card's: every chain still holds.
        "stream_rewritten": [
            f"CREATE TEMP TABLE moved AS SELECT stream, version, type, ts, body, prev_hash, hash FROM events "
            f"WHERE stream = '{card_stream(card)}'",
            f"DELETE FROM events WHERE stream = '{card_stream(card)}'",
            "DELETE FROM snapshots",
            "INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) "
            "SELECT stream, version, type, ts, body, prev_hash, hash FROM moved ORDER BY version",
        ],
        "state_rewound": ["UPDATE tracking SET n = n - 1 WHERE name = 'merkle'"],
        "runs_moved": ["UPDATE merkle_runs SET first_seq = first_seq + 1"],
    }[attack]
    doctor_tree(backend_url, *expect)
    before = [c.size for c in TreeStore(Ledger.open(backend_url, readonly=True).store).checkpoints()]
    r = in_process("--db", backend_url, "checkpoint", "--key", str(key), "-o", str(tmp_path / "cp2.txt"))
    no_traceback(r)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "refusing to sign:" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "cp2.txt").exists()
    with Ledger.open(backend_url, readonly=True) as led:
        assert [c.size for c in TreeStore(led.store).checkpoints()] == before  # nothing signed, nothing kept
