"""The append-only events table, its UNIQUE(stream, version) and the triggers that refuse UPDATE and DELETE.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = [
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END",
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE refused'); END",
]

PG_TRIGGERS = [
    """
    CREATE OR REPLACE FUNCTION ledger_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'events are append-only: % refused', TG_OP;
    END
    $$
    """,
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION ledger_events_append_only()",
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events FOR EACH ROW EXECUTE FUNCTION ledger_events_append_only()",
    "CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events "
    "FOR EACH STATEMENT EXECUTE FUNCTION ledger_events_append_only()",
    # ALWAYS: they fire even in a session with session_replication_role = replica, which skips ordinary triggers.
    "ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_update",
    "ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_delete",
    "ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_truncate",
]


def create_triggers() -> None:
    """(Re)create the append-only triggers for the current dialect; later migrations call this too."""
    dialect = op.get_bind().dialect.name
    for stmt in SQLITE_TRIGGERS if dialect == "sqlite" else PG_TRIGGERS:
        op.execute(stmt)


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("stream", sa.String(400), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("ts", sa.String(40), nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("stream", "version", name="uq_events_stream_version"),
    )
    create_triggers()


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute("DROP TABLE events")
        op.execute("DROP FUNCTION IF EXISTS ledger_events_append_only()")
    else:
        op.drop_table("events")
