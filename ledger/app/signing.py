"""Ed25519 keys for signed checkpoints, via ``cryptography``, in the C2SP signed-note key formats."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ledger.domain import signed_note as sn
from ledger.errors import InputError


@dataclass(frozen=True)
class Signer:
    name: str
    key: Ed25519PrivateKey
    public: bytes

    def sign_line(self, text: str) -> str:
        return sn.signature_line(self.name, self.public, self.key.sign(text.encode("utf-8")))

    def cosign_line(self, text: str, timestamp: int) -> str:
        sig = self.key.sign(sn.cosigned_message(text, timestamp).encode("utf-8"))
        return sn.cosignature_line(self.name, self.public, timestamp, sig)


@dataclass(frozen=True)
class Verifier:
    name: str
    public: bytes

    def signed(self, cp: sn.Checkpoint) -> bool:
        return self.verifies(cp.text, sn.signatures_by(cp, self.name, self.public))

    def verifies(self, text: str, sigs: Sequence[bytes]) -> bool:
        key = Ed25519PublicKey.from_public_bytes(self.public)
        for sig in sigs:
            try:
                key.verify(sig, text.encode("utf-8"))
                return True
            except InvalidSignature:
                continue
        return False


def cosigned(witness: Verifier, cp: sn.Checkpoint) -> int | None:
    for ts, sig in sn.cosignatures_by(cp, witness.name, witness.public):
        if witness.verifies(sn.cosigned_message(cp.text, ts), [sig]):
            return ts
    return None


def _public_bytes(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def keygen(name: str, path: Path, key_type: int = sn.ED25519) -> Path:
    """Write a new private key to ``path`` (mode 0600) and its verifier key to ``path.pub``; returns the latter."""
    try:
        sn.check_name(name)
    except sn.NoteError as e:
        raise InputError(str(e)) from e
    pub = path.with_name(path.name + ".pub")
    for p in (path, pub):
        if os.path.lexists(p):
            raise InputError(f"{p} exists: keygen never overwrites a key (choose another path)")
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes_raw()
    public = _public_bytes(key)
    _write_new(path, sn.signer_key(name, seed, public, key_type) + "\n", 0o600)
    try:
        _write_new(pub, sn.verifier_key(name, public, key_type) + "\n", 0o644)
    except BaseException:
        path.unlink()
        raise
    return pub


def _write_new(path: Path, text: str, mode: int) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError as e:
        raise InputError(f"{path} exists: keygen never overwrites a key (choose another path)") from e
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror}") from e
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the {what} {path}: {getattr(e, 'strerror', None) or e}") from e


def parse_checkpoint(note: str, what: str = "the checkpoint") -> sn.Checkpoint:
    """The checkpoint ``note`` given as ``what``: an input error (exit 2) when it is not one."""
    try:
        return sn.parse_checkpoint(note)
    except sn.NoteError as e:
        raise InputError(f"{what}: {e}") from e


def load_signer(path: Path, key_type: int = sn.ED25519) -> Signer:
    try:
        name, kid, seed = sn.parse_signer_key(read_text(path, "private key"), key_type)
    except sn.NoteError as e:
        raise InputError(f"{path}: {e}") from e
    key = Ed25519PrivateKey.from_private_bytes(seed)
    public = _public_bytes(key)
    if sn.key_id(name, public, key_type) != kid:
        raise InputError(f"{path}: not a private key: its key id does not match its name and key")
    return Signer(name, key, public)


def load_verifier(path: Path, key_type: int = sn.ED25519) -> Verifier:
    try:
        name, public = sn.parse_verifier_key(read_text(path, "public key"), key_type)
    except sn.NoteError as e:
        raise InputError(f"{path}: {e}") from e
    return Verifier(name, public)
