"""A partial index of the events that carry a run's usage (``run_usage``): the cost of a tag's cards
(``compare --group``) reads those few events of each card through it, not every event of every card of the tag.

An index only, on both backends: the table keeps its shape, so SQLite's append-only triggers stay as they are.

Revision ID: 0010_usage_index
Revises: 0009_play_keys
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_usage_index"
down_revision = "0009_play_keys"
branch_labels = None
depends_on = None

WHERE = sa.text("type = 'run_usage'")


def upgrade() -> None:
    op.create_index("ix_events_run_usage", "events", ["stream", "version"], sqlite_where=WHERE, postgresql_where=WHERE)


def downgrade() -> None:
    op.drop_index("ix_events_run_usage", table_name="events")
