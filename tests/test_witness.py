"""Witnesses (C2SP tlog-witness, tlog-cosignature v1): `ledger witness` cosigns a log's checkpoints only as they
extend the last one it cosigned, and refuses a fork, a smaller tree and another signer; `ledger check --witness`
accepts evidence only under a checkpoint cosigned by a quorum. Two teams' ledgers witness each other."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger import Ledger
from ledger.app.checkpoints import sign_head
from ledger.app.signing import load_signer
from ledger.domain import merkle
from ledger.domain import signed_note as sn
from ledger.rules import consistency_file as cf
from ledger.store.merkle_store import TreeHead, TreeStore
from tests.test_audit import play_disputed_card, play_open_card, run
from tests.test_checkpoint import sha


def keys(tmp: Path, name: str, *flag: str) -> Path:
    code, out = run("keygen", name, *flag, "-o", str(tmp / name))
    assert code == 0, out
    return tmp / name


def cosign(path: Path, log_pub: Path, witness_key: Path, state: Path, out: Path) -> tuple[int, str]:
    return run("witness", str(path), "--log-key", str(log_pub), "--key", str(witness_key), "--state", str(state),
               "-o", str(out))  # fmt: skip


def refused(result: tuple[int, str], expect: str) -> None:
    code, out = result
    assert code == 1 and expect in out and out.count("\n") == 1 and "Traceback" not in out, out


def test_two_teams_witness_each_other_and_a_fork_is_refused(tmp_path: Path) -> None:
    a_db, b_db, fork_db = (str(tmp_path / f"{n}.sqlite") for n in ("a", "b", "fork"))
    a_key, b_key = keys(tmp_path, "team-a"), keys(tmp_path, "team-b")
    wa, wb = keys(tmp_path, "witness-a", "--witness"), keys(tmp_path, "witness-b", "--witness")
    a_pub, b_pub = Path(f"{a_key}.pub"), Path(f"{b_key}.pub")
    wb_state, wa_state = tmp_path / "wb-state", tmp_path / "wa-state"
    with Ledger.open(a_db) as led:
        card, _ = play_disputed_card(led)
    with Ledger.open(b_db) as led:
        play_open_card(led)

    # Team B's witness cosigns team A's first checkpoint (taken on trust), then A's log grows with a proof.
    assert run("--db", a_db, "checkpoint", "--key", str(a_key), "-o", str(tmp_path / "a1.txt"))[0] == 0
    code, out = cosign(tmp_path / "a1.txt", a_pub, wb, wb_state, tmp_path / "a1.cosigned")
    assert code == 0, out
    note = (tmp_path / "a1.cosigned").read_text()
    body, _, sigs = note.partition("\n\n")
    line = sigs.strip().split("\n")[-1]
    assert line.startswith("\u2014 witness-b ")
    blob = base64.b64decode(line.split(" ")[-1])
    wpub = base64.b64decode(Path(f"{wb}.pub").read_text().strip().split("+", 2)[2])
    assert wpub[0] == 4 and blob[:4] == sha(b"witness-b\n" + wpub)[:4] and len(blob) == 76
    ts = int.from_bytes(blob[4:12], "big")
    Ed25519PublicKey.from_public_bytes(wpub[1:]).verify(blob[12:], f"cosignature/v1\ntime {ts}\n{body}\n".encode())
    with Ledger.open(a_db) as led:
        play_open_card(led)
    assert run("--db", a_db, "checkpoint", "--key", str(a_key), "-o", str(tmp_path / "a2.txt"))[0] == 0
    assert run("--db", a_db, "consistency", str(tmp_path / "a1.txt"), str(tmp_path / "a2.txt"),
               "-o", str(tmp_path / "a1-a2.json"))[0] == 0  # fmt: skip
    refused(cosign(tmp_path / "a2.txt", a_pub, wb, wb_state, tmp_path / "x"), "give a consistency file")
    code, out = cosign(tmp_path / "a1-a2.json", a_pub, wb, wb_state, tmp_path / "a2.cosigned")
    assert code == 0, out
    assert cosign(tmp_path / "a2.cosigned", a_pub, wb, wb_state, tmp_path / "again")[0] == 0  # the same tree
    state = {p.name: p.read_text() for p in wb_state.glob("*.json")}

    # Evidence under the cosigned checkpoint: accepted with the witness, refused without its cosignature.
    assert run("--db", a_db, "prove", card, "--checkpoint", str(tmp_path / "a2.cosigned"),
               "-o", str(tmp_path / "ev.json"))[0] == 0  # fmt: skip
    ev = str(tmp_path / "ev.json")
    code, out = run("check", ev, "--key", str(a_pub), "--witness", f"{wb}.pub")
    assert code == 0 and "cosigned by 1 of the witnesses given (witness-b)" in out, out
    code, out = run("check", ev, "--key", str(a_pub), "--witness", f"{wb}.pub", "--witness", f"{wa}.pub")
    assert code == 1 and "cosigned by 1 of the 2 witnesses given, fewer than the quorum of 2" in out, out
    code, out = run("check", ev, "--key", str(a_pub), "--witness", f"{wb}.pub", "--witness", f"{wa}.pub",
                    "--quorum", "1", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["cosigned_by"] == ["witness-b"], out
    assert run("check", ev, "--key", str(a_pub), "--witness", f"{wa}.pub", "--quorum", "2")[0] == 2
    code, out = run("check", ev, "--key", str(a_pub), "--witness", str(a_pub))
    assert code == 2 and "this is a log's (checkpoint) key" in out, out
    code, out = run("check", str(tmp_path / "a1-a2.json"), "--key", str(a_pub), "--witness", f"{wb}.pub")
    assert code == 1 and "cosigned by 0 of the 1" in out, out  # the consistency file holds the bare checkpoints

    # The operator forks its log: another history, signed with the same key under the same origin.
    with Ledger.open(fork_db) as led:
        play_open_card(led)
        play_disputed_card(led)
        play_open_card(led)
    assert run("--db", fork_db, "checkpoint", "--key", str(a_key), "-o", str(tmp_path / "fork.txt"))[0] == 0
    a2 = (tmp_path / "a2.txt").read_text()
    m, n = int(a2.split("\n")[1]), int((tmp_path / "fork.txt").read_text().split("\n")[1])
    assert n > m
    with Ledger.open(fork_db) as led:
        proof = merkle.tree_hashes(merkle.consistency_ranges(m, n), TreeStore(led.store).parts)
    forged = cf.Consistency(cf.FORMAT, a2, (tmp_path / "fork.txt").read_text(),
                            [base64.b64encode(h).decode() for h in proof])  # fmt: skip
    (tmp_path / "forged.json").write_text(cf.to_text(forged))
    refused(cosign(tmp_path / "forged.json", a_pub, wb, wb_state, tmp_path / "x"), "FORK, not cosigned")
    refused(cosign(tmp_path / "fork.txt", a_pub, wb, wb_state, tmp_path / "x"), "give a consistency file")
    refused(cosign(tmp_path / "a1.txt", a_pub, wb, wb_state, tmp_path / "x"), "smaller than the tree of")
    # The fork's tree at the very size the witness cosigned, signed: another root there.
    with Ledger.open(fork_db) as led:
        root_m = merkle.tree_hashes([(0, m)], TreeStore(led.store).parts)[0]
    assert root_m != base64.b64decode(a2.split("\n")[2])
    note, _ = sign_head(TreeHead(m, 0, root_m, []), load_signer(a_key), "team-a")
    (tmp_path / "fork-m.txt").write_text(note)
    refused(cosign(tmp_path / "fork-m.txt", a_pub, wb, wb_state, tmp_path / "x"), "has another root")
    refused(cosign(tmp_path / "a2.txt", b_pub, wb, wb_state, tmp_path / "x"), "not signed by the log's key team-b")
    assert run("--db", b_db, "checkpoint", "--key", str(b_key), "--origin", "team-a",
               "-o", str(tmp_path / "b-as-a.txt"))[0] == 0  # fmt: skip
    refused(cosign(tmp_path / "b-as-a.txt", b_pub, wb, wb_state, tmp_path / "x"), "another signer for the origin")
    assert {p.name: p.read_text() for p in wb_state.glob("*.json")} == state  # nothing recorded on a refusal
    assert not (tmp_path / "x").exists()

    # And team A's witness cosigns team B's checkpoints: each team witnesses the other.
    assert run("--db", b_db, "checkpoint", "--key", str(b_key), "-o", str(tmp_path / "b1.txt"))[0] == 0
    assert cosign(tmp_path / "b1.txt", b_pub, wa, wa_state, tmp_path / "b1.cosigned")[0] == 0
    code, out = run("check", str(tmp_path / "a1-a2.json"), "--key", str(a_pub))
    assert code == 0, out


def test_a_damaged_witness_state_is_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    key, w = keys(tmp_path, "team"), keys(tmp_path, "w", "--witness")
    with Ledger.open(db) as led:
        play_open_card(led)
    assert run("--db", db, "checkpoint", "--key", str(key), "-o", str(tmp_path / "cp.txt"))[0] == 0
    state = tmp_path / "state"
    assert cosign(tmp_path / "cp.txt", Path(f"{key}.pub"), w, state, tmp_path / "c.txt")[0] == 0
    (f,) = state.glob("*.json")
    f.write_text("{not json")
    code, out = cosign(tmp_path / "cp.txt", Path(f"{key}.pub"), w, state, tmp_path / "c2.txt")
    assert code == 2 and "is damaged" in out and out.count("\n") == 1, out


def test_one_witness_key_given_twice_counts_once(tmp_path: Path) -> None:
    from ledger.app import evidence_check
    from ledger.app.signing import Signer, Verifier, load_verifier
    from ledger.rules import evidence_file as ef

    vectors = Path(__file__).resolve().parent / "vectors"
    ev, pub = str(vectors / "evidence.json"), str(vectors / "vector.key.pub")
    wpub = vectors / "vector-witness.key.pub"
    copy = tmp_path / "A-copy.pub"
    copy.write_text(wpub.read_text())
    assert run("check", ev, "--key", pub, "--witness", str(wpub), "--quorum", "1")[0] == 0
    code, out = run("check", ev, "--key", pub, "--witness", str(wpub), "--witness", str(copy), "--quorum", "2")
    assert code == 2 and "is the same key as --witness" in out and out.count("\n") == 1, out

    # The same private key cosigning again under another name is still one witness, in ledger check and in the
    # standalone verifier (the parity fixture runs it on each check_evidence below).
    signer = load_signer(vectors / "vector-witness.key", 4)
    alias = Signer("witness-alias", signer.key, signer.public)
    doc = ef.parse(Path(ev).read_bytes())
    text = doc.checkpoint.partition("\n\n")[0] + "\n"
    cosigned = doc.checkpoint + alias.cosign_line(text, 1_700_000_000)
    raw = ef.to_text(msgspec.structs.replace(doc, checkpoint=cosigned)).encode()
    key, witness = load_verifier(Path(pub)), load_verifier(wpub, 4)
    both = [witness, Verifier("witness-alias", witness.public)]
    assert evidence_check.check_evidence(raw, key, None, both[:1]).ok
    rep = evidence_check.check_evidence(raw, key, None, both, 2)
    assert not rep.ok and "cosigned by 1 of the 1 witnesses given, fewer than the quorum of 2" in (rep.error or "")
    bogus = tmp_path / "alias.pub"
    bogus.write_text(sn.verifier_key("witness-alias", signer.public, 4) + "\n")
    code, out = run("check", ev, "--key", pub, "--witness", str(wpub), "--witness", str(bogus), "--quorum", "2")
    assert code == 2 and "is the same key as --witness" in out, out
