"""jobs.preemptions: how often a running job was stopped for other users' waiting jobs

Issue 46, item 10: a job holding more than its user's share of the runners while other users'
jobs wait past a set time is pre-empted at its runner's heartbeat and queued again (not an
attempt); the count bounds how often one job is stopped.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29 12:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("preemptions", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("preemptions")
