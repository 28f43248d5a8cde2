"""The log's Merkle tree (RFC 9162 2.1), pure: proofs are built from hashes of ranges of perfect subtrees."""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

Part = tuple[int, int]  # (level, index): the perfect subtree of 2**level leaves from leaf index * 2**level
Range = tuple[int, int]  # [lo, hi): leaves lo .. hi-1, a subtree of the RFC's shape

_sha256 = hashlib.sha256


class ProofError(ValueError):
    """A proof that cannot be checked at all (wrong length, indices out of order or out of the tree)."""


def leaf_hash(entry: bytes) -> bytes:
    return _sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return _sha256(b"\x01" + left + right).digest()


EMPTY_ROOT = _sha256(b"").digest()


def split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n >= 2): where the RFC splits a tree of n leaves."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(leaves: Sequence[bytes]) -> bytes:
    """The RFC's MTH over leaf hashes, level by level, an odd last node carried up unpaired (the same tree)."""
    if not leaves:
        return EMPTY_ROOT
    level = list(leaves)
    sha256 = _sha256
    while len(level) > 1:
        nxt = [sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) & 1:
            nxt.append(level[-1])
        level = nxt
    return level[0]


class Frontier:
    """The compact range of a growing tree: the roots of its perfect subtrees, largest first."""

    def __init__(self, size: int = 0, parts: Sequence[tuple[int, bytes]] = ()) -> None:
        self.size = size
        self.stack: list[tuple[int, bytes]] = list(parts)

    def extend(self, leaves: Iterable[bytes], keep_from: int) -> list[tuple[int, int, bytes]]:
        """Append leaf hashes; returns the subtrees they complete at ``keep_from`` levels and above."""
        out = []
        stack, i, sha256 = self.stack, self.size, _sha256
        for leaf in leaves:
            level, h = 0, leaf
            while stack and stack[-1][0] == level:
                h = sha256(b"\x01" + stack.pop()[1] + h).digest()
                level += 1
                if level >= keep_from:
                    out.append((level, i >> level, h))
            stack.append((level, h))
            i += 1
        self.size = i
        return out

    def root(self) -> bytes:
        return fold([h for _, h in self.stack])


def perfect_parts(lo: int, hi: int) -> list[Part]:
    """The perfect subtrees leaves ``lo`` .. ``hi``-1 are made of, largest first (from 0: a :class:`Frontier`'s)."""
    out = []
    while hi > lo:
        n = hi - lo
        k = n if n & (n - 1) == 0 else split(n)
        level = k.bit_length() - 1
        out.append((level, lo >> level))
        lo += k
    return out


def fold(hashes: Sequence[bytes]) -> bytes:
    """The hash of a range from the hashes of its :func:`perfect_parts`, in order."""
    if not hashes:
        return EMPTY_ROOT
    h = hashes[-1]
    for left in reversed(hashes[:-1]):
        h = node_hash(left, h)
    return h


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """The ranges of the RFC 9162 inclusion proof of leaf ``index`` (PATH(m, D[n])), bottom up."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size}")
    out: list[Range] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = split(hi - lo)
        if index < lo + k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo += k
    out.reverse()
    return out


def consistency_ranges(old: int, new: int) -> list[Range]:
    """The ranges of the RFC 9162 consistency proof from ``old`` leaves to ``new`` (PROOF(m, D[n]))."""
    if not 0 <= old <= new:
        raise ProofError(f"no consistency proof from {old} to {new} leaves")
    if old in (0, new):
        return []
    out: list[Range] = []
    lo, hi, m, whole = 0, new, old, True
    while hi - lo != m:
        k = split(hi - lo)
        if m <= k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo, m, whole = lo + k, m - k, False
    if not whole:
        out.append((lo, hi))
    out.reverse()
    return out


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 section 2.1.3.2."""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> bool:
    """RFC 9162 section 2.1.4.2."""
    if not 0 <= old <= new:
        return False
    if old == new:
        return not proof and old_root == new_root
    if old == 0:
        return not proof
    path = list(proof)
    if old & (old - 1) == 0:
        path.insert(0, old_root)
    if not path:
        return False
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # The same walk as verify_inclusion's, with two running hashes: kept as RFC 9162 writes each, to check by eye.
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


