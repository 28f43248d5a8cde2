"""The cards summary (``card_summary`` and ``card_summary_keys``), built from the log.

A projection kept by every append in its own transaction (see ``ledger/store/summary.py``); an existing ledger
gets it filled here from its events. The events table is not touched, so its append-only triggers stay as they
are (a test checks they exist at head).

Revision ID: 0003_summary
Revises: 0002
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_summary"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    big = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "card_summary",
        sa.Column("card_id", sa.String(400), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("opened", sa.String(40)),
        sa.Column("opened_key", big, nullable=False),
        sa.Column("closed", sa.String(40)),
        sa.Column("closed_key", big),
        sa.Column("close_reason", sa.String(40)),
        sa.Column("last_ts", sa.String(40)),
        sa.Column("last_key", big),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("games", sa.Integer, nullable=False),
        sa.Column("plays", sa.Integer, nullable=False),
        sa.Column("actions", sa.Integer, nullable=False),
        sa.Column("events", sa.Integer, nullable=False),
        sa.Column("levels", sa.Integer, nullable=False),
        sa.Column("level_count", sa.Integer, nullable=False),
        sa.Column("score", sa.Float(53), nullable=False),
        sa.Column("tags", sa.Text),
        sa.Column("game_ids", sa.Text, nullable=False),
        sa.Column("retracted", sa.String(40)),
        sa.Column("retract_reason", sa.Text),
    )
    # No index on actions or events: they move with every captured action, and each index would be one more
    # b-tree written per step; those two sorts scan the table.
    for name, cols in (
        ("ix_card_summary_opened", ["opened_key", "card_id"]),
        ("ix_card_summary_score", ["score", "opened_key", "card_id"]),
        ("ix_card_summary_state", ["state", "opened_key", "card_id"]),
    ):
        op.create_index(name, "card_summary", cols)
    op.create_table(
        "card_summary_keys",
        sa.Column("kind", sa.String(1), primary_key=True),
        sa.Column("value", sa.String(400), primary_key=True),
        sa.Column("card_id", sa.String(400), primary_key=True),
    )
    op.create_index("ix_card_summary_keys_card", "card_summary_keys", ["card_id"])
    from ledger.store.summary import COLUMNS, fill

    # The columns of this revision: a later one adds game_stats and fills the summary again.
    fill(op.get_bind(), [c for c in COLUMNS if c != "game_stats"])


def downgrade() -> None:
    op.drop_table("card_summary_keys")
    op.drop_table("card_summary")
