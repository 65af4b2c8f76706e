"""web pages: problem owners (who may make a problem's solutions public)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 19:50:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("problems", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key("fk_problems_owner_id_users", "users", ["owner_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("problems", schema=None) as batch_op:
        batch_op.drop_constraint("fk_problems_owner_id_users", type_="foreignkey")
        batch_op.drop_column("owner_id")