def multiproof_ranges(indices: Sequence[int], size: int) -> list[Range]:
    """The ranges whose hashes prove every leaf of ``indices`` at once, in left-to-right order."""
    _check_indices(indices, size)
    out: list[Range] = []

    def walk(lo: int, hi: int, a: int, b: int) -> None:
        if a == b:
            out.append((lo, hi))
        elif hi - lo > b - a:  # (a subtree whose every leaf is wanted needs no hash)
            mid = lo + split(hi - lo)
            c = bisect.bisect_left(indices, mid, a, b)
            walk(lo, mid, a, c)
            walk(mid, hi, c, b)

    if size:
        walk(0, size, 0, len(indices))
    return out


def multiproof_root(indices: Sequence[int], leaves: Sequence[bytes], proof: Sequence[bytes], size: int) -> bytes:
    """The root that ``leaves`` at ``indices`` and the :func:`multiproof_ranges` hashes make (else ProofError)."""
    _check_indices(indices, size)
    if len(leaves) != len(indices):
        raise ProofError(f"{len(leaves)} leaves for {len(indices)} indices")
    if not size:
        raise ProofError("an empty tree proves no leaf")
    cursor = 0

    def walk(lo: int, hi: int, a: int, b: int) -> bytes:
        nonlocal cursor
        if a == b:
            if cursor >= len(proof):
                raise ProofError("the proof has too few hashes")
            cursor += 1
            return proof[cursor - 1]
        if hi - lo == b - a:  # every leaf given: hash them without splitting the index list further
            return root_of(leaves[a:b])
        mid = lo + split(hi - lo)
        c = bisect.bisect_left(indices, mid, a, b)
        left = walk(lo, mid, a, c)
        return node_hash(left, walk(mid, hi, c, b))

    root = walk(0, size, 0, len(indices))
    if cursor != len(proof):
        raise ProofError(f"the proof has {len(proof) - cursor} hash(es) too many")
    return root


def _check_indices(indices: Sequence[int], size: int) -> None:
    for a, b in itertools.pairwise(indices):
        if b <= a:
            raise ProofError("leaf indices must be strictly increasing")
    if indices and not (indices[0] >= 0 and indices[-1] < size):
        raise ProofError(f"a leaf index is outside the tree of {size}")


def tree_hashes(ranges: Sequence[Range], lookup: Callable[[set[Part]], Mapping[Part, bytes]]) -> list[bytes]:
    """The hashes of ``ranges``, fetching the perfect subtrees they need in one call of ``lookup``."""
    parts = lookup({p for lo, hi in ranges for p in perfect_parts(lo, hi)})
    return [fold([parts[p] for p in perfect_parts(lo, hi)]) for lo, hi in ranges]


def event_leaf(chain_hash: str) -> bytes:
    """The leaf hash of a stored event: its 32-byte chain hash, which covers everything else."""
    return leaf_hash(bytes.fromhex(chain_hash))


def head_entry(stream: str, version: int, chain_hash: str) -> bytes:
    """A stream-heads entry: the length-prefixed name, the version (8 bytes, big endian) and the head's hash."""
    name = stream.encode("utf-8")
    return len(name).to_bytes(8, "big") + name + version.to_bytes(8, "big") + bytes.fromhex(chain_hash)


def heads_tree(heads: Sequence[tuple[str, int, str]]) -> list[bytes]:
    return [leaf_hash(head_entry(s, v, h)) for s, v, h in sorted(heads)]


def proof_from_leaves(leaves: Sequence[bytes], ranges: Sequence[Range]) -> list[bytes]:
    """The hashes of ``ranges`` of a tree held whole in memory (a small one: the stream-heads tree)."""
    return [root_of(leaves[lo:hi]) for lo, hi in ranges]
