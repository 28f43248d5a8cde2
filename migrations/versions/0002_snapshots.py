"""A cache of card projections (snapshots), and CHECK constraints on ``events``.

The snapshots table is not part of the truth: deleting it changes no output. The CHECK constraints (versions
start at 1, hashes are 64 hex characters) need a table rebuild on SQLite (batch mode); the rebuild drops the
append-only triggers, so they are created again here (a test checks they exist at head).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

import importlib.util
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _create_triggers() -> None:
    spec = importlib.util.spec_from_file_location("_ledger_0001", Path(__file__).with_name("0001_events.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.create_triggers()


def upgrade() -> None:
    op.create_table(
        "snapshots",
        sa.Column("stream", sa.String(400), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
    )
    dialect = op.get_bind().dialect.name
    # Batch mode on SQLite copies the table to a new one: the rows (and seq values) survive, the triggers do not.
    with op.batch_alter_table("events", recreate="always" if dialect == "sqlite" else "auto") as batch:
        batch.create_check_constraint("ck_events_version", "version >= 1")
        batch.create_check_constraint("ck_events_hash", "length(hash) = 64 AND length(prev_hash) = 64")
    if dialect == "sqlite":
        _create_triggers()


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    with op.batch_alter_table("events", recreate="always" if dialect == "sqlite" else "auto") as batch:
        batch.drop_constraint("ck_events_hash", type_="check")
        batch.drop_constraint("ck_events_version", type_="check")
    if dialect == "sqlite":
        _create_triggers()
    op.drop_table("snapshots")
