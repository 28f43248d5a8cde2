"""``ledger keygen``, ``checkpoint``, ``prove``, ``consistency`` and ``check``: signed checkpoints and proofs."""

from __future__ import annotations

from pathlib import Path

import click

from ledger.cli.common import (
    LedgerCommandError,
    allow_broken_option,
    emit,
    environments_option,
    json_option,
    open_ledger,
    out_option,
    write_output,
)

_KEY = click.Path(dir_okay=False, path_type=Path)
_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise LedgerCommandError(f"cannot read {path}: {e.strerror or e}", 2) from None


@click.command()
@click.argument("name")
@click.option("-o", "--output", "out", type=_KEY, required=True, help="The private key file (KEY.pub: its public key).")
@click.option(
    "--witness",
    "as_witness",
    is_flag=True,
    help="A witness's key, for `ledger witness` (C2SP tlog-cosignature v1, key type 0x04), not a log's.",
)
def keygen(name: str, out: Path, as_witness: bool) -> None:
    """An Ed25519 key named NAME: a log's, to sign checkpoints, or with --witness a witness's, to cosign other logs'
    checkpoints.

    Writes the private key to KEY (mode 0600; keep it secret) and the verifier key to KEY.pub (one line,
    `NAME+KEYID+KEY` as C2SP signed notes write it; publish it). Never overwrites either file.

    Examples:

    \b
      ledger keygen team.example/ledger -o team.key         # also writes team.key.pub
      ledger keygen witness.example/w1 --witness -o w1.key
    """
    from ledger.app.signing import keygen as make_key
    from ledger.domain.signed_note import COSIGNATURE_V1, ED25519

    pub = make_key(name, out, COSIGNATURE_V1 if as_witness else ED25519)
    click.echo(f"private key {out} (keep it secret), public key {pub}: {pub.read_text().strip()}")


@click.command("checkpoint")
@click.option("--key", "key", type=_FILE, required=True, help="The private key (from `ledger keygen`).")
@out_option("Write the checkpoint to this file (default: stdout).")
@click.option(
    "--origin",
    default=None,
    metavar="NAME",
    help="The log's name on the checkpoint's first line (default: the key's name).",
)
@click.pass_context
def checkpoint_cmd(ctx: click.Context, key: Path, out: str | None, origin: str | None) -> None:
    """A C2SP tlog checkpoint: origin, size, root hash, the stream-heads root.

    The ledger keeps every checkpoint it signs. Publish the checkpoint (a git repository, a web page): anyone
    with the public key can then check that the log still extends it (`ledger verify --checkpoint`), and check
    evidence files proved against it (`ledger check`).

    Examples:

    \b
      ledger checkpoint --key team.key -o checkpoint.txt
      ledger checkpoint --key team.key                    # print it
    """
    from ledger.app.checkpoints import make_checkpoint
    from ledger.app.output import check_writable
    from ledger.app.signing import load_signer

    signer = load_signer(key)
    check_writable(out)  # before signing: a checkpoint the ledger keeps but nobody received helps no one
    with open_ledger(ctx, write=True) as ledger:
        note = make_checkpoint(ledger.store, signer, origin)
    write_output(note[:-1], out)


@click.command()
@click.argument("card")
@click.option("--checkpoint", type=_FILE, required=True, help="The signed checkpoint to prove against.")
@out_option("Write the evidence file here (default: stdout).")
@allow_broken_option
@click.pass_context
def prove(ctx: click.Context, card: str, checkpoint: Path, out: str | None, allow_broken: bool) -> None:
    """Everything a reviewer needs to check the card's score with the public key alone.

    One JSON file: the checkpoint, the card's events as stored (up to the checkpoint's tree size) and its baseline
    set, an inclusion proof of all of them against the checkpoint's root, proofs that they end at each stream's
    head the checkpoint signed, and the exported scorecard. Check it with `ledger check`. Brings the ledger's
    Merkle tree up to date (it opens the ledger for writing).

    Examples:

    \b
      ledger prove CARD --checkpoint checkpoint.txt -o card.evidence.json
      ledger check card.evidence.json --key team.key.pub                   # what a reviewer runs
    """
    from ledger.app.checkpoints import prove as make
    from ledger.app.output import check_writable
    from ledger.app.signing import read_text

    note = read_text(checkpoint, "checkpoint")
    check_writable(out)
    with open_ledger(ctx, write=True) as ledger:
        broken = ledger.repository.read(ledger.resolve_card(card), allow_broken=allow_broken).broken
        text = make(ledger, card, note)
    if broken is not None:
        click.echo(f"Note: card {card} is BROKEN ({broken}): the evidence holds what the log holds", err=True)
    write_output(text, out)


