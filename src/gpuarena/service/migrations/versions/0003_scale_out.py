"""scale-out: submission idempotency keys, the device slot that holds a job

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 19:45:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("client_key", sa.String(length=64), nullable=True))
        batch_op.create_unique_constraint("uq_submissions_client_key", ["user_id", "client_key"])
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("device", sa.String(length=64), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("device")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_constraint("uq_submissions_client_key", type_="unique")
        batch_op.drop_column("client_key")
