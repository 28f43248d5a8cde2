"""Write the test vectors of docs/evidence-format.md (tests/vectors/): hash inputs with their expected outputs,
computed by the ledger's own code, and a small real evidence file with its key and checkpoints.

Run once (``.venv/bin/python -m tests.vectors.make_vectors``); tests/test_verify_evidence.py checks every vector
against both the ledger and the standalone verifier, so a change of format shows as a failing test, not as a
silently rewritten file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
from pathlib import Path

import msgspec
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli import cli
from ledger.domain import baselines as bl
from ledger.domain import chain, merkle
from ledger.domain.events import BaselineEntry

HERE = Path(__file__).resolve().parent


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def entries(n: int) -> list[bytes]:
    """The entries of the synthetic trees: the SHA-256 of the decimal text of each index."""
    return [hashlib.sha256(str(i).encode()).digest() for i in range(n)]


def hash_vectors() -> dict:
    chains = []
    for prev, stream, version, type_, body in [
        (
            chain.GENESIS,
            "card:00000000-0000-4000-8000-000000000000",
            1,
            "card_opened",
            b'{"type":"card_opened","ts":"2026-01-01T00:00:00Z","card_id":"00000000-0000-4000-8000-000000000000"}',
        ),
        ("ab" * 32, "card:\u00e9t\u00e9", 10, "action_taken", '{"type":"action_taken","x":"\u2014"}'.encode()),
        (chain.GENESIS, "baselines:x", 1, "baselines_recorded", b""),
    ]:
        chains.append(
            {
                "prev_hash": prev,
                "stream": stream,
                "version": version,
                "type": type_,
                "body_hex": body.hex(),
                "hash": chain.event_hash(prev, stream, version, type_, body),
            }
        )
    es = entries(8)
    leaves = [merkle.leaf_hash(e) for e in es]
    trees = [{"size": n, "root": b64(merkle.root_of(leaves[:n]))} for n in range(9)]

    def hashes(n: int, ranges: list[merkle.Range]) -> list[str]:
        return [b64(h) for h in merkle.proof_from_leaves(leaves[:n], ranges)]

    inclusion = [
        {"index": i, "size": n, "path": hashes(n, merkle.inclusion_ranges(i, n))}
        for n, i in ((1, 0), (5, 4), (7, 2), (8, 5))
    ]
    consistency = [
        {"old": m, "new": n, "path": hashes(n, merkle.consistency_ranges(m, n))}
        for m, n in ((3, 7), (4, 8), (1, 5), (6, 6))
    ]
    multi = [
        {"indices": ix, "size": n, "proof": hashes(n, merkle.multiproof_ranges(ix, n))}
        for ix, n in (([0], 1), ([1, 2, 5], 7), ([4, 5, 6, 7], 8))
    ]
    heads = [("card:a", 3, "11" * 32), ("baselines:b", 1, "22" * 32), ("card:\u00e9", 12, "33" * 32)]
    head_leaves = merkle.heads_tree(heads)
    given = [
        BaselineEntry(game_id="zz01", baseline_actions=[5], tags=["t"]),
        BaselineEntry(game_id="aa01-1", title="A", baseline_actions=[22, 123, 73], level_tags=[["x"], []]),
        BaselineEntry(game_id="zz01", baseline_actions=[7, 8]),  # the last one of a game id wins
    ]
    return {
        "entries_of_leaf_i": "SHA-256(ascii(decimal(i)))",
        "chain": chains,
        "leaf_hashes": [b64(x) for x in leaves],
        "node_of_leaves_0_1": b64(merkle.node_hash(leaves[0], leaves[1])),
        "empty_root": b64(merkle.EMPTY_ROOT),
        "trees": trees,
        "inclusion": inclusion,
        "consistency": consistency,
        "multiproof": multi,
        "stream_heads": {
            "heads": [list(h) for h in heads],
            "entries_hex": [merkle.head_entry(*h).hex() for h in sorted(heads)],
            "root": b64(merkle.root_of(head_leaves)),
            "count": len(heads),
        },
        "baseline_set": {
            "entries": [json.loads(msgspec.json.encode(e)) for e in given],
            "canonical_json": msgspec.json.encode(bl.canonical(given)).decode(),
            "set_id": bl.set_id(given),
        },
        "floats": {
            repr(x): msgspec.json.encode(x).decode()
            for x in (2 / 3 * 100, 1e-05, 1.5e-07, 1e16, 100.0, 0.0, 9.455625, 123456789012345678.0)
        },
        "score_cap": {
            "max_weights": 2,
            "total_weights": 3,
            "w_over_W_times_100": 2 / 3 * 100,
            "100_w_over_W": 100 * 2 / 3,
        },
    }


def evidence_vectors(out: Path) -> None:
    """A real card played through the toolkit, two checkpoints (the second after more events), the consistency
    file between them, the second cosigned by a witness, and the card's evidence against the cosigned one."""
    from tests.test_audit import play_disputed_card, play_open_card

    run = CliRunner()
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "l.sqlite")
        key = out / "vector.key"
        if not key.exists():
            assert run.invoke(cli, ["keygen", "vectors.example/ledger", "-o", str(key)]).exit_code == 0
        with Ledger.open(db) as led:
            card, _ = play_disputed_card(led)
        r = run.invoke(cli, ["--db", db, "checkpoint", "--key", str(key), "-o", str(out / "checkpoint1.txt")])
        assert r.exit_code == 0, r.output
        with Ledger.open(db) as led:
            play_open_card(led)
        r = run.invoke(cli, ["--db", db, "checkpoint", "--key", str(key), "-o", str(out / "checkpoint2.txt")])
        assert r.exit_code == 0, r.output
        cps = [str(out / "checkpoint1.txt"), str(out / "checkpoint2.txt")]
        r = run.invoke(cli, ["--db", db, "consistency", *cps, "-o", str(out / "consistency.json")])
        assert r.exit_code == 0, r.output
        witness = out / "vector-witness.key"
        if not witness.exists():
            r = run.invoke(cli, ["keygen", "witness.vectors.example", "--witness", "-o", str(witness)])
            assert r.exit_code == 0, r.output
        state = Path(d) / "witness-state"
        for given in ("checkpoint1.txt", "consistency.json"):
            args = ["witness", str(out / given), "--key", str(witness), "--log-key", f"{key}.pub"]
            r = run.invoke(cli, [*args, "--state", str(state), "-o", str(out / "checkpoint2.cosigned.txt")])
            assert r.exit_code == 0, r.output
        cosigned = str(out / "checkpoint2.cosigned.txt")
        r = run.invoke(cli, ["--db", db, "prove", card, "--checkpoint", cosigned, "-o", str(out / "evidence.json")])
        assert r.exit_code == 0, r.output


def main() -> None:
    (HERE / "hashes.json").write_text(json.dumps(hash_vectors(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    evidence_vectors(HERE)


if __name__ == "__main__":
    main()
