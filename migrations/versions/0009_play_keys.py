"""The cards summary's keys name each card's plays: ``("p", guid)`` for the guid of every play it holds, so an import
finds the card that already holds a recording's plays with one index probe instead of loading every card.

The summary tables are rebuilt from the log here (one card at a time, as ``rebuild-summary`` does) and the
position set to the log's last ``seq``. No table changes shape, so the append-only triggers stay as they are
(tests/test_store_contract.py upgrades a ledger from the previous revision and checks them).

Revision ID: 0009_play_keys
Revises: 0008_tag_figures
Create Date: 2026-12-03
"""

from alembic import op

revision = "0009_play_keys"
down_revision = "0008_tag_figures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from ledger.store.summary import fill

    fill(op.get_bind())
    op.execute("UPDATE summary_position SET seq = (SELECT coalesce(max(seq), 0) FROM events) WHERE id = 1")


def downgrade() -> None:
    op.execute("DELETE FROM card_summary_keys WHERE kind = 'p'")
