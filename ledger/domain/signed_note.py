"""C2SP signed notes and tlog checkpoints, pure (see docs/evidence-format.md for the stream-heads extension)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

import msgspec

ED25519 = 1  # the signed-note signature type of Ed25519
COSIGNATURE_V1 = 4  # the key type of Ed25519 cosignatures (https://c2sp.org/tlog-cosignature)
KEY_TYPES = {ED25519: "a log's (checkpoint) key", COSIGNATURE_V1: "a witness's (cosignature/v1) key"}
DASH = "\u2014 "  # each signature line starts with an em dash and a space
HEADS_LINE = "stream-heads"

# A key name: no whitespace, no "+", no control characters (the spec's own rule).
_NAME = re.compile(r"[^\s+\x00-\x1f\x7f]+")


class NoteError(ValueError):
    """A note, key or checkpoint that is malformed (the message says what)."""


class Signature(msgspec.Struct, frozen=True):
    name: str
    key_id: bytes
    sig: bytes


class Checkpoint(msgspec.Struct, frozen=True):
    text: str
    origin: str
    size: int
    root: bytes
    heads_count: int
    heads_root: bytes
    signatures: tuple[Signature, ...]


def check_name(name: str) -> str:
    """``name`` if it can name a key (non-empty, no whitespace or ``+``); else :class:`NoteError`."""
    if not _NAME.fullmatch(name):
        raise NoteError(f"{name!r} cannot name a key: use letters, digits and punctuation, no spaces or '+'")
    return name


def key_id(name: str, public_key: bytes, key_type: int = ED25519) -> bytes:
    """The signed-note key id: the first 4 bytes of SHA-256(name || 0x0A || type || public key)."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([key_type]) + public_key).digest()[:4]


def verifier_key(name: str, public_key: bytes, key_type: int = ED25519) -> str:
    """The verifier key line ``<name>+<hex key id>+<base64(type || public key)>``."""
    enc = base64.b64encode(bytes([key_type]) + public_key).decode()
    return f"{check_name(name)}+{key_id(name, public_key, key_type).hex()}+{enc}"


def signer_key(name: str, seed: bytes, public_key: bytes, key_type: int = ED25519) -> str:
    """The private key line (Go's ``note`` format): ``PRIVATE+KEY+<name>+<hex key id>+<base64(type || seed)>``."""
    enc = base64.b64encode(bytes([key_type]) + seed).decode()
    return f"PRIVATE+KEY+{check_name(name)}+{key_id(name, public_key, key_type).hex()}+{enc}"


def _b64(text: str, what: str) -> bytes:
    # Only the canonical spelling: base64's unused low bits would let two texts carry the same bytes.
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise NoteError(f"{what} is not base64") from e
    if base64.b64encode(raw).decode() != text:
        raise NoteError(f"{what} is not canonical base64")
    return raw


def _key_fields(line: str, prefix: str, what: str, key_type: int = ED25519) -> tuple[str, bytes, bytes]:
    """(name, key id, key bytes) of a key line of type ``key_type``, ``prefix`` before the name."""
    if not line.startswith(prefix):
        raise NoteError(f"not a {what}")
    parts = line[len(prefix) :].split("+", 2)
    if len(parts) != 3:
        raise NoteError(f"not a {what}: expected name+keyid+key")
    name, hex_id, enc = parts
    check_name(name)
    if not re.fullmatch(r"[0-9a-f]{8}", hex_id):
        raise NoteError(f"not a {what}: the key id must be 8 lowercase hex digits")
    raw = _b64(enc, f"the {what}")
    if len(raw) == 33 and raw[0] != key_type and raw[0] in KEY_TYPES:
        raise NoteError(f"not {KEY_TYPES[key_type]}: this is {KEY_TYPES[raw[0]]}")
    if len(raw) != 33 or raw[0] != key_type:
        raise NoteError(f"not a {what}: only Ed25519 keys (type {key_type}, 32 bytes) are supported")
    return name, bytes.fromhex(hex_id), raw[1:]


def parse_verifier_key(line: str, key_type: int = ED25519) -> tuple[str, bytes]:
    """(name, public key) of a verifier key line of ``key_type``; checks the key id against the key."""
    name, kid, public = _key_fields(line.strip(), "", "verifier key", key_type)
    if key_id(name, public, key_type) != kid:
        raise NoteError("not a verifier key: its key id does not match its name and key")
    return name, public


def parse_signer_key(line: str, key_type: int = ED25519) -> tuple[str, bytes, bytes]:
    """(name, key id, seed) of a private key line (the id is checked by the caller, who derives the public key)."""
    return _key_fields(line.strip(), "PRIVATE+KEY+", "private key", key_type)