@click.command()
@click.argument("old", type=_FILE)
@click.argument("new", type=_FILE)
@out_option("Write the consistency file here (default: stdout).")
@click.pass_context
def consistency(ctx: click.Context, old: Path, new: Path, out: str | None) -> None:
    """The file holds checkpoints OLD and NEW of this ledger and the RFC 9162 proof that NEW's tree extends OLD's.

    A reviewer holding both published checkpoints checks it with `ledger check FILE --key KEY.pub` (or
    scripts/verify_evidence.py), without the ledger: the log only grew between the two. Exit 1 if either
    checkpoint is not one of this ledger's trees.

    Examples:

    \b
      ledger consistency old.txt new.txt -o new.consistency.json
      ledger check new.consistency.json --key team.key.pub
    """
    from ledger.app.checkpoints import consistency as make
    from ledger.app.output import check_writable
    from ledger.app.signing import read_text

    old_note, new_note = read_text(old, "old checkpoint"), read_text(new, "new checkpoint")
    check_writable(out)
    with open_ledger(ctx, write=True) as ledger:
        text = make(ledger, old_note, new_note)
    write_output(text, out)


@click.command()
@click.argument("evidence", type=_FILE)
@click.option("--key", type=_FILE, required=True, help="The public key (KEY.pub) the checkpoint must be signed with.")
@environments_option("Also replay every action against the game code in this folder (as `ledger audit` does).")
@click.option(
    "--witness",
    "witnesses",
    type=_FILE,
    multiple=True,
    help="A witness's public key (from `ledger keygen --witness`); repeatable. The checkpoint must be cosigned.",
)
@click.option(
    "--quorum",
    type=click.IntRange(min=1),
    default=None,
    help="How many of the --witness keys must have cosigned (default: all).",
)
@json_option("One JSON object: ok, card, checkpoint_size, events, score, ...")
def check(
    evidence: Path,
    key: Path,
    environments: str | None,
    witnesses: tuple[Path, ...],
    quorum: int | None,
    as_json: bool,
) -> None:
    """Opens no ledger. Checks the checkpoint's signature, the inclusion proof of every event, the card's hash chain,
    that no later event of the card was left out, and that the scorecard is the one the calculator makes from the
    events; with --environments, the plays re-simulated; with --witness, that the checkpoint carries the
    cosignatures of at least --quorum of those witnesses.

    EVIDENCE may also be a consistency file from `ledger consistency`: both checkpoints signed by the key, and
    the newer tree an extension of the older one.

    Exit 0 if all of it holds, 1 otherwise (naming the first thing that failed); 2 when --environments holds
    none of the card's games (nothing re-simulated, as `ledger audit`).

    Examples:

    \b
      ledger check card.evidence.json --key team.key.pub
      ledger check card.evidence.json --key team.key.pub --environments environment_files
      ledger check card.evidence.json --key team.key.pub --json
    """
    from ledger.app.evidence_check import CheckOutcome, check_evidence, load_witnesses
    from ledger.app.signing import load_verifier

    verifier = load_verifier(key)
    cosigners = load_witnesses(witnesses, quorum)
    rep = check_evidence(_read(evidence), verifier, environments, cosigners, quorum)
    if rep.kind == "consistency" and environments is not None:
        raise LedgerCommandError("--environments replays a card's plays: a consistency file holds no card", 2)
    emit(CheckOutcome(rep, verifier.name, environments), as_json)


@click.command("witness")
@click.argument("checkpoint", type=_FILE)
@click.option("--key", type=_FILE, required=True, help="This witness's private key (from `ledger keygen --witness`).")
@click.option(
    "--log-key", type=_FILE, required=True, help="The log's public key (KEY.pub) the checkpoint is signed with."
)
@click.option(
    "--state",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The witness's folder: per log origin, the log's key and the last checkpoint cosigned (made if missing).",
)
@out_option("Write the cosigned checkpoint here (default: stdout).")
def witness_cmd(checkpoint: Path, key: Path, log_key: Path, state: Path, out: str | None) -> None:
    """C2SP tlog-witness, tlog-cosignature v1: the witness refuses a checkpoint that does not extend the last one it
    cosigned for that log (a split view).

    CHECKPOINT is a signed checkpoint, or a consistency file from `ledger consistency` whose newer checkpoint is
    cosigned. The witness cosigns only a checkpoint signed by the log's key that extends the last one it cosigned
    for that origin (the same tree, or a larger one with a consistency proof from exactly that tree), and records
    it; the first checkpoint of an origin is taken on trust. A fork (another root at a size it cosigned, a proof
    that fails), a smaller tree or another signer for the origin: exit 1, one line, nothing cosigned or recorded.
    Opens no ledger: one team's ledger can witness another's, and the other way round.

    Examples:

    \b
      ledger witness checkpoint.txt --log-key team.key.pub --key w1.key --state w1-state -o cosigned.txt
      ledger prove CARD --checkpoint cosigned.txt -o card.cosigned.json
      ledger check card.cosigned.json --key team.key.pub --witness w1.key.pub
    """
    from ledger.app.output import check_writable
    from ledger.app.signing import load_signer, load_verifier
    from ledger.app.witness import witness
    from ledger.domain.signed_note import COSIGNATURE_V1

    me = load_signer(key, COSIGNATURE_V1)
    log = load_verifier(log_key)
    raw = _read(checkpoint)
    check_writable(out)
    note = witness(raw, log, me, state)
    write_output(note[:-1], out)
