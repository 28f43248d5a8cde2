"""The Merkle tree's tables grow only, as the log does: triggers refuse what would rewrite a stored tree.

``merkle_nodes`` and ``merkle_runs`` are insert-only (UPDATE, DELETE and, on PostgreSQL, TRUNCATE refused);
``merkle_state`` and ``merkle_heads`` are updated as the tree grows, so an UPDATE is refused only when it would move
them back (a smaller size or last seq, a lower version of a stream's head) or rename their row; their DELETE is
refused. ``ledger checkpoint`` still rebuilds the tree from the events before it signs (a database owner can drop
triggers); these make a rewrite a deliberate act rather than a stray statement.

No batch operation here (a batch migration recreates a SQLite table and drops its triggers): a later migration
that batch-alters one of these tables must create its triggers again (:data:`SQLITE_TRIGGERS`).

Revision ID: 0005_tree_append_only
Revises: 0004_merkle
Create Date: 2026-12-03
"""

from alembic import op

revision = "0005_tree_append_only"
down_revision = "0004_merkle"
branch_labels = None
depends_on = None

_REFUSE = "BEGIN SELECT RAISE(ABORT, 'the Merkle tree is append-only: {op} on {table} refused'); END"

#: (trigger, table, operation, the condition under which it is refused: None for always).
TRIGGERS = [
    ("merkle_nodes_no_update", "merkle_nodes", "UPDATE", None),
    ("merkle_nodes_no_delete", "merkle_nodes", "DELETE", None),
    ("merkle_runs_no_update", "merkle_runs", "UPDATE", None),
    ("merkle_runs_no_delete", "merkle_runs", "DELETE", None),
    ("merkle_heads_no_rewind", "merkle_heads", "UPDATE", "NEW.stream <> OLD.stream OR NEW.version <= OLD.version"),
    ("merkle_heads_no_delete", "merkle_heads", "DELETE", None),
    (
        "merkle_state_no_rewind",
        "merkle_state",
        "UPDATE",
        "NEW.id <> OLD.id OR NEW.size < OLD.size OR NEW.last_seq < OLD.last_seq",
    ),
    ("merkle_state_no_delete", "merkle_state", "DELETE", None),
]
TABLES = ("merkle_nodes", "merkle_runs", "merkle_heads", "merkle_state")

SQLITE_TRIGGERS = [
    f"CREATE TRIGGER {name} BEFORE {what} ON {table} "
    + (f"WHEN {when} " if when else "")
    + _REFUSE.format(op=what, table=table)
    for name, table, what, when in TRIGGERS
]

PG_TRIGGERS = [
    """
    CREATE OR REPLACE FUNCTION ledger_tree_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'the Merkle tree is append-only: % on % refused', TG_OP, TG_TABLE_NAME;
    END
    $$
    """,
    *(
        f"CREATE TRIGGER {name} BEFORE {what} ON {table} FOR EACH ROW "
        + (f"WHEN ({when}) " if when else "")
        + "EXECUTE FUNCTION ledger_tree_append_only()"
        for name, table, what, when in TRIGGERS
    ),
    *(
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION ledger_tree_append_only()"
        for table in TABLES
    ),
    # ALWAYS, as the events' triggers: a session with session_replication_role = replica skips ordinary ones.
    *(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {name}" for name, table, _, _ in TRIGGERS),
    *(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_no_truncate" for table in TABLES),
]


def upgrade() -> None:
    for stmt in SQLITE_TRIGGERS if op.get_bind().dialect.name == "sqlite" else PG_TRIGGERS:
        op.execute(stmt)


def downgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    names = [(n, t) for n, t, _, _ in TRIGGERS] + ([(f"{t}_no_truncate", t) for t in TABLES] if pg else [])
    for name, table in names:
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if pg else ""))
    if pg:
        op.execute("DROP FUNCTION IF EXISTS ledger_tree_append_only()")
