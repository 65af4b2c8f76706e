"""dataset samples: a sample's check (its submission), report and the organizers' review

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 09:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "samples",
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("contributor", sa.String(length=64), nullable=False),
        sa.Column("llm", sa.Text(), nullable=False),
        sa.Column("problem", sa.String(length=200), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=True),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("review", sa.String(length=16), nullable=False),
        sa.Column("review_comment", sa.Text(), nullable=False),
        sa.Column("reviewer_id", sa.Integer(), nullable=True),
        sa.Column("reviewed_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("checked_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["reviewer_id"],
            ["users.id"],
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("submission_id"),
    )
    op.create_index("ix_samples_review", "samples", ["review", "submission_id"], unique=False)
    op.create_index(op.f("ix_samples_user_id"), "samples", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_samples_user_id"), table_name="samples")
    op.drop_index("ix_samples_review", table_name="samples")
    op.drop_table("samples")
