"""The tag figures (``tag_figures``): per tag, game, level and figure, how many cards have each value, so that
``compare --tag`` reads a tag's figures in one range whatever its number of cards (see
``ledger/store/tag_figures.py``).

And ``copy_marks``: per source a copy last finished from, its last ``seq`` and hash (see
``ledger/store/copy_marks.py``), so a copy with nothing to do is told in two reads.

Only tables are created (no batch rebuild of ``events``), so the append-only triggers stay as they are. It is
filled from the summary rows as they stand (the previous revision keeps them equal to a rebuild from the log, and
catches them up to the log's head first).

Revision ID: 0008_tag_figures
Revises: 0007_summary_position
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_tag_figures"
down_revision = "0007_summary_position"
branch_labels = None
depends_on = None


def upgrade() -> None:
    big = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "tag_figures",
        sa.Column("tag", sa.String(400), primary_key=True),
        sa.Column("metric", sa.String(1), primary_key=True),
        sa.Column("game_id", sa.String(400), primary_key=True),
        sa.Column("level", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("retracted", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("value", sa.Float(53), primary_key=True),
        sa.Column("label", sa.Text, primary_key=True),
        sa.Column("n", big, nullable=False),
    )
    op.create_table(
        "copy_marks",
        sa.Column("source", sa.String(1000), primary_key=True),
        sa.Column("seq", big, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("streams", big, nullable=False),
    )
    from ledger.store.summary import fill_figures

    fill_figures(op.get_bind())


def downgrade() -> None:
    op.drop_table("copy_marks")
    op.drop_table("tag_figures")
