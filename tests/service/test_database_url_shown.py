"""A PostgreSQL URL carries its password: what the service prints (serve's banner, `gpuarena db
upgrade`, a database that cannot be opened) masks it, since container logs are collected."""

from __future__ import annotations

import pytest

from gpuarena.errors import GpuarenaError
from gpuarena.service.db import shown_url
from gpuarena.service.migrate import upgrade

pytestmark = pytest.mark.quick


def test_the_password_is_masked_and_the_rest_kept() -> None:
    assert shown_url("postgresql://arena:s3cret@db:5432/arena") == "postgresql://arena:***@db:5432/arena"
    assert shown_url("sqlite:////srv/gpuarena.db") == "sqlite:////srv/gpuarena.db"
    assert "s3cret" not in shown_url("not a url s3cret")


def test_a_database_that_cannot_be_opened_is_named_without_its_password() -> None:
    with pytest.raises(GpuarenaError) as refused:
        upgrade("postgresql://arena:s3cret@127.0.0.1:1/arena")  # nothing listens on port 1
    assert "cannot open the database" in str(refused.value) and "s3cret" not in str(refused.value)
    assert "arena:***@127.0.0.1:1/arena" in str(refused.value)
