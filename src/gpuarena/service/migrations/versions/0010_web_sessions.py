"""web_sessions: a signed-in browser's session, revoked on the server when it signs out

Issue 46: the session cookie carried the token's id only, so a copy of the cookie kept
working after sign-out. The cookie now carries a random key whose SHA-256 is a row here;
signing out revokes the row.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29 15:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["token_id"], ["tokens.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("hash"),
    )
    op.create_index("ix_web_sessions_token_id", "web_sessions", ["token_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_web_sessions_token_id", table_name="web_sessions")
    op.drop_table("web_sessions")
