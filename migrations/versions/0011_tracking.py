"""One way for every read model to follow a log: ``tracking``, a row per follower with the position it reflects.

The followers are the cards summary (``summary``, with its tag figures), the Merkle tree (``merkle``) and each
source a copy came from (``copy:<source>``). A row holds the ``seq`` of the last event its read model reflects,
that event's hash (so a reader can tell the position still names the event the log holds) and a count of the
follower's own (the tree's size, the streams the source held). It is written in the transaction that advances its
read model (see ``ledger/store/tracking.py``).

It replaces ``summary_position``, ``merkle_state`` and ``copy_marks``, whose rows are moved here. The tree's row
keeps the guard ``merkle_state`` had: an UPDATE that would move it back or rename it, and its DELETE, are refused.
Only tables are created and dropped (no batch rebuild of ``events``), so the events' triggers stay as they are.

Revision ID: 0011_tracking
Revises: 0010_usage_index
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_tracking"
down_revision = "0010_usage_index"
branch_labels = None
depends_on = None

_AT = "coalesce((SELECT e.hash FROM events e WHERE e.seq = {seq}), '')"
#: The tree's row moves forward only (``merkle_state``'s guard, now on its row of ``tracking``).
_REWIND = "OLD.name = 'merkle' AND (NEW.name <> OLD.name OR NEW.n < OLD.n OR NEW.seq < OLD.seq)"
_SQLITE_REFUSE = "BEGIN SELECT RAISE(ABORT, 'the Merkle tree is append-only: {op} on tracking refused'); END"
SQLITE_TRIGGERS = [
    f"CREATE TRIGGER tracking_tree_no_rewind BEFORE UPDATE ON tracking WHEN {_REWIND} "
    + _SQLITE_REFUSE.format(op="UPDATE"),
    "CREATE TRIGGER tracking_tree_no_delete BEFORE DELETE ON tracking WHEN OLD.name = 'merkle' "
    + _SQLITE_REFUSE.format(op="DELETE"),
]
# ledger_tree_append_only() is migration 0005's; ALWAYS, as the tree's other triggers.
PG_TRIGGERS = [
    "CREATE TRIGGER tracking_tree_no_rewind BEFORE UPDATE ON tracking FOR EACH ROW "
    f"WHEN ({_REWIND}) EXECUTE FUNCTION ledger_tree_append_only()",
    "CREATE TRIGGER tracking_tree_no_delete BEFORE DELETE ON tracking FOR EACH ROW "
    "WHEN (OLD.name = 'merkle') EXECUTE FUNCTION ledger_tree_append_only()",
    "CREATE TRIGGER tracking_no_truncate BEFORE TRUNCATE ON tracking FOR EACH STATEMENT "
    "EXECUTE FUNCTION ledger_tree_append_only()",
    "ALTER TABLE tracking ENABLE ALWAYS TRIGGER tracking_tree_no_rewind",
    "ALTER TABLE tracking ENABLE ALWAYS TRIGGER tracking_tree_no_delete",
    "ALTER TABLE tracking ENABLE ALWAYS TRIGGER tracking_no_truncate",
]


def upgrade() -> None:
    big = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "tracking",
        sa.Column("name", sa.String(1100), primary_key=True),
        sa.Column("seq", big, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("n", big, nullable=False),
    )
    op.execute(f"INSERT INTO tracking SELECT 'summary', seq, {_AT.format(seq='p.seq')}, 0 FROM summary_position p")
    op.execute(
        f"INSERT INTO tracking SELECT 'merkle', last_seq, {_AT.format(seq='s.last_seq')}, size FROM merkle_state s"
    )
    op.execute("INSERT INTO tracking SELECT 'copy:' || source, seq, hash, streams FROM copy_marks")
    for table in ("summary_position", "merkle_state", "copy_marks"):
        op.drop_table(table)
    for stmt in SQLITE_TRIGGERS if op.get_bind().dialect.name == "sqlite" else PG_TRIGGERS:
        op.execute(stmt)


def downgrade() -> None:
    big = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "summary_position",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", big, nullable=False),
    )
    op.create_table(
        "merkle_state",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("size", big, nullable=False),
        sa.Column("last_seq", big, nullable=False),
    )
    op.create_table(
        "copy_marks",
        sa.Column("source", sa.String(1000), primary_key=True),
        sa.Column("seq", big, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("streams", big, nullable=False),
    )
    op.execute("INSERT INTO summary_position SELECT 1, seq FROM tracking WHERE name = 'summary'")
    op.execute("INSERT INTO merkle_state SELECT 1, n, seq FROM tracking WHERE name = 'merkle'")
    op.execute("INSERT INTO copy_marks SELECT substr(name, 6), seq, hash, n FROM tracking WHERE name LIKE 'copy:%'")
    op.drop_table("tracking")
    old_when = "NEW.id <> OLD.id OR NEW.size < OLD.size OR NEW.last_seq < OLD.last_seq"
    if op.get_bind().dialect.name == "sqlite":
        refuse = "BEGIN SELECT RAISE(ABORT, 'the Merkle tree is append-only: {op} on merkle_state refused'); END"
        op.execute(
            f"CREATE TRIGGER merkle_state_no_rewind BEFORE UPDATE ON merkle_state WHEN {old_when} "
            + refuse.format(op="UPDATE")
        )
        op.execute("CREATE TRIGGER merkle_state_no_delete BEFORE DELETE ON merkle_state " + refuse.format(op="DELETE"))
        return
    run = "EXECUTE FUNCTION ledger_tree_append_only()"
    for stmt in (
        f"CREATE TRIGGER merkle_state_no_rewind BEFORE UPDATE ON merkle_state FOR EACH ROW WHEN ({old_when}) {run}",
        f"CREATE TRIGGER merkle_state_no_delete BEFORE DELETE ON merkle_state FOR EACH ROW {run}",
        f"CREATE TRIGGER merkle_state_no_truncate BEFORE TRUNCATE ON merkle_state FOR EACH STATEMENT {run}",
        "ALTER TABLE merkle_state ENABLE ALWAYS TRIGGER merkle_state_no_rewind",
        "ALTER TABLE merkle_state ENABLE ALWAYS TRIGGER merkle_state_no_delete",
        "ALTER TABLE merkle_state ENABLE ALWAYS TRIGGER merkle_state_no_truncate",
    ):
        op.execute(stmt)
