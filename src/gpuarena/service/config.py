"""Service settings: command-line options, else GPUARENA_* environment variables, else defaults."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

HOME_FOLDER = ".gpuarena"


def default_home(start: Path | None = None) -> Path:
    """GPUARENA_HOME; else the nearest `.gpuarena/` holding a database, from the current
    folder up (where `scripts/serve.sh` keeps its data: so `gpuarena users add` run in the
    clone reaches the server just started there); else ~/.gpuarena."""
    if os.environ.get("GPUARENA_HOME"):
        return Path(os.environ["GPUARENA_HOME"])
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / HOME_FOLDER / "gpuarena.db").is_file():
            return folder / HOME_FOLDER
    return Path.home() / HOME_FOLDER


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    home: Path = Field(default_factory=default_home)
    """Where the embedded SQLite database and caches live (GPUARENA_HOME; else the nearest
    .gpuarena/ with a database, from the current folder up; else ~/.gpuarena)."""
    database_url: str = ""
    """GPUARENA_DATABASE_URL; default sqlite:///<home>/gpuarena.db."""
    problem_roots: list[Path] = Field(default_factory=list)
    """Folders of problems to serve besides the bundled ones (GPUARENA_PROBLEMS, os.pathsep-separated)."""
    bundled_problems: bool = True
    submit_limit_per_minute: int = 60
    """Submissions per user per minute (GPUARENA_SUBMIT_LIMIT; 0: no limit)."""
    webhooks_allow_private: bool = False
    """Whether webhooks may call private and local addresses (GPUARENA_WEBHOOK_ALLOW_PRIVATE=1: a
    server on a closed network; off by default, so a user cannot make the server call itself)."""
    max_in_flight: int = 5
    """Submissions one user may have queued or running at once (GPUARENA_MAX_IN_FLIGHT; 0: no limit;
    admins are not limited)."""
    max_request_bytes: int = 2_000_000
    """Largest request body accepted, uploads included (GPUARENA_MAX_REQUEST_BYTES)."""
    lease_s: float = 60.0
    """How long a runner's claim holds without a heartbeat (GPUARENA_LEASE_S)."""
    max_attempts: int = 3
    """Claims per job before it ends as ERROR (a job whose runner keeps dying; GPUARENA_MAX_ATTEMPTS)."""
    preempt_after_s: float = 120.0
    """A running job is pre-empted (stopped, queued again, not counted as an attempt) when other
    users' jobs have waited this long while its user holds more than their share of the busy
    slots of its device kind (GPUARENA_PREEMPT_AFTER_S; 0: never)."""
    max_preemptions: int = 2
    """Times one job may be pre-empted; then it runs to its end (GPUARENA_MAX_PREEMPTIONS)."""
    streams_per_client: int = 8
    """Live event streams (GET /api/submissions/ID/events) one client may hold open at once: a
    signed-in user, else one address (GPUARENA_STREAMS_PER_CLIENT; 0: no limit)."""
    streams_total: int = 500
    """Live event streams open at once on this server process (GPUARENA_STREAMS_TOTAL; 0: no limit)."""
    stream_poll_s: float = 0.5
    """How often the one poller behind every live event stream reads the database (GPUARENA_STREAM_POLL_S)."""

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        env: dict[str, object] = {}
        if os.environ.get("GPUARENA_DATABASE_URL"):
            env["database_url"] = os.environ["GPUARENA_DATABASE_URL"]
        if os.environ.get("GPUARENA_PROBLEMS"):
            env["problem_roots"] = [Path(p) for p in os.environ["GPUARENA_PROBLEMS"].split(os.pathsep) if p]
        for key, name in (
            ("submit_limit_per_minute", "GPUARENA_SUBMIT_LIMIT"),
            ("max_in_flight", "GPUARENA_MAX_IN_FLIGHT"),
            ("max_request_bytes", "GPUARENA_MAX_REQUEST_BYTES"),
            ("lease_s", "GPUARENA_LEASE_S"),
            ("max_attempts", "GPUARENA_MAX_ATTEMPTS"),
            ("preempt_after_s", "GPUARENA_PREEMPT_AFTER_S"),
            ("max_preemptions", "GPUARENA_MAX_PREEMPTIONS"),
            ("streams_per_client", "GPUARENA_STREAMS_PER_CLIENT"),
            ("streams_total", "GPUARENA_STREAMS_TOTAL"),
            ("stream_poll_s", "GPUARENA_STREAM_POLL_S"),
            ("webhooks_allow_private", "GPUARENA_WEBHOOK_ALLOW_PRIVATE"),
        ):
            if os.environ.get(name):
                env[key] = os.environ[name]
        env.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls.model_validate(env)
        if not settings.database_url:
            settings.database_url = f"sqlite:///{settings.home / 'gpuarena.db'}"
        return settings

    def all_problem_roots(self) -> list[Path]:
        from gpuarena.bundled import bundled_root

        return ([bundled_root()] if self.bundled_problems else []) + list(self.problem_roots)
