"""``ledger keygen``, ``checkpoint``, ``prove`` and ``check``: signed checkpoints and evidence files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ledger.cli.common import LedgerCommandError, open_ledger, write_output

if TYPE_CHECKING:
    from ledger.services.checkpoints import CheckpointReport
    from ledger.storage.base import LogStore

_KEY = click.Path(dir_okay=False, path_type=Path)
_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LedgerCommandError(f"cannot read the {what} {path}: {getattr(e, 'strerror', None) or e}", 2) from None


@click.command()
@click.argument("name")
@click.option("-o", "--output", "out", type=_KEY, required=True, help="The private key file (KEY.pub: its public key).")
def keygen(name: str, out: Path) -> None:
    """Make an Ed25519 key NAME for signing checkpoints.

    Writes the private key to KEY (mode 0600; keep it secret) and the verifier key to KEY.pub (one line,
    `NAME+KEYID+KEY` as C2SP signed notes write it; publish it). Never overwrites either file.
    """
    from ledger.services.signing import keygen as make_key

    pub = make_key(name, out)
    click.echo(f"private key {out} (keep it secret), public key {pub}: {pub.read_text().strip()}")


@click.command("checkpoint")
@click.option("--key", "key", type=_FILE, required=True, help="The private key (from `ledger keygen`).")
@click.option("-o", "--output", "out", default=None, help="Write the checkpoint to this file (default: stdout).")
@click.option("--origin", default=None, help="The log's name on the checkpoint's first line (default: the key's name).")
@click.pass_context
def checkpoint_cmd(ctx: click.Context, key: Path, out: str | None, origin: str | None) -> None:
    """Sign the log's current tree head: a C2SP tlog checkpoint (origin, size, root hash, the stream-heads root).

    The ledger keeps every checkpoint it signs. Publish the checkpoint (a git repository, a web page): anyone
    with the public key can then check that the log still extends it (`ledger verify --checkpoint`), and check
    evidence files proved against it (`ledger check`).
    """
    from ledger.services.checkpoints import make_checkpoint
    from ledger.services.signing import load_signer

    signer = load_signer(key)
    with open_ledger(ctx, write=True) as ledger:
        note = make_checkpoint(ledger.store, signer, origin)
    write_output(note[:-1], out)


def verify_checkpoint_files(store: LogStore, checkpoint: Path, key: Path) -> CheckpointReport:
    """Read the checkpoint and key files and check the log against them (for ``ledger verify``)."""
    from ledger.services.checkpoints import verify_checkpoint
    from ledger.services.signing import load_verifier

    verifier = load_verifier(key)
    return verify_checkpoint(store, _read_text(checkpoint, "checkpoint"), verifier)
