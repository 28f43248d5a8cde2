"""The log's Merkle tree beside it, and the checkpoints the ledger signed.

``merkle_nodes`` holds the hash of every perfect subtree of 16 leaves or more (smaller ones are recomputed from the
events' hashes when a proof needs them); ``merkle_state`` says how many events (leaves) the stored tree covers and
the ``seq`` of the last one; ``merkle_runs`` maps leaf positions to ``seq`` (a PostgreSQL sequence may skip
numbers); ``merkle_heads`` holds every stream's head at the stored tree's size. All four are brought up to date
from the events when a checkpoint or a proof is asked for, never by an append: they are derived, and ``verify
--checkpoint`` rebuilds the tree from the events instead of trusting them. ``merkle_checkpoints`` keeps every
checkpoint signed, append-only (triggers refuse UPDATE and DELETE).

Revision ID: 0004_merkle
Revises: 0002
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_merkle"
down_revision = "0003_summary"
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = [
    "CREATE TRIGGER merkle_checkpoints_no_update BEFORE UPDATE ON merkle_checkpoints "
    "BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only: UPDATE refused'); END",
    "CREATE TRIGGER merkle_checkpoints_no_delete BEFORE DELETE ON merkle_checkpoints "
    "BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only: DELETE refused'); END",
]

PG_TRIGGERS = [
    """
    CREATE OR REPLACE FUNCTION ledger_checkpoints_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'checkpoints are append-only: % refused', TG_OP;
    END
    $$
    """,
    "CREATE TRIGGER merkle_checkpoints_no_update BEFORE UPDATE ON merkle_checkpoints "
    "FOR EACH ROW EXECUTE FUNCTION ledger_checkpoints_append_only()",
    "CREATE TRIGGER merkle_checkpoints_no_delete BEFORE DELETE ON merkle_checkpoints "
    "FOR EACH ROW EXECUTE FUNCTION ledger_checkpoints_append_only()",
    # ALWAYS, as the events' triggers: a session with session_replication_role = replica skips ordinary ones.
    "ALTER TABLE merkle_checkpoints ENABLE ALWAYS TRIGGER merkle_checkpoints_no_update",
    "ALTER TABLE merkle_checkpoints ENABLE ALWAYS TRIGGER merkle_checkpoints_no_delete",
]

_BIG = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "merkle_nodes",
        sa.Column("level", sa.Integer, primary_key=True),
        sa.Column("idx", _BIG, primary_key=True),
        sa.Column("hash", sa.LargeBinary, nullable=False),
    )
    state = op.create_table(
        "merkle_state",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("size", _BIG, nullable=False),
        sa.Column("last_seq", _BIG, nullable=False),
    )
    op.bulk_insert(state, [{"id": 1, "size": 0, "last_seq": 0}])
    op.create_table(
        "merkle_runs",
        sa.Column("first_idx", _BIG, primary_key=True, autoincrement=False),
        sa.Column("first_seq", _BIG, nullable=False),
    )
    op.create_table(
        "merkle_heads",
        sa.Column("stream", sa.String(400), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.create_table(
        "merkle_checkpoints",
        sa.Column("id", _BIG, primary_key=True, autoincrement=True),
        sa.Column("size", _BIG, nullable=False),
        sa.Column("root", sa.String(64), nullable=False),
        sa.Column("heads_root", sa.String(64), nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("heads", sa.LargeBinary, nullable=False),
    )
    for stmt in SQLITE_TRIGGERS if op.get_bind().dialect.name == "sqlite" else PG_TRIGGERS:
        op.execute(stmt)


def downgrade() -> None:
    for table in ("merkle_checkpoints", "merkle_heads", "merkle_runs", "merkle_state", "merkle_nodes"):
        op.drop_table(table)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS ledger_checkpoints_append_only()")
