"""The cards summary follows the log by position: ``summary_position`` holds the ``seq`` of the last event the
summary tables reflect (see ``ledger/store/summary.py``).

The tables are rebuilt from the log here and the position starts at the log's last ``seq``: a ledger written at an
earlier revision by this version's appends (which no longer touch the summary) is right afterwards too. Only a
table is created (no batch rebuild of ``events``), so the append-only triggers stay as they are
(tests/test_store_contract.py upgrades a ledger from the previous revision and checks them).

Revision ID: 0007_summary_position
Revises: 0006_game_stats
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_summary_position"
down_revision = "0006_game_stats"
branch_labels = None
depends_on = None


def upgrade() -> None:
    big = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "summary_position",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", big, nullable=False),
    )
    from ledger.store.summary import fill

    fill(op.get_bind())
    op.execute("INSERT INTO summary_position (id, seq) SELECT 1, coalesce(max(seq), 0) FROM events")


def downgrade() -> None:
    op.drop_table("summary_position")
