#!/usr/bin/env python3
"""A standalone verifier of arc-scorecard-ledger evidence files, written from docs/evidence-format.md alone.

Standard library and ``cryptography`` (Ed25519) only; it imports nothing of the ledger, so a reviewer can read it,
or write their own from the same page, and get the same verdict as ``ledger check``:

    python3 verify_evidence.py EVIDENCE.json --key KEY.pub         # exit 0 OK, 1 FAIL, 2 bad usage or input
    python3 verify_evidence.py CONSISTENCY.json --key KEY.pub      # two checkpoints: the later extends the earlier
    python3 verify_evidence.py FILE.json --key KEY.pub --witness W1.pub --witness W2.pub
                                                                   # and every witness given cosigned the checkpoint

The section numbers in comments are the page's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
import re
import sys
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

FORMAT = "arc-scorecard-ledger/evidence/v1"
CONSISTENCY = "arc-scorecard-ledger/consistency/v1"


class Fail(Exception):
    """The first check that does not hold."""


def sha(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def field(b: bytes) -> bytes:
    return len(b).to_bytes(8, "big") + b


def b64(text: Any, what: str, size: int | None = 32) -> bytes:
    """Canonical base64 (the encoding of the bytes gives the text back)."""
    if not isinstance(text, str):
        raise Fail(f"{what} is not base64")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise Fail(f"{what} is not base64") from None
    if base64.b64encode(raw).decode() != text or (size is not None and len(raw) != size):
        raise Fail(f"{what} is not canonical base64 of {size} bytes")
    return raw


# -- section 1: the chain ------------------------------------------------------------------------------------------

GENESIS = "0" * 64


def chain_hash(prev: str, stream: str, version: int, type_: str, body: bytes) -> str:
    msg = (
        b"arc-scorecard-ledger/event/v1"
        + field(prev.encode("ascii"))
        + field(stream.encode("utf-8"))
        + field(str(version).encode("ascii"))
        + field(type_.encode("utf-8"))
        + field(body)
    )
    return hashlib.sha256(msg).hexdigest()


# -- section 2: RFC 9162 -------------------------------------------------------------------------------------------


def leaf(entry: bytes) -> bytes:
    return sha(b"\x00" + entry)


def node(left: bytes, right: bytes) -> bytes:
    return sha(b"\x01" + left + right)


def split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: list[bytes]) -> bytes:
    """The root over leaf hashes."""
    if not leaves:
        return sha(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = split(len(leaves))
    return node(mth(leaves[:k]), mth(leaves[k:]))


def verify_inclusion(index: int, size: int, leaf_hash: bytes, path: list[bytes], root: bytes) -> bool:
    """RFC 9162 section 2.1.3.2."""
    return index < size and _climb(index, size - 1, leaf_hash, path)[1:] == (0, root)


def verify_consistency(m: int, n: int, old: bytes, new: bytes, path: list[bytes]) -> bool:
    """RFC 9162 section 2.1.4.2."""
    if not 0 <= m <= n:
        return False
    if m == n:
        return not path and old == new
    if m == 0:
        return not path
    if m & (m - 1) == 0:
        path = [old, *path]
    if not path:
        return False
    fn, sn = m - 1, n - 1
    while fn % 2 == 1:
        fn //= 2
        sn //= 2
    return _climb(fn, sn, path[0], path[1:]) == (old, 0, new)


def _climb(fn: int, sn: int, first: bytes, path: list[bytes]) -> tuple[bytes, int, bytes]:
    """The loop both RFC 9162 checks share, from the hash ``first`` at (fn, sn) up ``path``: (fr, sn, sr) at its
    end (sn is not 0 when the path does not fit the tree)."""
    fr = sr = first
    for c in path:
        if sn == 0:
            return fr, -1, sr
        if fn % 2 == 1 or fn == sn:
            fr, sr = node(c, fr), node(c, sr)
            while fn % 2 == 0 and fn != 0:
                fn //= 2
                sn //= 2
        else:
            sr = node(sr, c)
        fn //= 2
        sn //= 2
    return fr, sn, sr


def multiproof_root(items: list[tuple[int, bytes]], proof: list[bytes], size: int) -> bytes:
    """Section 5's walk; ``items`` sorted by leaf index. Raises Fail when the proof's length does not fit."""
    need = _count(0, size, [i for i, _ in items])
    if need != len(proof):
        raise Fail(
            f"the inclusion proof has {len(proof)} hashes where these leaf positions in the checkpoint's tree of "
            f"{size} events need {need}: another checkpoint's proof"
        )
    it = iter(proof)

    def walk(lo: int, hi: int, part: list[tuple[int, bytes]]) -> bytes:
        if not part:
            return next(it)
        if len(part) == hi - lo:
            return mth([h for _, h in part])
        mid = lo + split(hi - lo)
        return node(walk(lo, mid, [p for p in part if p[0] < mid]), walk(mid, hi, [p for p in part if p[0] >= mid]))

    return walk(0, size, items)


def _count(lo: int, hi: int, idx: list[int]) -> int:
    if not idx:
        return 1
    if len(idx) == hi - lo:
        return 0
    mid = lo + split(hi - lo)
    return _count(lo, mid, [i for i in idx if i < mid]) + _count(mid, hi, [i for i in idx if i >= mid])


# -- section 4: signed notes ---------------------------------------------------------------------------------------

_NAME = re.compile(r"[^\s+\x00-\x1f\x7f]+")
_NUM = re.compile(r"0|[1-9][0-9]{0,18}")


def read_key(line: str, key_type: int = 1) -> tuple[str, bytes, bytes]:
    """(name, key id, public key) of a verifier key line (type 0x01: a log's key; 0x04: a witness's)."""
    parts = line.strip().split("+", 2)
    if len(parts) != 3 or not _NAME.fullmatch(parts[0]) or not re.fullmatch(r"[0-9a-f]{8}", parts[1]):
        raise ValueError("not a verifier key")
    raw = b64(parts[2], "the key", 33)
    if raw[0] != key_type:
        raise ValueError(f"not an Ed25519 verifier key of type {key_type}")
    kid = sha(parts[0].encode() + b"\n" + raw)[:4]
    if kid.hex() != parts[1]:
        raise ValueError("the key id does not match the key")
    return parts[0], kid, raw[1:]


def parse_note(note: str) -> dict[str, Any]:
    text, sep, sigs = note.partition("\n\n")
    if not sep or not text:
        raise Fail("the checkpoint is not a signed note")
    text += "\n"
    if any(c < " " and c != "\n" for c in text):
        raise Fail("the checkpoint holds control characters")
    lines = text[:-1].split("\n")
    if len(lines) < 4 or not _NAME.fullmatch(lines[0]) or not _NUM.fullmatch(lines[1]):
        raise Fail("the checkpoint is not a checkpoint of this ledger")
    root = b64(lines[2], "the checkpoint's root")
    heads = [ln for ln in lines[3:] if ln.startswith("stream-heads ")]
    if len(heads) != 1 or len(heads[0].split(" ")) != 3 or not _NUM.fullmatch(heads[0].split(" ")[1]):
        raise Fail("the checkpoint needs exactly one 'stream-heads COUNT ROOT' line")
    signatures = []
    if not sigs.endswith("\n"):
        raise Fail("the checkpoint's signatures must end with a newline")
    for line in sigs[:-1].split("\n"):
        if not line.startswith("\u2014 "):
            raise Fail("a signature line must start with an em dash")
        name, space, enc = line[2:].rpartition(" ")
        raw = b64(enc, "a signature", None)
        if not space or len(raw) < 5 or not _NAME.fullmatch(name):
            raise Fail("a signature line must be '\u2014 NAME BASE64' with a key name (section 4)")
        signatures.append((name, raw[:4], raw[4:]))
    return {
        "text": text,
        "origin": lines[0],
        "size": int(lines[1]),
        "root": root,
        "count": int(heads[0].split(" ")[1]),
        "heads_root": b64(heads[0].split(" ")[2], "the stream-heads root"),
        "signatures": signatures,
    }


def cosigned(cp: dict[str, Any], witness_line: str) -> bool:
    """Section 10: a valid cosignature/v1 of the checkpoint by this witness key."""
    name, kid, public = read_key(witness_line, 4)
    for n, k, blob in cp["signatures"]:
        if n != name or k != kid or len(blob) != 72:
            continue
        ts = int.from_bytes(blob[:8], "big")
        if ts < 2**63 and ed25519_ok(public, blob[8:], f"cosignature/v1\ntime {ts}\n" + cp["text"]):
            return True
    return False


def quorum_failure(cp: dict[str, Any], witnesses: list[str], quorum: int | None) -> str | None:
    if not witnesses:
        return None
    # Section 10: witnesses are distinct keys, told apart by their key hash (one key under two names is one witness).
    by_hash: dict[bytes, str] = {}
    for w in witnesses:
        by_hash.setdefault(sha(b"\x04" + read_key(w, 4)[2]), w)
    witnesses = list(by_hash.values())
    need = len(witnesses) if quorum is None else quorum
    have = sum(1 for w in witnesses if cosigned(cp, w))
    return None if have >= need else f"the checkpoint is cosigned by {have} of the witnesses given, fewer than {need}"


def ed25519_ok(public: bytes, sig: bytes, text: str) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(sig, text.encode("utf-8"))
        return True
    except InvalidSignature:
        return False


# -- section 5: canonical JSON -------------------------------------------------------------------------------------


def enc(value: Any) -> str:
    """Section 5's encoding (section 8's float rule included)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return enc_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(enc(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + enc(v) for k, v in value.items()) + "}"
    raise TypeError(type(value))


def enc_float(x: float) -> str:
    if x != x or x in (float("inf"), float("-inf")):
        return "null"
    r = repr(x)
    if "e" not in r:
        return r
    mant, exp = r.split("e")
    e = int(exp)
    if -5 <= e <= 15:  # repr is positional only from -4: write the -5 case positionally
        digits = mant.lstrip("-").replace(".", "")
        return ("-" if x < 0 else "") + "0." + "0" * (-e - 1) + digits
    return f"{mant}e{e}"


def strip_ws(raw: str) -> str:
    """The text with JSON whitespace outside strings removed."""
    out, inside, esc = [], False, False
    for c in raw:
        if inside:
            out.append(c)
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                inside = False
        elif c == '"':
            inside = True
            out.append(c)
        elif c not in " \t\n\r":
            out.append(c)
    return "".join(out)


#: The files' fields, in their canonical order: a type, [a list of one shape], or {exactly these fields}.
STREAM_FIELDS = {"stream": str, "leaves": [int], "events": [str], "head_index": int, "head_proof": [str]}
EVIDENCE_FIELDS = {
    "format": str,
    "card": str,
    "checkpoint": str,
    "streams": [STREAM_FIELDS],
    "proof": [str],
    "scorecard": str,
}
CONSISTENCY_FIELDS = {"format": str, "old": str, "new": str, "proof": [str]}


def fits(v: Any, shape: Any) -> bool:
    if isinstance(shape, list):
        return isinstance(v, list) and all(fits(x, shape[0]) for x in v)
    if isinstance(shape, dict):
        return isinstance(v, dict) and set(v) == set(shape) and all(fits(v[k], t) for k, t in shape.items())
    return isinstance(v, shape) and not isinstance(v, bool)


def ordered(v: Any, shape: Any) -> Any:
    """``v`` (which fits ``shape``) with its objects' fields in the shape's order."""
    if isinstance(shape, list):
        return [ordered(x, shape[0]) for x in v]
    if isinstance(shape, dict):
        return {k: ordered(v[k], t) for k, t in shape.items()}
    return v


def read_file(raw: bytes) -> dict[str, Any]:
    """Check 1: decode, types, canonical form, format."""
    try:
        text = raw.decode("utf-8")
        doc = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        raise Fail("not an evidence file: not JSON") from None
    if not isinstance(doc, dict) or set(doc) != set(EVIDENCE_FIELDS):
        raise Fail("not an evidence file: its fields differ")
    if not fits(doc, EVIDENCE_FIELDS):
        raise Fail("not an evidence file: a field has the wrong type")
    canonical(text, doc, EVIDENCE_FIELDS, FORMAT)
    return doc


def canonical(text: str, doc: dict[str, Any], shape: dict[str, Any], format_: str) -> None:
    """A file's text is the canonical encoding of its fields, and its format is ``format_``."""
    if enc(ordered(doc, shape)) != strip_ws(text):
        raise Fail("the file is not in canonical form")
    if doc["format"] != format_:
        raise Fail(f"unknown format {doc['format']!r}")


# -- section 7: baseline sets ----------------------------------------------------------------------------------------

ENTRY_FIELDS = ("game_id", "title", "baseline_actions", "tags", "private_tags", "level_tags")


def canonical_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id: dict[str, dict[str, Any]] = {}
    for e in entries:
        by_id[e["game_id"]] = {k: e[k] for k in ENTRY_FIELDS if e.get(k) is not None}
    return [by_id[k] for k in sorted(by_id)]


def set_id(entries: list[dict[str, Any]]) -> str:
    body = enc(canonical_entries(entries)).encode("utf-8")
    return hashlib.sha256(b"arc-scorecard-ledger/baselines/v1\x00" + body).hexdigest()


# -- section 8: the scorecard ----------------------------------------------------------------------------------------


OPENED_FIELDS = ("source_url", "tags", "opaque", "competition_mode", "baselines_id", "environments", "calculator")


def fold(card_id: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    card: dict[str, Any] = {"card_id": card_id, "games": {}, "closed": False, **dict.fromkeys(OPENED_FIELDS)}

    def play_for(e: dict[str, Any]) -> dict[str, Any] | None:
        plays = card["games"].get(e.get("game_id"))
        if not plays:
            return None
        for p in reversed(plays):
            if p["guid"] == e.get("guid"):
                return p
        return plays[-1]

    for e in events:
        t = e["type"]
        if t == "card_opened":
            card["card_id"] = e["card_id"]
            for k in OPENED_FIELDS:
                card[k] = e.get(k)
        elif t == "card_closed":
            card["closed"] = True
        elif t == "card_reopened":
            card["closed"] = False
        elif t in ("baselines_attached", "baselines_reported"):
            card["baselines_id"] = e["baselines_id"]
        elif t == "play_started":
            card["games"].setdefault(e["game_id"], []).append(
                {"guid": e["guid"], "actions": 0, "resets": 0, "state": "NOT_FINISHED", "marks": [], "levels": 0}
            )
        elif t in ("action_taken", "level_reset", "observation_reapplied", "level_completed", "game_over", "win"):
            p = play_for(e)
            if p is None:
                continue
            if t in ("action_taken", "level_reset", "observation_reapplied"):
                p["actions"] += 1
            if t == "level_reset" or (t == "observation_reapplied" and e["action"] == 0):
                p["resets"] += 1
            if t == "level_completed":
                p["marks"].append((e["levels_completed"], p["actions"]))
                p["levels"] = e["levels_completed"]
            if t == "game_over":
                p["state"] = "GAME_OVER"
            if t == "win":
                p["state"] = "WIN"
    return card


def era(calculator: str | None) -> str:
    """The arithmetic of the arc-agi release the card records (none, or one not published before 0.9.7: the newest)."""
    if calculator in ("0.9.1", "0.9.2"):
        return "linear"
    if calculator in ("0.9.3", "0.9.4", "0.9.5", "0.9.6"):
        return "squared"
    return "capped"


def level_score(completed: bool, a: int, b: int, arithmetic: str = "capped") -> float:
    if not completed or a <= 0:
        return 0.0
    if arithmetic == "linear":
        return min((b / a) * 100, 100.0)
    return min(((b / a) ** 2) * 100, 115.0 if arithmetic == "capped" else 100.0)


def weighted(scores: list[float], weights: list[int], arithmetic: str = "capped") -> float:
    if not scores:
        return 0.0
    if arithmetic == "linear":
        return sum(scores) / len(scores)
    s, w, m = 0.0, 0, 0
    for si, wi in zip(scores, weights, strict=True):
        s += si * wi
        w += wi
        if si > 0:
            m += wi
    return s / w if arithmetic == "squared" else min(s / w, m / w * 100)


def score_run(
    game_id: str, play: dict[str, Any], info: dict[str, Any] | None, pool: dict | None, arithmetic: str = "capped"
) -> dict[str, Any]:
    base = info.get("baseline_actions") if info else None
    message = None
    if info is None:
        message = f"No Matching EnvironmentInfo found for {game_id}"
    elif not base:
        message = "Human baseline actions are not available for this environment"
    elif len(base) < len(play["marks"]):
        message = "Human baseline actions size mismatch"
    marks = len(play["marks"])
    # The actions spent on each level completed, then those since the last completion.
    spent = [b - a for a, b in itertools.pairwise([0, *(at for _, at in play["marks"]), play["actions"]])]
    if message is not None:
        acts = spent[: marks + (play["state"] != "WIN")]
        return {
            "id": game_id,
            "guid": play["guid"],
            "score": 0.0,
            "levels_completed": play["levels"],
            "actions": play["actions"],
            "resets": play["resets"],
            "state": play["state"],
            "completed": play["state"] == "WIN",
            "level_scores": [0.0] * len(acts),
            "level_actions": acts,
            "level_baseline_actions": [-1] * len(acts),
            "number_of_environments": 0,
            "message": message,
        }
    assert info is not None and base
    actions = (spent + [0] * len(base))[: len(base)]  # the levels after the one being played: none
    scores = []
    for i, (b, a) in enumerate(zip(base, actions, strict=True)):
        completed = i < marks
        scores.append(level_score(completed, a, b, arithmetic))
        if pool is not None:
            for tag in info.get("tags") or []:
                t = pool.setdefault(tag, {"scores": [], "weights": [], "done": 0, "actions": 0, "games": set()})
                t["scores"].append(scores[-1])
                t["weights"].append(i + 1)
                t["done"] += completed
                t["actions"] += a
                t["games"].add(game_id)
    return {
        "guid": play["guid"],
        "score": weighted(scores, list(range(1, len(base) + 1)), arithmetic),
        "levels_completed": marks,
        "actions": sum(actions),
        "resets": play["resets"],
        "state": play["state"],
        "completed": play["state"] == "WIN",
        "level_scores": scores,
        "level_actions": actions,
        "level_baseline_actions": list(base),
    }


def scorecard(card: dict[str, Any], infos: dict[str, dict[str, Any]]) -> str:
    arithmetic = era(card["calculator"])
    envs: list[dict[str, Any]] = []
    pool: dict[str, Any] = {}

    def game(gid: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": gid,
            "runs": runs,
            "score": max(r["score"] for r in runs),
            "actions": sum(r["actions"] for r in runs),
            "levels_completed": max(r["levels_completed"] for r in runs),
            "completed": any(r["completed"] for r in runs),
            "level_count": max(len(r["level_scores"]) for r in runs),
            "resets": sum(r["resets"] or 0 for r in runs),
        }

    for gid, plays in card["games"].items():
        best = max(range(len(plays)), key=lambda i: plays[i]["levels"])  # the first of the most levels
        runs = [score_run(gid, p, infos.get(gid), pool if i == best else None, arithmetic) for i, p in enumerate(plays)]
        envs.append(game(gid, runs))
    if card["competition_mode"] and not card["closed"] and card["environments"] is not None:
        keys = list(card["games"])
        for gid in card["environments"]:
            if any(k.startswith(gid) for k in keys):
                continue
            play = {"guid": None, "actions": 0, "resets": 0, "state": "NOT_FINISHED", "marks": [], "levels": 0}
            envs.append(game(gid, [score_run(gid, play, infos.get(gid), pool, arithmetic)]))
            keys.append(gid)
    total = sum(g["score"] for g in envs)  # built-in sum(): compensated on Python 3.12+, as the toolkit's
    doc = {
        "source_url": card["source_url"],
        "tags": card["tags"],
        "opaque": card["opaque"],
        "card_id": card["card_id"],
        "score": total / len(envs) if envs else 0.0,
        "environments": envs,
        "tags_scores": [
            {
                "id": tag,
                "score": weighted(t["scores"], t["weights"], arithmetic),
                "levels_completed": t["done"],
                "actions": t["actions"],
                "number_of_levels": len(t["scores"]),
                "number_of_environments": len(t["games"]),
            }
            for tag, t in pool.items()
        ],
        # Before 0.9.3 the document has no competition_mode.
        "competition_mode": card["competition_mode"] if arithmetic != "linear" else None,
        "total_environments_completed": sum(1 for g in envs if g["completed"]),
        "total_environments": len(envs),
        "total_levels_completed": sum(g["levels_completed"] for g in envs),
        "total_levels": sum(g["level_count"] for g in envs),
        "total_actions": sum(g["actions"] for g in envs),
    }
    return enc(_drop_null(doc))


def _drop_null(v: Any, top: bool = True) -> Any:
    # Null fields of the document's own objects go; inside `opaque` everything is kept as given.
    if isinstance(v, dict):
        return {k: (x if k == "opaque" and top else _drop_null(x, False)) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_null(x, False) for x in v]
    return v


# -- section 6: the checks ---------------------------------------------------------------------------------------------


def signed(cp: dict[str, Any], name: str, kid: bytes, public: bytes, what: str) -> None:
    mine = [sig for n, k, sig in cp["signatures"] if n == name and k == kid]
    if not mine:
        raise Fail(f"{what} is not signed by the key given ({name})")
    if not any(ed25519_ok(public, s, cp["text"]) for s in mine):
        raise Fail(f"{what}'s text was changed after it was signed: its signature by {name} fails")


def verify_consistency_file(
    text: str, doc: dict[str, Any], key_line: str, witnesses: list[str], quorum: int | None = None
) -> dict[str, Any]:
    """Section 9: a consistency file (``doc``, read from ``text``)."""
    name, kid, public = read_key(key_line)
    out: dict[str, Any] = {"ok": False, "error": None, "events": None, "checkpoint_size": None}
    try:
        if not fits(doc, CONSISTENCY_FIELDS):
            raise Fail("not a consistency file")
        canonical(text, doc, CONSISTENCY_FIELDS, CONSISTENCY)
        old, new = parse_note(doc["old"]), parse_note(doc["new"])
        signed(old, name, kid, public, "the old checkpoint")
        signed(new, name, kid, public, "the new checkpoint")
        if old["origin"] != new["origin"]:
            raise Fail("the checkpoints are of two logs")
        if new["size"] < old["size"]:
            raise Fail("the new checkpoint's tree is smaller than the old one's")
        proof = [b64(h, "a proof hash") for h in doc["proof"]]
        if not verify_consistency(old["size"], new["size"], old["root"], new["root"], proof):
            raise Fail("the consistency proof fails: the new tree does not extend the old one (a fork)")
        missing = quorum_failure(new, witnesses, quorum)
        if missing:
            raise Fail(missing)
    except Fail as e:
        out["error"] = str(e)
        return out
    out.update(ok=True, checkpoint_size=new["size"], old_size=old["size"])
    return out


def verify(raw: bytes, key_line: str, witnesses: list[str] | None = None, quorum: int | None = None) -> dict[str, Any]:
    """Every check of section 6 (but re-simulation) in order; returns {"ok", "error", "card", "events", ...}.
    A consistency file (section 9) is checked as such."""
    try:
        text = raw.decode("utf-8")
        parsed = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        parsed = None
    if isinstance(parsed, dict) and parsed.get("format") == CONSISTENCY:
        return verify_consistency_file(text, parsed, key_line, witnesses or [], quorum)
    name, kid, public = read_key(key_line)
    out: dict[str, Any] = {"ok": False, "error": None, "card": None, "checkpoint_size": None, "events": None}
    try:
        doc = read_file(raw)  # 1
        out["card"] = doc["card"]
        out["events"] = len(doc["streams"][0]["events"]) if doc["streams"] else 0
        cp = parse_note(doc["checkpoint"])  # 2
        out["checkpoint_size"] = cp["size"]
        signed(cp, name, kid, public, "the checkpoint")  # 3
        card_stream = "card:" + doc["card"]
        if not doc["streams"] or doc["streams"][0]["stream"] != card_stream:  # 4
            raise Fail(f"the first stream must be {card_stream!r}")
        items: list[tuple[int, bytes]] = []
        decoded: dict[str, list[dict[str, Any]]] = {}
        heads = []
        for s in doc["streams"]:  # 5
            sname = s["stream"]
            if sname in decoded:
                raise Fail(f"stream {sname!r} is in the file twice")
            if not s["events"] or len(s["leaves"]) != len(s["events"]):
                raise Fail(f"stream {sname!r}: events and leaf positions differ in number")
            if any(not 0 <= i < cp["size"] for i in s["leaves"]):
                raise Fail(f"stream {sname!r}: a leaf position is outside the tree")
            if not 0 <= s["head_index"] < cp["count"]:
                raise Fail(f"stream {sname!r}: head_index is outside the stream-heads tree")
            prev, evs = GENESIS, []
            for v, text in enumerate(s["events"], 1):
                body = text.encode("utf-8")
                try:
                    e = json.loads(body)
                except ValueError:
                    raise Fail(f"stream {sname!r}: event {v} is not JSON") from None
                if not isinstance(e, dict) or not isinstance(e.get("type"), str):
                    raise Fail(f"stream {sname!r}: event {v} has no type")
                prev = chain_hash(prev, sname, v, e["type"], body)
                items.append((s["leaves"][v - 1], leaf(bytes.fromhex(prev))))
                evs.append(e)
            decoded[sname] = evs
            entry = field(sname.encode("utf-8")) + len(evs).to_bytes(8, "big") + bytes.fromhex(prev)
            heads.append((s, entry))
        items.sort(key=lambda p: p[0])  # 6
        if len({i for i, _ in items}) != len(items):
            raise Fail("a leaf position is given to two events")
        proof = [b64(h, "a proof hash") for h in doc["proof"]]
        if multiproof_root(items, proof, cp["size"]) != cp["root"]:
            raise Fail("the events and the inclusion proof do not make the checkpoint's root hash")
        for s, entry in heads:  # 7
            path = [b64(h, "a head proof hash") for h in s["head_proof"]]
            if not verify_inclusion(s["head_index"], cp["count"], leaf(entry), path, cp["heads_root"]):
                raise Fail(f"stream {s['stream']!r}: the file does not hold all of its events (its tail is missing)")
        card = fold(doc["card"], decoded[card_stream])
        expected = [card_stream] + ([f"baselines:{card['baselines_id']}"] if card["baselines_id"] else [])
        if [s["stream"] for s in doc["streams"]] != expected:  # 8
            raise Fail(f"the file must hold exactly the streams {expected}")
        infos: dict[str, dict[str, Any]] = {}
        if card["baselines_id"]:  # 9
            rec = decoded[expected[1]][0]
            if rec.get("type") != "baselines_recorded" or set_id(rec["entries"]) != card["baselines_id"]:
                raise Fail(f"the baseline set is not the set {card['baselines_id']} the card is scored with")
            infos = {e["game_id"]: e for e in canonical_entries(rec["entries"])}
        if scorecard(card, infos) != doc["scorecard"]:  # 10
            raise Fail("the scorecard in the file is not the one the calculator makes from its events")
        events = decoded[card_stream]
        for i, e in enumerate(events):  # 11: each close's document_sha256, against the card as it stood there
            if e["type"] != "card_closed" or e.get("document_sha256") is None:
                continue
            then = fold(doc["card"], events[: i + 1])
            made = scorecard(then, infos if then["baselines_id"] else {})
            if hashlib.sha256(made.encode("utf-8")).hexdigest() != e["document_sha256"]:
                raise Fail(f"the card_closed event at version {i + 1} records another document sha256")
        out["closed"] = card["closed"]
        missing = quorum_failure(cp, witnesses or [], quorum)  # 12
        if missing:
            raise Fail(missing)
    except Fail as e:
        out["error"] = str(e)
        return out
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, StopIteration) as e:
        out["error"] = f"malformed content: {type(e).__name__}: {e}"
        return out
    out["ok"] = True
    out["score"] = json.loads(doc["scorecard"]).get("score")
    return out


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="verify_evidence.py", description="Check an evidence or consistency file as `ledger check` does."
    )
    ap.add_argument("evidence", metavar="EVIDENCE", help="the evidence or consistency file")
    ap.add_argument(
        "--key", required=True, metavar="FILE", help="the public key (KEY.pub) the checkpoint is signed with"
    )
    ap.add_argument(
        "--witness", action="append", default=[], metavar="FILE", help="a witness's public key; each must cosign"
    )
    try:
        args = ap.parse_args(argv[1:])
    except SystemExit as e:
        return int(e.code or 0)
    try:
        with open(args.evidence, "rb") as f:
            raw = f.read()
        keys = []
        for path in [args.key, *args.witness]:
            with open(path, encoding="utf-8") as f:
                keys.append(f.read())
        result = verify(raw, keys[0], keys[1:])
    except (OSError, ValueError, Fail) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if result["ok"] and "old_size" in result:
        print(f"OK consistency: the tree of {result['checkpoint_size']} events extends that of {result['old_size']}")
        return 0
    if result["ok"]:
        state = "closed" if result["closed"] else "open"
        print(
            f"OK card {result['card']}: {result['events']} events, {state} at the checkpoint, score {result['score']}"
        )
        return 0
    print(f"FAIL {result['error']}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
