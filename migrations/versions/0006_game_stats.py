"""Per game figures in the cards summary (``card_summary.game_stats``), filled from the log.

``ledger compare --tag`` and the viewer's compare page aggregate them per tag, game and level in one read of the
summary (see ``ledger/app/tag_stats.py``). An added column (a plain ``ALTER TABLE ... ADD COLUMN`` on both
backends, no table rebuilt): the events table and its triggers are not touched. The whole summary is then rebuilt
from the log, as ``0003_summary`` first built it, so every row has the column.

Revision ID: 0006_game_stats
Revises: 0005_tree_append_only
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_game_stats"
down_revision = "0005_tree_append_only"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("card_summary", sa.Column("game_stats", sa.Text, nullable=False, server_default="[]"))
    from ledger.store.summary import fill

    fill(op.get_bind())


def downgrade() -> None:
    with op.batch_alter_table("card_summary") as batch:
        batch.drop_column("game_stats")
