"""The standalone verifier (scripts/verify_evidence.py, written from docs/evidence-format.md) and the ledger agree:
on the test vectors of tests/vectors/, on the evidence file there, and on 1,000 one-character edits of it. (The
``evidence_parity`` fixture of tests/conftest.py also compares them on every evidence file a test checks.)"""

from __future__ import annotations

import ast
import base64
import json
import random
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from ledger.app import evidence_check
from ledger.app.signing import load_verifier
from ledger.domain import baselines as bl
from ledger.domain import chain, merkle
from ledger.domain.events import BaselineEntry
from tests import standalone

VECTORS = Path(__file__).resolve().parent / "vectors"
H = json.loads((VECTORS / "hashes.json").read_text(encoding="utf-8"))
sv = standalone.load()


def un(text: str) -> bytes:
    return base64.b64decode(text)


def test_the_verifier_imports_nothing_of_the_ledger() -> None:
    tree = ast.parse(standalone.SCRIPT.read_text(encoding="utf-8"))
    roots = {
        (n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    assert roots <= set(sys.stdlib_module_names) | {"cryptography", "__future__"}, roots


def test_chain_and_tree_vectors_hold_for_the_ledger_and_the_verifier() -> None:
    for v in H["chain"]:
        args = (v["prev_hash"], v["stream"], v["version"], v["type"], bytes.fromhex(v["body_hex"]))
        assert chain.event_hash(*args) == sv.chain_hash(*args) == v["hash"]
    entries = [__import__("hashlib").sha256(str(i).encode()).digest() for i in range(8)]
    leaves = [un(x) for x in H["leaf_hashes"]]
    assert [merkle.leaf_hash(e) for e in entries] == [sv.leaf(e) for e in entries] == leaves
    assert merkle.node_hash(leaves[0], leaves[1]) == sv.node(leaves[0], leaves[1]) == un(H["node_of_leaves_0_1"])
    assert sv.mth([]) == merkle.EMPTY_ROOT == un(H["empty_root"])
    for t in H["trees"]:
        assert merkle.root_of(leaves[: t["size"]]) == sv.mth(leaves[: t["size"]]) == un(t["root"])
    roots = [un(t["root"]) for t in H["trees"]]
    for p in H["inclusion"]:
        path = [un(h) for h in p["path"]]
        i, n = p["index"], p["size"]
        assert merkle.verify_inclusion(i, n, leaves[i], path, roots[n])
        assert sv.verify_inclusion(i, n, leaves[i], path, roots[n])
        assert not sv.verify_inclusion(i, n, leaves[i], path, roots[n - 1]) or n == 1
    for p in H["consistency"]:
        path = [un(h) for h in p["path"]]
        m, n = p["old"], p["new"]
        assert merkle.verify_consistency(m, n, roots[m], roots[n], path)
        assert sv.verify_consistency(m, n, roots[m], roots[n], path)
        if path:
            assert not sv.verify_consistency(m, n, roots[m], roots[n], path[::-1] if len(path) > 1 else [leaves[0]])
    for p in H["multiproof"]:
        proof, n = [un(h) for h in p["proof"]], p["size"]
        items = [(i, leaves[i]) for i in p["indices"]]
        assert merkle.multiproof_root(p["indices"], [h for _, h in items], proof, n) == roots[n]
        assert sv.multiproof_root(items, proof, n) == roots[n]


def test_heads_baselines_floats_and_the_cap_vectors() -> None:
    sh = H["stream_heads"]
    heads = [tuple(h) for h in sh["heads"]]
    ours = [merkle.head_entry(*h).hex() for h in sorted(heads)]
    theirs = [(sv.field(s.encode()) + v.to_bytes(8, "big") + bytes.fromhex(h)).hex() for s, v, h in sorted(heads)]
    assert ours == theirs == sh["entries_hex"]
    assert sv.mth([sv.leaf(bytes.fromhex(e)) for e in theirs]) == un(sh["root"])
    bs = H["baseline_set"]
    given = [msgspec.convert(e, BaselineEntry) for e in bs["entries"]]
    assert msgspec.json.encode(bl.canonical(given)).decode() == sv.enc(sv.canonical_entries(bs["entries"]))
    assert bl.set_id(given) == sv.set_id(bs["entries"]) == bs["set_id"]
    assert sv.enc(sv.canonical_entries(bs["entries"])) == bs["canonical_json"]
    for text, written in H["floats"].items():
        x = float(text)
        assert msgspec.json.encode(x).decode() == sv.enc_float(x) == written
    cap = H["score_cap"]
    assert sv.weighted([50.0, 0.0, 100.0], [1, 2, 3]) == min(350.0 / 6, 4 / 6 * 100)
    assert cap["max_weights"] / cap["total_weights"] * 100 == cap["w_over_W_times_100"] != cap["100_w_over_W"]


def test_the_evidence_vector_checks_with_both_and_from_the_command_line(tmp_path: Path) -> None:
    raw = (VECTORS / "evidence.json").read_bytes()
    pub = VECTORS / "vector.key.pub"
    rep = evidence_check.check_evidence(raw, load_verifier(pub))  # the parity fixture runs the verifier too
    assert rep.ok, rep.error
    theirs = sv.verify(raw, pub.read_text())
    assert theirs["ok"] and theirs["score"] == rep.score and theirs["events"] == rep.events
    script = [sys.executable, str(standalone.SCRIPT)]
    # Its arguments are `ledger check`'s: EVIDENCE --key KEY.pub [--witness W.pub]...
    evidence = str(VECTORS / "evidence.json")
    r = subprocess.run([*script, evidence, "--key", str(pub)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith(f"OK card {rep.card}"), r.stdout + r.stderr
    (tmp_path / "doctored.json").write_bytes(raw.replace(b"cnt3", b"cnt4", 1))
    doctored = str(tmp_path / "doctored.json")
    r = subprocess.run([*script, doctored, "--key", str(pub)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stdout.startswith("FAIL "), r.stdout + r.stderr
    r = subprocess.run([*script, evidence, str(pub)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--key" in r.stderr, r.stdout + r.stderr  # a bare KEY.pub is a usage error


@pytest.mark.heavy
def test_a_thousand_one_character_edits_are_refused_by_both() -> None:
    raw = (VECTORS / "evidence.json").read_bytes()
    text = raw.decode()
    pub = VECTORS / "vector.key.pub"
    key_line = pub.read_text()
    original = evidence_check.check_evidence.__wrapped_original__  # type: ignore[attr-defined]
    verifier = load_verifier(pub)
    # With the witness required, its cosignature line is checked too (without, any other line is ignored).
    wpub = VECTORS / "vector-witness.key.pub"
    witness = load_verifier(wpub, 4)
    rng = random.Random(30)
    alphabet = '0123456789abcdefABCDEF+/="\\{}[],:.- e\u2014\u00e9nulltrue\n'
    refused = 0
    for _ in range(1000):
        i = rng.randrange(len(text))
        c = rng.choice([a for a in alphabet if a != text[i]])
        changed = (text[:i] + c + text[i + 1 :]).encode()
        ours = original(changed, verifier, None, [witness])
        theirs = sv.verify(changed, key_line, [wpub.read_text()])
        assert ours.ok == theirs["ok"], (i, c, ours.error, theirs["error"])
        refused += not ours.ok
    assert refused == 1000  # the file is compact: every character of it is significant
    assert original(raw, verifier, None, [witness]).ok and sv.verify(raw, key_line, [wpub.read_text()])["ok"]


def test_the_consistency_vector_checks_with_both_and_a_changed_proof_fails() -> None:
    raw = (VECTORS / "consistency.json").read_bytes()
    pub = VECTORS / "vector.key.pub"
    rep = evidence_check.check_evidence(raw, load_verifier(pub))
    assert rep.ok and rep.kind == "consistency", rep.error
    sizes = [int((VECTORS / f"checkpoint{i}.txt").read_text().split("\n")[1]) for i in (1, 2)]
    assert (rep.old_size, rep.checkpoint_size) == tuple(sizes)
    doc = json.loads(raw)
    assert doc["old"] == (VECTORS / "checkpoint1.txt").read_text()
    doc["proof"][0] = base64.b64encode(bytes(32)).decode()
    changed = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    assert not evidence_check.check_evidence(changed, load_verifier(pub)).ok  # the parity fixture runs both
    # From the command line: one OK line and exit 0, as `ledger check` does.
    r = subprocess.run(
        [sys.executable, str(standalone.SCRIPT), str(VECTORS / "consistency.json"), "--key", str(pub)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        r.returncode == 0 and r.stdout == f"OK consistency: the tree of {sizes[1]} events extends that of {sizes[0]}\n"
    )


def test_the_cosigned_checkpoint_vector_and_the_quorum() -> None:
    from ledger.app.signing import cosigned
    from ledger.domain import signed_note as sn

    note = (VECTORS / "checkpoint2.cosigned.txt").read_text()
    assert note.split("\n\n")[0] == (VECTORS / "checkpoint2.txt").read_text().split("\n\n")[0]
    cp = sn.parse_checkpoint(note)
    wpub = VECTORS / "vector-witness.key.pub"
    witness = load_verifier(wpub, sn.COSIGNATURE_V1)
    assert cosigned(witness, cp) is not None
    assert sv.cosigned(sv.parse_note(note), wpub.read_text())
    raw = (VECTORS / "evidence.json").read_bytes()
    pub = load_verifier(VECTORS / "vector.key.pub")
    assert evidence_check.check_evidence(raw, pub, None, [witness]).ok  # the parity fixture runs both
    bare = (VECTORS / "consistency.json").read_bytes()  # its checkpoints carry no cosignature
    assert not evidence_check.check_evidence(bare, pub, None, [witness]).ok
    assert evidence_check.check_evidence(bare, pub).ok


def test_a_signature_line_whose_key_name_is_empty_or_holds_a_space_is_refused_by_both() -> None:
    from ledger.rules import evidence_file as ef

    raw = (VECTORS / "evidence.json").read_bytes()
    pub = VECTORS / "vector.key.pub"
    doc = ef.parse(raw)
    sig = base64.b64encode(bytes(range(68))).decode()
    for line in (f"\u2014  {sig}\n", f"\u2014 two words {sig}\n", f"\u2014 a\u00a0b {sig}\n", f"\u2014 a+b {sig}\n"):
        changed = ef.to_text(msgspec.structs.replace(doc, checkpoint=doc.checkpoint + line)).encode()
        rep = evidence_check.check_evidence(changed, load_verifier(pub))  # the parity fixture runs the verifier too
        assert not rep.ok and "key name" in (rep.error or ""), (line, rep.error)
        assert "key name" in sv.verify(changed, pub.read_text())["error"]


def _schema_type(t: msgspec.inspect.Type) -> str:
    mi = msgspec.inspect
    simple = {mi.StrType: "string", mi.IntType: "integer", mi.BoolType: "boolean", mi.FloatType: "number",
              mi.DateTimeType: "date-time", mi.AnyType: "any JSON", mi.NoneType: "null",
              mi.DictType: "object"}  # fmt: skip
    if type(t) in simple:
        return simple[type(t)]
    if isinstance(t, mi.ListType):
        return f"[{_schema_type(t.item_type)}]"
    if isinstance(t, mi.LiteralType):
        return "one of " + ", ".join(f'"{v}"' for v in t.values)
    if isinstance(t, mi.UnionType):
        return " or ".join(_schema_type(x) for x in t.types)
    assert isinstance(t, mi.StructType), t
    return t.cls.__name__


def _schema_fields(st: msgspec.inspect.StructType) -> str:
    return "; ".join(
        f"`{f.encode_name}`{'' if f.required else '?'}: {_schema_type(f.type)}" for f in st.fields if f.name != "ts"
    )


def test_the_format_page_gives_every_event_schema_check_applies() -> None:
    """docs/evidence-format.md section 11 lists, for each event type, the fields `ledger check` decodes it with (as
    tests/test_docs.py keeps the CLI reference current): an event type or field added to the code and not to the
    page fails here."""
    from ledger.domain import events

    mi = msgspec.inspect
    page = (Path(__file__).resolve().parent.parent / "docs" / "evidence-format.md").read_text(encoding="utf-8")
    nested: dict[str, mi.StructType] = {}
    rows = []
    union = mi.type_info(events.AnyEvent)
    assert isinstance(union, mi.UnionType)
    for st in union.types:
        assert isinstance(st, mi.StructType)
        rows.append(f"| `{st.cls.__struct_config__.tag}` | {_schema_fields(st)} |")
        for f in st.fields:
            t = f.type
            while isinstance(t, mi.ListType | mi.UnionType):
                inner = [t.item_type] if isinstance(t, mi.ListType) else t.types
                t = next(x for x in inner if type(x) is not mi.NoneType)
            if isinstance(t, mi.StructType):
                nested[t.cls.__name__] = t
    rows += [f"| {name} | {_schema_fields(st)} |" for name, st in nested.items()]
    missing = [r for r in rows if r not in page]
    assert not missing, "docs/evidence-format.md section 11 should read:\n" + "\n".join(rows)


def test_the_ledger_head_is_as_the_format_page_defines_it(tmp_path: Path) -> None:
    import hashlib
    import sqlite3

    from ledger import Ledger
    from tests.test_audit import play_disputed_card, play_open_card, run

    db = tmp_path / "l.sqlite"
    Ledger.open(db).close()
    empty = json.loads(run("--db", str(db), "verify", "--json")[1])["head"]
    assert empty == hashlib.sha256(b"arc-scorecard-ledger/head/v1").hexdigest()
    with Ledger.open(db) as led:
        play_disputed_card(led)
        play_open_card(led)
    with sqlite3.connect(db) as conn:
        heads = conn.execute(
            "SELECT stream, version, hash FROM events e WHERE version = (SELECT max(version) FROM events WHERE "
            "stream = e.stream)"
        ).fetchall()
    conn.close()
    assert {s.split(":")[0] for s, _, _ in heads} == {"card", "baselines"}

    def field(b: bytes) -> bytes:
        return len(b).to_bytes(8, "big") + b

    page = b"arc-scorecard-ledger/head/v1" + b"".join(
        field(s.encode()) + field(str(v).encode()) + field(h.encode()) for s, v, h in sorted(heads)
    )
    code, out = run("--db", str(db), "verify", "--json")
    assert code == 0 and json.loads(out)["head"] == hashlib.sha256(page).hexdigest(), out