def checkpoint_text(origin: str, size: int, root: bytes, heads_count: int, heads_root: bytes) -> str:
    check_name(origin)
    r, h = base64.b64encode(root).decode(), base64.b64encode(heads_root).decode()
    return f"{origin}\n{size}\n{r}\n{HEADS_LINE} {heads_count} {h}\n"


def signature_line(name: str, public_key: bytes, sig: bytes, key_type: int = ED25519) -> str:
    return f"{DASH}{name} {base64.b64encode(key_id(name, public_key, key_type) + sig).decode()}\n"


def _number(text: str, what: str) -> int:
    if not re.fullmatch(r"0|[1-9][0-9]{0,18}", text):
        raise NoteError(f"the {what} {text!r} is not a decimal number")
    return int(text)


def _hash(text: str, what: str) -> bytes:
    raw = _b64(text, what)
    if len(raw) != 32:
        raise NoteError(f"the {what} is not a base64 SHA-256 hash")
    return raw


def parse_checkpoint(note: str) -> Checkpoint:
    """Split a signed checkpoint into its text and signatures and read the text (the signatures are not checked)."""
    text, sep, sigs = note.partition("\n\n")
    if not sep or not text:
        raise NoteError("not a signed note: no blank line between the text and the signatures")
    text += "\n"
    if any(c < " " and c != "\n" for c in text):
        raise NoteError("not a signed note: control characters in the text")
    lines = text[:-1].split("\n")
    if len(lines) < 4:
        raise NoteError("not a checkpoint: it needs an origin, a tree size, a root hash and the stream-heads line")
    origin = check_name(lines[0]) if lines[0] else ""
    if not origin:
        raise NoteError("not a checkpoint: an empty origin line")
    size = _number(lines[1], "tree size")
    root = _hash(lines[2], "root hash")
    heads = [ln for ln in lines[3:] if ln.startswith(HEADS_LINE + " ")]
    if len(heads) != 1:
        raise NoteError(f"not a checkpoint of this ledger: it needs exactly one '{HEADS_LINE}' line")
    fields = heads[0].split(" ")
    if len(fields) != 3:
        raise NoteError(f"the '{HEADS_LINE}' line must be '{HEADS_LINE} COUNT ROOT'")
    signatures = []
    if not sigs.endswith("\n"):
        raise NoteError("not a signed note: it must end with a newline")
    for line in sigs[:-1].split("\n"):
        if not line.startswith(DASH):
            raise NoteError("not a signed note: a signature line must start with an em dash")
        name, space, enc = line[len(DASH) :].rpartition(" ")
        raw = _b64(enc, "a signature")
        if not space or len(raw) < 5:
            raise NoteError("not a signed note: a signature line must be '\u2014 NAME BASE64'")
        if not _NAME.fullmatch(name):
            raise NoteError(
                f"not a signed note: a signature line's key name {name!r} is empty or holds a space, a '+' or a "
                "control character"
            )
        signatures.append(Signature(name, raw[:4], raw[4:]))
    return Checkpoint(
        text=text,
        origin=origin,
        size=size,
        root=root,
        heads_count=_number(fields[1], "stream-heads count"),
        heads_root=_hash(fields[2], "stream-heads root"),
        signatures=tuple(signatures),
    )


def signatures_by(cp: Checkpoint, name: str, public_key: bytes, key_type: int = ED25519) -> list[bytes]:
    """The signatures in ``cp`` that claim to be by this key (same name and key id)."""
    kid = key_id(name, public_key, key_type)
    return [s.sig for s in cp.signatures if s.name == name and s.key_id == kid]


# -- cosignatures (https://c2sp.org/tlog-cosignature, Ed25519) -------------------------------------------------------


def cosigned_message(text: str, timestamp: int) -> str:
    """What a witness signs: ``cosignature/v1``, ``time <POSIX seconds>``, then the checkpoint's text."""
    return f"cosignature/v1\ntime {timestamp}\n{text}"


def cosignature_line(name: str, public_key: bytes, timestamp: int, sig: bytes) -> str:
    """A cosignature line: em dash, the witness's name, base64(key id || u64 timestamp || signature)."""
    return signature_line(name, public_key, timestamp.to_bytes(8, "big") + sig, COSIGNATURE_V1)


def cosignatures_by(cp: Checkpoint, name: str, public_key: bytes) -> list[tuple[int, bytes]]:
    """The (timestamp, signature) of each cosignature in ``cp`` that claims to be by this witness key."""
    out = []
    for sig in signatures_by(cp, name, public_key, COSIGNATURE_V1):
        if len(sig) == 72 and (ts := int.from_bytes(sig[:8], "big")) < 2**63:
            out.append((ts, sig[8:]))
    return out
